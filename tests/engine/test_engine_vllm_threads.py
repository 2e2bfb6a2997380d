"""`engine.vllm_cpu_threads`: on a CPU, vLLM serves with the torch threads the config asks for
(vLLM's own choice is one), and the update still gets the process's threads between `sleep`
and `wake_up`."""

from __future__ import annotations

import pytest
import torch

from selfplay.config import ConfigError, EngineConfig, load
from selfplay.engine import SamplingParams, chat


def test_the_thread_count_is_checked():
    assert load(None, ["engine.vllm_cpu_threads=2"]).engine.vllm_cpu_threads == 2
    with pytest.raises(ConfigError, match="vllm_cpu_threads"):
        load(None, ["engine.vllm_cpu_threads=-1"])


def test_vllm_serves_with_the_configured_threads(require_vllm, tiny_model_dir, smol_tokenizer):
    from selfplay.engine.vllm_backend import VLLMEngine

    if torch.cuda.is_available():
        pytest.skip("the setting is for CPU serving")
    training = torch.get_num_threads()
    serving = training + 1  # neither vLLM's own choice (one) nor the process's count
    config = EngineConfig(
        backend="vllm",
        max_model_len=512,
        vllm_kv_cache_gib=0.25,  # a size: a share of node 0 depends on the machine
        vllm_cpu_threads=serving,
    )
    engine = VLLMEngine(str(tiny_model_dir), smol_tokenizer, config, "float32")
    try:
        assert engine.serving_threads == torch.get_num_threads() == serving
        engine.sleep()
        assert torch.get_num_threads() == engine.training_threads == training
        engine.wake_up()
        assert torch.get_num_threads() == serving
        (generation,) = engine.generate([chat("hi")], SamplingParams(max_tokens=4, seed=0))
        assert generation.completions[0].token_ids
    finally:
        engine.close()
