"""Configuration: defaults, recipes, dotted overrides, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
import yaml

from selfplay import config
from selfplay.config import Config, ConfigError, ExecutorConfig, describe, load, to_dict
from selfplay.curriculum.sampler import SHAPES
from selfplay.eval.code_benchmarks import CODE_BENCHMARKS
from selfplay.eval.cruxeval import PROMPT_FORMATS
from selfplay.eval.math_benchmarks import MATH_BENCHMARKS
from selfplay.executor.modules import OPTIONAL_MODULES
from selfplay.trainer.advantages import ESTIMATORS
from selfplay.trainer.schedule import SCHEDULES


def test_defaults_and_overrides(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("executor:\n  workers: 4\n  run_timeout_s: 2\n")
    cfg = load(recipe, ["executor.run_timeout_s=0.5", "executor.accept_missing=[namespaces]"])
    assert cfg.executor.workers == 4
    assert cfg.executor.run_timeout_s == 0.5
    assert cfg.executor.accept_missing == ("namespaces",)
    assert to_dict(cfg)["executor"]["accept_missing"] == ["namespaces"]
    assert load(None, ["trainer.lr=1e-5"]).trainer.lr == 1e-5  # YAML 1.1 reads this as text
    # a path with the data folder's placeholder is text YAML cannot read, and stays text
    assert load(None, ["seed.labeled={data}/set.jsonl"]).seed.labeled == ("{data}/set.jsonl",)
    assert load(None, ["run.folder={run}-{run}"]).run.folder == "{run}-{run}"
    assert load(None, ['seed.labeled=["{data}/a.jsonl", b.jsonl]']).seed.labeled == (
        "{data}/a.jsonl",
        "b.jsonl",
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["executor.wrokers=2"], "unknown config key executor.wrokers"),
        (["executor.workers=two"], "executor.workers: expected int"),
        (["executor.workers=1"], "at least 2"),
        (["executor.isolation=[landlok]"], "unknown isolation layer"),
        (["executor.extra_modules=[os]"], "extra_modules"),
        (["seed.labeled_limit=-5"], "seed.labeled_limit must be 0"),
        (["nonsense"], "section.field=value"),
        (["trainer.propose_weight=-1"], "trainer.propose_weight must be a finite number"),
        (["trainer.propose_weight=.nan"], "trainer.propose_weight: expected a finite number"),
        (["trainer.propose_kl_weight=-1"], "trainer.propose_kl_weight must be a finite"),
        (["trainer.propose_kl_weight=2"], "propose_kl_weight weighs the KL term"),
        # a flow list YAML cannot read (braces in an unquoted item) was taken as one path
        (["seed.labeled=[{data}/set.jsonl]"], r"not valid YAML.*quote items"),
        (["seed.labeled=[a.jsonl, b.jsonl"], r"not valid YAML.*quote items"),
        (["executor.isolation={a: {data}/x}"], r"not valid YAML.*quote items"),
    ],
)
def test_bad_configuration_is_refused_clearly(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(None, overrides)


def test_a_removed_key_names_its_replacement(tmp_path):
    """curriculum.rollouts (answers per task, for the sampler) disagreed with the answers a
    task gets; a recipe or saved configuration that still sets it is told what replaced it."""
    saved = tmp_path / "config.yaml"
    saved.write_text("curriculum:\n  run: old\n  rollouts: 8\n")
    for attempt in (lambda: load(saved), lambda: load(None, ["curriculum.rollouts=8"])):
        with pytest.raises(ConfigError, match="curriculum.rollouts was removed.*solver_samples"):
            attempt()
    assert "rollouts" not in to_dict(Config())["curriculum"]


def test_a_key_nothing_read_is_ignored_with_a_notice(tmp_path, capsys):
    """generation.samples set no count any stage used (each has its own): it is gone, and the
    config.yaml of an older run folder, which still has it, loads with a notice."""
    old = to_dict(Config())
    old["generation"]["samples"] = 4
    saved = tmp_path / "config.yaml"
    saved.write_text(yaml.safe_dump(old, sort_keys=False))
    assert load(saved) == Config()
    assert "config key generation.samples is ignored" in capsys.readouterr().err
    assert load(None, ["generation.samples=8"]) == Config()
    assert "samples" not in to_dict(Config())["generation"]


def test_malformed_recipe(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("executor: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(recipe)


def test_every_field_is_documented():
    lines = list(describe(Config))
    assert any(line.strip().startswith("executor.workers (int") for line in lines)
    assert all(not line.endswith(": ") for line in lines)
    assert ExecutorConfig().isolation == ("namespaces", "landlock", "seccomp", "rlimits")


def test_allowed_values_match_what_implements_them():
    """config names each value set once; the modules that implement the values import config
    (or are too heavy for it to import), so their tables are kept equal here instead."""
    assert tuple(SHAPES) == config.LEARNABILITY_SHAPES
    assert tuple(ESTIMATORS) == get_args(config.AdvantageEstimator)
    assert get_args(config.LrSchedule) == SCHEDULES
    assert tuple(OPTIONAL_MODULES) == get_args(config.ExtraModule)
    assert get_args(config.CruxevalFormat) == PROMPT_FORMATS
    assert set(config.EVAL_BENCHMARKS) == {
        "cruxeval",
        "generated",
        *MATH_BENCHMARKS,
        *CODE_BENCHMARKS,
    }


def test_literal_fields_list_their_values_and_refuse_others():
    lines = list(describe(Config))
    shape = next(line for line in lines if line.strip().startswith("curriculum.shape ("))
    assert shape.endswith("choose from " + ", ".join(config.LEARNABILITY_SHAPES))
    with pytest.raises(ConfigError, match="trainer.aggregation: unknown value 'tokens'"):
        load(None, ["trainer.aggregation=tokens"])
    with pytest.raises(ConfigError, match="selfplay.task_types"):
        load(None, ["selfplay.task_types=[deduction, algebra]"])
    with pytest.raises(ConfigError, match="unknown value True"):  # a bool is not the level 1
        load(None, ["engine.vllm_sleep_level=true"])
    with pytest.raises(ConfigError, match="CurriculumConfig.shape"):  # built in code, too
        config.CurriculumConfig(shape="linear")


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (Path(__file__).parent.parent / "recipes").glob("*.yaml"))
)
def test_shipped_recipes_load(name):
    cfg = load(Path(__file__).parent.parent / "recipes" / name)
    assert cfg.run.steps > 0 and cfg.curriculum.run != "default"


def test_yaml_booleans_read_back_as_the_word_a_choice_allows(tmp_path):
    """YAML 1.1 reads `no` as False: `trainer.mixed_precision=no` still means "no", in an
    override and in a recipe, while a boolean that names no allowed word is still refused."""
    assert load(None, ["trainer.mixed_precision=no"]).trainer.mixed_precision == "no"
    recipe = tmp_path / "r.yaml"
    recipe.write_text("trainer:\n  mixed_precision: no\n")
    assert load(recipe, []).trainer.mixed_precision == "no"
    with pytest.raises(ConfigError, match="trainer.aggregation"):
        load(None, ["trainer.aggregation=no"])


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "run:\n  steps: 3\nmodel:\n  name: x\nrun:\n  seed: 7\n",
            r"key run is given twice \(lines 1 and 5\)",
        ),
        ("run:\n  steps: 3\n  steps: 5\n", r"key run.steps is given twice \(lines 2 and 3\)"),
    ],
)
def test_a_key_given_twice_in_a_recipe_is_refused(tmp_path, text, message):
    """YAML keeps the last of two equal keys: a second `run:` section silently dropped the
    first's fields, and a field set twice took the later value."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(recipe)
    with pytest.raises(ConfigError, match="key steps is given twice"):
        load(None, ["run={steps: 3, steps: 5}"])
    # a merge key brings in fields that the mapping may set again
    recipe.write_text("engine: &base {seed: 3}\nrun:\n  <<: *base\n  steps: 2\n  seed: 5\n")
    assert (load(recipe).run.seed, load(recipe).run.steps) == (5, 2)


def test_a_recipe_that_is_not_text_or_has_no_names_for_keys_is_refused(tmp_path):
    """Both stopped the command with a traceback instead of a message."""
    recipe = tmp_path / "r.yaml"
    recipe.write_bytes("run:\n  folder: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load(recipe)
    recipe.write_text("1: a\n")
    with pytest.raises(ConfigError, match="config key 1 is not a name; known: curriculum"):
        load(recipe)
    recipe.write_text("run:\n  null: 3\n")
    with pytest.raises(ConfigError, match="config key run.None is not a name"):
        load(recipe)


@pytest.mark.parametrize(
    "override",
    [
        "generation.temperature=nan",
        "generation.temperature=.nan",
        "trainer.clip_low=nan",
        "executor.run_timeout_s=nan",
        "trainer.lr=inf",
        "trainer.max_grad_norm=.inf",
        "curriculum.band=[0.3, .nan]",
    ],
)
def test_a_float_that_is_not_finite_is_refused(override):
    """NaN passed every range check (`nan <= 0` is false) and no knob means anything by it or
    by infinity."""
    key = override.partition("=")[0]
    with pytest.raises(ConfigError, match=rf"{key}(\[1\])?: expected a finite number"):
        load(None, [override])


@pytest.mark.parametrize(
    "key",
    [
        "trainer.clip_low",
        "trainer.clip_high",
        "trainer.warmup_steps",
        "trainer.weight_decay",
        "run.eval_every",  # `step % -1 == 0` evaluated every step
        "run.eval_problems",  # `rows[:-3]` evaluated all but the last 3
        "executor.wall_slack_s",
        "executor.batch_grace_s",
        "executor.max_int_digits",
        "curriculum.busy_timeout_s",
        "curriculum.sqlite_cache_mb",
        "curriculum.ability_drift_sd",
        "curriculum.explore_weight",
        "curriculum.induction_per_program",
        "curriculum.guessable_weight",
        "roles.min_statements",
        "roles.worked_examples",
    ],
)
def test_a_negative_count_or_time_is_refused(key):
    with pytest.raises(ConfigError, match=f"^{key} must be >= 0$"):
        load(None, [f"{key}=-1"])
    load(None, [f"{key}=0"])
    section, name = key.split(".")
    cls = type(getattr(load(None, []), section))
    with pytest.raises(ConfigError, match=f"^{cls.__name__}.{name} must be >= 0$"):
        cls(**{name: -1})  # a section built in code is named by its class


@pytest.mark.parametrize(
    "name",
    [
        "labeled_ratio",
        "trapo_top",
        "recent_share",
        "seed_visible_fraction",
        "reference_max_similarity",
        "reference_dropout",
        "revisit_weight",
    ],
)
def test_a_curriculum_share_or_factor_outside_0_to_1_is_refused(name):
    for bad in ("-0.1", "1.5"):
        with pytest.raises(ConfigError, match=rf"^curriculum.{name} must be in \[0, 1\]$"):
            load(None, [f"curriculum.{name}={bad}"])
    for good in ("0", "1"):
        assert getattr(load(None, [f"curriculum.{name}={good}"]).curriculum, name) == float(good)


@pytest.mark.parametrize("key", ["executor.max_program_chars", "executor.startup_timeout_s"])
def test_a_limit_of_0_that_would_let_nothing_run_is_refused(key):
    with pytest.raises(ConfigError, match=f"^{key} must be positive$"):
        load(None, [f"{key}=0"])


@pytest.mark.parametrize("key", ["mathcheck.workers", "engine.max_model_len", "run.steps"])
def test_a_value_out_of_range_is_named_by_the_key_the_user_wrote(key):
    """Not by the section's class (`MathCheckConfig.workers`), which no recipe spells."""
    with pytest.raises(ConfigError, match=f"^{key} must be positive$"):
        load(None, [f"{key}=0"])


def test_an_override_changes_its_key_only_where_the_recipe_shares_a_section(tmp_path):
    """A YAML alias (or a merge key's nested mapping) is one object under two keys: a dotted
    override of one must not change the other."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("a: &x {n: {k: 1}, m: 1}\nb: *x\nc: {<<: *x}\n")
    data = config.fields.read_data(recipe, ["a.n.k=2", "a.m=2"])
    assert data["a"] == {"n": {"k": 2}, "m": 2}
    assert data["b"] == data["c"] == {"n": {"k": 1}, "m": 1}


def test_the_minus_one_sentinels_stay_valid():
    cfg = load(None, ["generation.solve_temperature=-1", "executor.compilers=-1"])
    assert (cfg.generation.solve_temperature, cfg.executor.compilers) == (-1, -1)
    with pytest.raises(ConfigError, match="ExecutorConfig.run_timeout_s must be positive"):
        ExecutorConfig(run_timeout_s=float("nan"))  # built in code


def test_numbers_are_read_in_base_10(tmp_path):
    """YAML 1.1 read `run.seed=017` as octal 15 and `run.steps=1:30` as sexagesimal 90."""
    assert load(None, ["run.seed=017", "run.steps=1_000"]).run.seed == 17
    assert load(None, ["trainer.lr=010"]).trainer.lr == 10.0
    assert load(None, ["trainer.lr=1e-5"]).trainer.lr == 1e-5
    assert load(None, ["curriculum.run=1:30"]).curriculum.run == "1:30"
    with pytest.raises(ConfigError, match="run.steps: expected int, got '1:30'"):
        load(None, ["run.steps=1:30"])
    with pytest.raises(ConfigError, match="trainer.lr: expected float, got '1:30.5'"):
        load(None, ["trainer.lr=1:30.5"])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("run:\n  seed: 017\n")
    assert load(recipe).run.seed == 17


def test_a_mapping_override_is_merged_into_the_section(tmp_path):
    """`run={seed: 1}` replaced the recipe's whole `run` section, silently dropping its steps."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("run:\n  steps: 3\ntrainer:\n  lora: {rank: 8, alpha: 16}\n")
    cfg = load(recipe, ["run={seed: 1}", "trainer={lora: {alpha: 4}}"])
    assert (cfg.run.steps, cfg.run.seed) == (3, 1)
    assert (cfg.trainer.lora.rank, cfg.trainer.lora.alpha) == (8, 4.0)
    assert load(recipe, ["run={steps: 5}", "run.seed=2"]).run.steps == 5
