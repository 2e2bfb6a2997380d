"""The embedded default model: preparation from the GGUF package, caching, loading."""

from __future__ import annotations

import math

import pytest

from selfplay.config import ModelConfig
from selfplay.engine import model


def test_cache_dir_follows_config_then_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SELFPLAY_MODEL_CACHE", str(tmp_path / "env"))
    assert model.cache_dir() == tmp_path / "env"
    assert model.cache_dir(ModelConfig(cache_dir=str(tmp_path / "cfg"))) == tmp_path / "cfg"
    monkeypatch.delenv("SELFPLAY_MODEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model.cache_dir() == tmp_path / "xdg" / "selfplay" / "models"


def test_local_folders_and_hub_ids_resolve(tiny_model_dir, tmp_path):
    assert model.resolve(ModelConfig(name=str(tiny_model_dir))) == str(tiny_model_dir)
    assert (
        model.resolve(ModelConfig(name="HuggingFaceTB/SmolLM2-360M"))
        == "HuggingFaceTB/SmolLM2-360M"
    )
    with pytest.raises(FileNotFoundError, match="config.json"):
        model.resolve(ModelConfig(name=str(tmp_path)))


def test_the_embedded_gguf_ships_with_the_package():
    gguf = model.embedded_gguf()
    assert gguf.suffix == ".gguf" and gguf.stat().st_size > 50_000_000


def test_load_model_from_a_local_folder(tiny_model_dir):
    loaded, tokenizer, source = model.load_model(
        ModelConfig(name=str(tiny_model_dir), dtype="float32")
    )
    assert source == str(tiny_model_dir) and tokenizer.padding_side == "left"
    assert next(loaded.parameters()).dtype.is_floating_point and tokenizer.pad_token_id is not None


@pytest.mark.slow
def test_prepare_the_embedded_model_once_and_generate_with_it(tmp_path, capsys):
    """The real SmolLM2 weights: converted once through `selfplay model prepare`, reused after,
    and they behave like a language model (English is likelier than its scrambled words, and
    greedy decoding answers a simple question)."""
    from selfplay.cli import main
    from selfplay.engine import SamplingParams, chat
    from selfplay.engine.transformers_backend import TransformersEngine

    cache = tmp_path / "cache"
    assert main(["model", "prepare", f"cache_dir={cache}"]) == 0
    folder = cache / "SmolLM2-135M-Instruct"
    assert str(folder) in capsys.readouterr().out
    weights = folder / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert model.prepare_embedded(cache) == folder and weights.stat().st_mtime_ns == stamp

    cfg = ModelConfig(cache_dir=str(cache))
    smol, tokenizer, source = model.load_model(cfg)
    assert source == str(folder) and tokenizer.chat_template
    engine = TransformersEngine(smol, tokenizer)
    sentence = tokenizer("The cat sat on the mat and looked out of the window.")["input_ids"]
    scrambled = tokenizer("window the mat of sat looked The out on cat and the.")["input_ids"]
    fluent, noisy = engine.score([sentence, scrambled])
    assert sum(fluent) / len(fluent) > sum(noisy) / len(noisy) + 1.0
    [g] = engine.generate(
        [chat("What is the capital of France?")], SamplingParams(temperature=0, max_tokens=24)
    )
    assert "Paris" in g.completions[0].text
    assert all(math.isfinite(x) and x <= 0 for x in g.completions[0].logprobs)
