"""Shared fixtures: one sandboxed executor per session, the external data sets, the SmolLM2
tokenizer and a tiny randomly initialised model that uses it, and the end-of-run measurements.

The tiny model has SmolLM2's architecture family (Llama) and vocabulary with 2 small layers, so
that engine tests run in seconds on a CPU. Its weights are drawn with a large initialiser range
so that its next-token distributions are far from uniform: greedy decoding then produces varied
tokens, and a test comparing two decoders can tell them apart.
"""

from __future__ import annotations

import os

import pytest

from selfplay.config import ExecutorConfig
from selfplay.executor import Executor
from selfplay.files import data_root


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_accelerator_state():
    """accelerate keeps one mixed-precision state per process: a run opened by one test (bf16
    on a CPU that has it) must not make another test's `Accelerator()` autocast."""
    yield
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state()


@pytest.fixture(scope="session")
def executor():
    with Executor(ExecutorConfig()) as ex:
        yield ex


def require_data(relative: str):
    """Path of an external data file; skips (or fails when SELFPLAY_REQUIRE_DATA=1) if absent."""
    path = data_root() / relative
    if not path.exists():
        message = f"external data {relative} not found under {data_root()} (set SELFPLAY_DATA)"
        if os.environ.get("SELFPLAY_REQUIRE_DATA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


_REPORT: list[str] = []


@pytest.fixture(scope="session")
def report():
    """Lines for the end-of-run summary (acceptance rates and the like)."""
    return _REPORT


def pytest_terminal_summary(terminalreporter):
    if _REPORT:
        terminalreporter.section("selfplay measurements")
        for line in _REPORT:
            terminalreporter.write_line(line)


TINY = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,  # vLLM's CPU attention kernels need a head size of 64 or more
    max_position_embeddings=2048,
    tie_word_embeddings=True,
    initializer_range=0.5,
)


@pytest.fixture(scope="session")
def smol_tokenizer():
    """SmolLM2's tokenizer (with its chat template), read from the embedded GGUF file."""
    from transformers import AutoTokenizer

    from selfplay.engine.model import embedded_gguf

    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.padding_side = "left"
    return tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, smol_tokenizer):
    """A folder holding the tiny model (float32 safetensors) and the SmolLM2 tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=len(smol_tokenizer),
        bos_token_id=smol_tokenizer.bos_token_id,
        eos_token_id=smol_tokenizer.eos_token_id,
        pad_token_id=smol_tokenizer.pad_token_id,
        **TINY,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    folder = tmp_path_factory.mktemp("tiny-smollm2")
    model.save_pretrained(folder)
    smol_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_model(tiny_model_dir):
    """A fresh copy of the tiny model for each test (tests change weights in place)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def require_vllm():
    """Skips a test without vLLM installed, unless the run requires vLLM
    (`SELFPLAY_REQUIRE_VLLM=1`, as CI sets it): then the test fails."""
    from selfplay.engine.vllm_backend import vllm_available

    if vllm_available():
        return
    if os.environ.get("SELFPLAY_REQUIRE_VLLM"):
        pytest.fail("vLLM is required here (SELFPLAY_REQUIRE_VLLM is set) but not installed")
    pytest.skip("vLLM is not installed (scripts/install.sh --vllm installs it)")


def generate_once(config, prompts, params):
    """The generations of `prompts` by the model and engine `config` names, started for this
    call only and closed afterwards (the slow tests of real model output)."""
    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model

    model, tokenizer, source = load_model(config.model)
    engine = make_engine(config, model, tokenizer, source)
    try:
        return engine.generate(prompts, params)
    finally:
        engine.close()
