"""vLLM serves in `model.dtype` whatever the training model's dtype, and the weights pushed
into it are cast on the way, one tensor at a time."""

from __future__ import annotations

import torch

from selfplay.config import load
from selfplay.engine import make_engine, vllm_backend


def test_pushed_weights_arrive_in_the_engine_dtype(tiny_model):
    tiny_model.register_buffer("steps", torch.tensor([3]))  # not floating: left alone
    pushed = dict(vllm_backend._weights(tiny_model, torch.bfloat16))
    assert pushed["steps"].dtype == torch.long
    floats = {k: v for k, v in pushed.items() if k != "steps"}
    assert floats and all(v.dtype == torch.bfloat16 for v in floats.values())
    same = dict(vllm_backend._weights(tiny_model, torch.float32))
    weight = "model.embed_tokens.weight"
    assert same[weight].data_ptr() == tiny_model.state_dict()[weight].data_ptr()  # no copy


def test_the_vllm_engine_starts_in_the_configured_dtype(monkeypatch, tiny_model):
    started = {}

    class Recorder:
        def __init__(self, source, tokenizer, config, dtype, template, avoid_ngrams=False):
            started["dtype"], started["avoid_ngrams"] = dtype, avoid_ngrams

    monkeypatch.setattr(vllm_backend, "VLLMEngine", Recorder)
    config = load(None, ["engine.backend=vllm", "model.dtype=bfloat16"])
    make_engine(config, tiny_model, None, "unused")  # the training model is float32
    assert started["dtype"] == "bfloat16" and started["avoid_ngrams"] is False
    # the n-gram logits processor is loaded only for a run that steers its proposals
    make_engine(load(None, ["engine.backend=vllm", "generation.avoid_reference_ngrams=6"]),
                tiny_model, None, "unused")  # fmt: skip
    assert started["avoid_ngrams"] is True
