"""The task pool's section of the configuration (`curriculum`): storage, difficulty estimates
and the frontier sampler (see `selfplay.curriculum`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from selfplay.config.fields import Checked, ConfigError, knob, not_negative, positive
from selfplay.types import TASK_TYPES

__all__ = ["LEARNABILITY_SHAPES", "LearnabilityShape", "CurriculumConfig"]

#: benchmarks whose programs a proposal or an import may not reproduce (`datasets.contamination`)
Decontaminated = Literal["cruxeval", "humaneval", "mbpp"]

#: the shapes of `selfplay.curriculum.sampler.SHAPES` (a test keeps them equal)
LearnabilityShape = Literal["azr", "rzero_band", "rzero_peak", "variance"]
LEARNABILITY_SHAPES: tuple[LearnabilityShape, ...] = get_args(LearnabilityShape)


@dataclass(frozen=True)
class CurriculumConfig(Checked):
    """The task pool: storage, difficulty estimates and the frontier sampler."""

    store: str = knob(
        "store/{run}.sqlite",
        "task pool: a SQLite file path or a database URL; {run} becomes the run name",
    )
    run: str = knob("default", "name of the run whose tasks the pool holds (dedup is per run)")
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = knob(
        "NORMAL",
        "SQLite synchronous mode: NORMAL survives a killed process, FULL also a power loss",
    )
    busy_timeout_s: float = knob(30.0, "seconds to wait for another writer's lock")
    sqlite_background_checkpoint: bool = knob(
        True, "copy SQLite's write-ahead log into the database on a background thread"
    )
    sqlite_cache_mb: int = knob(
        128, "SQLite page cache per connection, MiB (the dedup index of 1M tasks is ~100 MiB)"
    )
    discount: float = knob(
        0.9, "weight of one answer per step of age in the solve-rate posterior (1 = no forgetting)"
    )
    prior_successes: float = knob(1.0, "Beta prior pseudo-successes of the plain posterior")
    prior_failures: float = knob(1.0, "Beta prior pseudo-failures of the plain posterior")
    irt_prior_strength: float = knob(
        4.0, "pseudo-answers the item-response prediction is worth in the combined estimate"
    )
    irt_lr: float = knob(1.0, "scale of each online Newton step of the Rasch fit (1 = full)")
    difficulty_prior_sd: float = knob(1.5, "prior s.d. of a task's Rasch difficulty (logits)")
    ability_prior_sd: float = knob(1.5, "prior s.d. of the first step's solver ability (logits)")
    ability_drift_sd: float = knob(
        0.3, "s.d. of the change of solver ability from one step to the next (logits)"
    )
    ability_iterations: int = knob(4, "Newton iterations on the ability per recorded batch")
    retired: ClassVar[dict[str, str]] = {
        "rollouts": "the azr shape weighs a task by the answers a drawn task gets, "
        "selfplay.solver_samples; set that instead (or delete the key)"
    }

    shape: LearnabilityShape = knob("azr", "learnability shape of the sampler (see sampler.py)")
    band: tuple[float, ...] = knob(
        (0.3, 0.8), "solve-rate band (low, high) of the rzero_band shape and of frontier metrics"
    )
    explore_weight: float = knob(
        1.0, "weight of never-attempted tasks, as a multiple of the shape's maximum (0 = none)"
    )
    recent_share: float = knob(
        0.25, "largest share of a batch drawn from tasks created in the last recent_steps steps"
    )
    recent_steps: int = knob(1, "how many latest steps count as recent for recent_share")
    type_quotas: tuple[float, ...] = knob(
        (1.0, 1.0, 1.0, 1.0),
        "relative share of deduction, abduction, induction, math in a batch (3 weights: no math)",
    )
    seed: int = knob(0, "seed of the sampler; a draw depends only on (seed, step, salt, pool)")
    references: int = knob(6, "reference tasks shown to the proposer per prompt (K)")
    reference_candidates: int = knob(4, "candidates drawn per reference slot before diversifying")
    reference_max_similarity: float = knob(
        0.7, "largest token Jaccard similarity between two references of one prompt"
    )
    behaviour_copies: bool = knob(
        True,
        "a proposal whose program gives a shown reference's outputs on its input and on probe "
        "inputs like it is a copy (`copy:behaviour`), not only one whose text is the reference's",
    )
    keep_trivial: bool = knob(
        False,
        "let trivial proposals into the pool (copying answers them, or their output does not "
        "move with their input: selfplay/trivial.py); by default they stay out, as duplicates",
    )
    refuse_stock_inputs: bool = knob(
        False,
        "an abduction proposal that a stock input solves (0 to 5, 'abc', [1, 2, 3], ...: "
        "`selfplay.trivial.stock_inputs`) is trivial (`trivial:stock_input`): it pays for "
        "guessing, not for working back from the output; off under keep_trivial. Measured "
        "off: it starved the pool of abductions and did not keep CRUXEval-I (docs/results.md)",
    )
    retype_fixed_abductions: bool = knob(
        False,
        "an abduction proposal whose output, given back as the input, answers it (f(output) "
        "== output: f sorts, cleans up or rounds, and leaves its own result unchanged) enters "
        "the pool as the deduction of the same program and input, where that is not trivial in "
        "its turn: the output is still work to trace (selfplay/trivial.py, `deduction_twins`); "
        "off under keep_trivial. Off: such a proposal is trivial (`trivial:copy`)",
    )
    reinput_trivial: bool = knob(
        False,
        "a deduction or abduction proposal that is trivial at its input (its copy answer solves "
        "it, or its output does not move with its input) enters the pool at the first input "
        "like it where it is work: one argument changed, then (deductions only) common values "
        "of its types; with retype_fixed_abductions an abduction its output answers at every "
        "input is tried as a deduction there too (selfplay/trivial.py, `input_twins`). Off "
        "under keep_trivial. The proposal is paid for the task as pooled. Off: such a proposal "
        "is trivial (`trivial:copy`, `trivial:constant`)",
    )
    guessable_weight: float = knob(
        1.0,
        "the solver draws an abduction task that a stock input solves (`tasks.guessable`, judged "
        "as it enters the pool) with this multiple of its learnability weight: below 1, its "
        "batches hold more tasks that need working back from the output, and the proposer "
        "still earns for the guessable ones (1 = no reweighting, though tasks are still judged "
        "and marked; 0 = never drawn for the solver). References and the programs of induction "
        "proposals are drawn as before",
    )
    revisit_weight: float = knob(
        1.0,
        "the solver draws a task with this multiple of its learnability weight for every "
        "`selfplay.solver_samples` answers the task already has (weight x revisit_weight ** "
        "(answers / solver_samples)): below 1, its batches hold more tasks it has not answered "
        "yet, where a small pool would otherwise be answered again and again until fitted "
        "(`pool stats`' growth table: `again`, `right again`). The answers that estimate a new "
        "proposal's solve rate count (the solver trains on them), so at 0 only tasks without "
        "any answer are drawn and the solver's batches shrink as the pool is used up. 1 = no "
        "reweighting; references and the programs of induction proposals are drawn as before",
    )
    induction_per_program: int = knob(
        3,
        "most induction tasks the pool takes on one program; a further one, or one that repeats "
        "a pooled task's inputs on its program, is no new work (0 = no limit)",
    )
    decontaminate: tuple[Decontaminated, ...] = knob(
        ("cruxeval", "humaneval", "mbpp"),
        "benchmarks whose programs a proposal may not reproduce: such a proposal stays out of "
        "the pool, as a duplicate, and an imported seed or labeled task is rejected (except "
        "against the benchmark whose own data file is imported); their data under "
        "$SELFPLAY_DATA, absent data is skipped",
    )
    reference_dropout: float = knob(
        0.0,
        "share of proposer prompts shown no reference, whose proposer invents from its own "
        "prior (a small model copies what it is shown)",
    )
    seed_visible_fraction: float = knob(
        0.5, "share of an imported induction task's pairs shown to the solver; the rest are hidden"
    )
    import_batch: int = knob(512, "records validated and inserted per batch on import")
    labeled_ratio: float = knob(
        0.5, "share of each solver batch drawn from labeled tasks when the pool has any"
    )
    selection: Literal["none", "trapo"] = knob(
        "none", "which unlabeled tasks may be drawn: none = all; trapo: see selection.py"
    )
    trapo_window: int = knob(8, "trapo: the last this many steps make up a learning trajectory")
    trapo_min_points: int = knob(
        4, "trapo: steps with answers a task needs in the window before it is judged"
    )
    trapo_threshold: float = knob(
        0.4, "trapo: least similarity to the labeled trajectory for a task to be admitted"
    )
    trapo_top: float = knob(
        1.0, "trapo: admit at most this share of the judged tasks (the most similar)"
    )

    def check(self) -> None:
        for name in ("labeled_ratio", "trapo_top"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"curriculum.{name} must be in [0, 1]")
        if not -1 <= self.trapo_threshold <= 1:
            raise ConfigError("curriculum.trapo_threshold must be in [-1, 1] (a correlation)")
        if self.trapo_min_points < 3 or self.trapo_window < self.trapo_min_points:
            raise ConfigError("curriculum: need 3 <= trapo_min_points <= trapo_window")
        if len(self.band) != 2 or not 0 <= self.band[0] <= self.band[1] <= 1:
            raise ConfigError("curriculum.band must be (low, high) with 0 <= low <= high <= 1")
        quotas = self.type_quotas
        if len(quotas) not in (3, 4) or min(quotas) < 0 or sum(quotas) <= 0:
            raise ConfigError(f"curriculum.type_quotas needs 3 or 4 weights >= 0 for {TASK_TYPES}")
        if len(quotas) == 3:  # a recipe from before math tasks: none of them in a batch
            object.__setattr__(self, "type_quotas", (*quotas, 0.0))
        if not 0 < self.discount <= 1:
            raise ConfigError("curriculum.discount must be in (0, 1]")
        for name in (
            "recent_share",
            "seed_visible_fraction",
            "reference_max_similarity",
            "reference_dropout",
            "revisit_weight",
        ):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"curriculum.{name} must be in [0, 1]")
        positive(self, "prior_successes", "prior_failures", "irt_prior_strength", "irt_lr")
        positive(self, "difficulty_prior_sd", "ability_prior_sd", "ability_iterations")
        positive(self, "references", "reference_candidates", "import_batch", "recent_steps")
        not_negative(self, "ability_drift_sd", "explore_weight", "induction_per_program")
        not_negative(self, "guessable_weight", "busy_timeout_s", "sqlite_cache_mb")
