"""Generation backends behind one protocol (`base.Engine`): vLLM (the default wherever it
imports) and transformers (the fallback, generating with the training model itself).

    model, tokenizer, source = load_model(cfg.model)
    engine = make_engine(cfg, model, tokenizer, source)
    generations = engine.generate(prompts, sampling(cfg.generation, n=4))
    ...                              # optimizer step, with engine.sleep() / engine.wake_up()
    engine.load_weights(model)       # after each update

Modules: `base` (records, protocol), `template` (chat -> prompt ids), `model` (the embedded
default model and loading), `weights` (what an engine loads: a LoRA model's weights merged),
`transformers_backend`, `vllm_backend`, `commands` (CLI).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from selfplay.engine.base import (
    Chat,
    Completion,
    Engine,
    Generation,
    Message,
    SamplingParams,
    chat,
    derive_seed,
)

if TYPE_CHECKING:
    from selfplay.config import EngineConfig

__all__ = [
    "Chat",
    "Completion",
    "Engine",
    "Generation",
    "Message",
    "SamplingParams",
    "chat",
    "derive_seed",
    "fit_context",
    "make_engine",
    "resolve_backend",
    "sampling",
]


def sampling(
    generation, n: int, seed: int | None = None, stop=(), role: str = "propose"
) -> SamplingParams:
    """`SamplingParams` from a `GenerationConfig`, with `n` samples per prompt (each stage
    has its own count), at `role`'s temperature (`generation.solve_temperature`)."""
    return SamplingParams(
        n=n,
        temperature=generation.temperature_of(role),
        top_p=generation.top_p,
        max_tokens=generation.max_new_tokens,
        stop=tuple(stop),
        seed=seed,
    )


def resolve_backend(backend: str, notice=None) -> str:
    """The backend `engine.backend` stands for: `auto` is vLLM where it imports, otherwise
    transformers, said in one line on `notice` (standard error by default)."""
    if backend != "auto":
        return backend
    from selfplay.engine.vllm_backend import vllm_available

    if vllm_available():
        return "vllm"
    import sys

    print(
        "vLLM is not installed: generating with transformers (scripts/install.sh installs vLLM)",
        file=notice or sys.stderr,
    )
    return "transformers"


def make_engine(config, model, tokenizer, source: str) -> Engine:
    """The engine `config.engine.backend` names, for the training `model` loaded from `source`
    (`auto` is resolved here, see `resolve_backend`).

    transformers generates with `model` itself; vLLM starts from the files at `source` (which
    must hold the same weights as `model`; push with `load_weights` after every update), in
    `model.dtype`, whatever the dtype of the training model.
    """
    engine_config = fit_context(config.engine, model)
    if resolve_backend(config.engine.backend) == "transformers":
        from selfplay.engine.transformers_backend import TransformersEngine

        return TransformersEngine(model, tokenizer, engine_config, config.model.template)
    from selfplay.engine.model import dtype_name
    from selfplay.engine.vllm_backend import VLLMEngine

    # vLLM serves in the configured `model.dtype` (a bfloat16 7B model holds 15 GB there, not
    # the 30 GB of the float32 weights training keeps); pushed weights are cast to it.
    dtype = dtype_name(config.model.dtype)
    avoid = config.generation.avoid_reference_ngrams > 0
    return VLLMEngine(source, tokenizer, engine_config, dtype, config.model.template, avoid)


def fit_context(engine: EngineConfig, model, notice=None) -> EngineConfig:
    """`engine` with `max_model_len` no longer than the model's context window
    (`max_position_embeddings`), said in one line on `notice` (standard error by default) when
    it is shortened: positions past the window are untrained, and vLLM refuses to start."""
    window = getattr(model.config, "max_position_embeddings", None)
    if not isinstance(window, int) or engine.max_model_len <= window:
        return engine
    import sys

    print(
        f"engine.max_model_len={engine.max_model_len} is longer than the model's context "
        f"window ({window} tokens): using {window}",
        file=notice or sys.stderr,
    )
    return replace(engine, max_model_len=window)
