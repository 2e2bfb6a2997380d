"""The configuration sections of the engine, the model, sampling and the roles."""

from __future__ import annotations

import pytest

from selfplay import config
from selfplay.engine import Engine, SamplingParams, make_engine, sampling


def test_sections_load_from_overrides_and_refuse_bad_values():
    cfg = config.load(
        None, ["engine.backend=vllm", "generation.max_new_tokens=8", "roles.induction_visible=3"]
    )
    assert (
        cfg.engine.backend == "vllm"
        and cfg.generation.max_new_tokens == 8
        and cfg.roles.induction_visible == 3
    )
    for bad in (
        "engine.backend=sglang",
        "model.dtype=int8",
        "model.template=fancy",
        "generation.top_p=0",
        "generation.temperature=-1",
        "roles.induction_visible=9",
        "engine.vllm_sleep_level=3",
    ):
        with pytest.raises(config.ConfigError):
            config.load(None, [bad])
    described = "\n".join(config.describe())
    assert "engine.backend" in described and "roles.induction_visible" in described


def test_sampling_params_from_config():
    cfg = config.load(None, ["generation.temperature=0.7", "generation.max_new_tokens=99"])
    params = sampling(cfg.generation, n=4, seed=3, stop=["</answer>"])
    assert params == SamplingParams(
        n=4, temperature=0.7, max_tokens=99, stop=("</answer>",), seed=3
    )
    with pytest.raises(ValueError):
        SamplingParams(n=0)
    with pytest.raises(ValueError):
        SamplingParams(stop=("",))


def test_make_engine_shares_the_model_for_transformers(tiny_model, smol_tokenizer):
    cfg = config.load(None, ["engine.backend=transformers"])
    engine = make_engine(cfg, tiny_model, smol_tokenizer, "unused")
    assert isinstance(engine, Engine)
    assert engine.model is tiny_model and engine.template == "auto"


def test_auto_backend_is_vllm_where_it_imports_else_transformers_with_a_notice(monkeypatch):
    import io

    from selfplay.config import load
    from selfplay.engine import resolve_backend, vllm_backend

    assert load(None, []).engine.backend == "auto"
    notice = io.StringIO()
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    assert resolve_backend("auto", notice) == "vllm"
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)
    assert resolve_backend("auto", notice) == "transformers"
    assert notice.getvalue().count("\n") == 1 and "vLLM is not installed" in notice.getvalue()
    assert resolve_backend("vllm", notice) == "vllm"  # named backends stay as they are
    assert resolve_backend("transformers", notice) == "transformers"


def test_a_recipe_asking_for_constrained_generation_runs_unconstrained_without_vllm(
    monkeypatch, tmp_path, capsys
):
    from selfplay.config import load
    from selfplay.engine import vllm_backend
    from selfplay.runs import _resolved

    constrained = ["generation.constrained_proposals=true", "generation.constrained_answers=true"]
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)
    config = _resolved(load(None, constrained), tmp_path)
    assert config.engine.backend == "transformers"
    assert not config.generation.constrained_proposals
    assert not config.generation.constrained_answers
    assert "constrained_proposals and constrained_answers is off" in capsys.readouterr().err
    named = _resolved(load(None, [*constrained, "engine.backend=transformers"]), tmp_path)
    assert named.generation.constrained_answers  # asked by name: the engine refuses, clearly
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    assert _resolved(load(None, constrained), tmp_path).generation.constrained_proposals


def test_max_model_len_is_cut_to_the_model_context_window_with_a_notice(
    tiny_model, smol_tokenizer, capsys
):
    import io

    from selfplay.engine import fit_context

    window = tiny_model.config.max_position_embeddings
    engine = config.load(None, [f"engine.max_model_len={window * 2}"]).engine
    notice = io.StringIO()
    assert fit_context(engine, tiny_model, notice).max_model_len == window
    assert notice.getvalue().count("\n") == 1 and f"using {window}" in notice.getvalue()
    shorter = config.load(None, [f"engine.max_model_len={window // 2}"]).engine
    assert fit_context(shorter, tiny_model, notice) is shorter  # a shorter one is kept
    cfg = config.load(None, ["engine.backend=transformers", f"engine.max_model_len={window + 1}"])
    made = make_engine(cfg, tiny_model, smol_tokenizer, "unused")
    assert made.config.max_model_len == window and "context window" in capsys.readouterr().err


def test_a_completion_the_engine_stopped_counts_as_cut_off():
    from types import SimpleNamespace

    from selfplay.engine.vllm_backend import _completion

    def output(reason):
        logprobs = [{7: SimpleNamespace(logprob=-0.5)}]
        return SimpleNamespace(text="x", token_ids=[7], logprobs=logprobs, finish_reason=reason)

    finished = {r: _completion(output(r)) for r in ("stop", "length", "error", "abort")}
    assert {r: c.finish_reason for r, c in finished.items()} == {
        "stop": "stop",
        "length": "length",
        "error": "error",
        "abort": "error",
    }
    assert [c.cut for c in finished.values()] == [False, True, True, True]
