"""The transformers backend on the tiny model: batching, log-probs, sampling, weight sharing."""

from __future__ import annotations

import pytest
import torch

from selfplay.config import EngineConfig
from selfplay.engine import SamplingParams, chat
from selfplay.engine.base import Message
from selfplay.engine.template import prompt_ids, render
from selfplay.engine.transformers_backend import TransformersEngine

PROMPTS = [
    chat("hi"),
    chat("Write a Python function that reverses a list, then explain it. " * 3, system="Be brief."),
    chat("What is 2 + 2?"),
]


@pytest.fixture
def engine(tiny_model, smol_tokenizer):
    return TransformersEngine(tiny_model, smol_tokenizer, EngineConfig(batch_size=8))


def test_batched_greedy_decoding_matches_unbatched_generate(engine, tiny_model):
    """Left padding, positions and the KV cache: each row of a padded batch decodes exactly as
    the prompt alone does with transformers' own `generate`."""
    generations = engine.generate(PROMPTS, SamplingParams(n=2, temperature=0, max_tokens=12))
    for generation in generations:
        ids = torch.tensor([generation.prompt_token_ids])
        expected = tiny_model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False
        )[0, ids.shape[1] :].tolist()
        for completion in generation.completions:
            assert list(completion.token_ids) == expected[: len(completion.token_ids)]
    assert len({g.completions[0].token_ids for g in generations}) == len(PROMPTS)


def test_a_begun_reply_is_continued_not_closed(engine, smol_tokenizer):
    messages = chat("Say hi.", system="You are terse.", begun="<answer>\n")
    for template in ("plain", "auto"):
        text = render(smol_tokenizer, messages, template)
        assert text.endswith("<answer>\n"), template
        assert text.count("<answer>") == 1
    assert render(smol_tokenizer, messages, "plain") == (
        "You are terse.\n\n### Request\nSay hi.\n\n### Response\n<answer>\n"
    )
    opened = render(smol_tokenizer, chat("Say hi.", system="You are terse."))
    assert render(smol_tokenizer, messages) == opened + "<answer>\n"
    [g] = engine.generate([messages], SamplingParams(max_tokens=2, seed=0))
    assert list(g.prompt_token_ids) == prompt_ids(smol_tokenizer, messages)


def test_a_reply_begun_with_nothing_before_it_is_a_text_to_complete(engine, smol_tokenizer):
    """No template, no system message: the text as written, tokenized as any text is (CRUXEval's
    harness asks open models so; `--prompt-format completion`)."""
    text = "[PYTHON]\ndef f(n):\n    return n\n[/PYTHON]\n[ANSWER]\n"
    messages = (Message("assistant", text),)
    for template in ("plain", "auto", "chat"):
        assert render(smol_tokenizer, messages, template) == text
    assert prompt_ids(smol_tokenizer, messages) == smol_tokenizer(text)["input_ids"]
    [g] = engine.generate([messages], SamplingParams(max_tokens=2, seed=0))
    assert list(g.prompt_token_ids) == smol_tokenizer(text)["input_ids"]


def test_logprobs_are_the_models_own_log_probabilities(engine, tiny_model):
    [generation] = engine.generate(
        PROMPTS[1:2], SamplingParams(temperature=1.0, max_tokens=10, seed=3)
    )
    completion = generation.completions[0]
    sequence = list(generation.prompt_token_ids) + list(completion.token_ids)
    with torch.no_grad():
        logits = tiny_model(torch.tensor([sequence])).logits[0].float()
    expected = torch.log_softmax(logits, -1)[:-1].gather(1, torch.tensor(sequence[1:])[:, None])
    expected = expected[-len(completion.token_ids) :, 0]
    assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-4)
    scored = engine.score([sequence])[0][-len(completion.token_ids) :]
    assert torch.allclose(torch.tensor(scored), expected, atol=1e-4)


def test_n_samples_seeds_and_lengths(engine):
    params = SamplingParams(n=4, temperature=1.0, max_tokens=8, seed=7)
    first, second = engine.generate(PROMPTS, params), engine.generate(PROMPTS, params)
    assert first == second
    for generation in first:
        assert len(generation.completions) == 4
        assert len({c.token_ids for c in generation.completions}) > 1
        for c in generation.completions:
            assert 1 <= len(c.token_ids) <= 8 and len(c.logprobs) == len(c.token_ids)
            assert c.finish_reason == ("length" if len(c.token_ids) == 8 else "stop")
    other = engine.generate(PROMPTS, SamplingParams(n=4, temperature=1.0, max_tokens=8, seed=8))
    assert other != first
    unseeded = SamplingParams(n=4, max_tokens=8)
    assert engine.generate(PROMPTS, unseeded) != engine.generate(PROMPTS, unseeded)


def test_tiny_top_p_is_greedy(engine):
    greedy = engine.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=6))
    nucleus = engine.generate(PROMPTS, SamplingParams(top_p=1e-6, max_tokens=6, seed=1))
    assert [g.completions[0].token_ids for g in greedy] == [
        g.completions[0].token_ids for g in nucleus
    ]


def test_stop_strings_cut_the_text_and_keep_the_stopping_token(engine, smol_tokenizer):
    [free] = engine.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=12))
    text = smol_tokenizer.decode(free.completions[0].token_ids[:6])
    stop = text[-3:] if len(text.strip()) >= 3 else text
    [stopped] = engine.generate(
        PROMPTS[:1], SamplingParams(temperature=0, max_tokens=12, stop=(stop,))
    )
    c = stopped.completions[0]
    assert c.finish_reason == "stop" and stop not in c.text
    assert stop in smol_tokenizer.decode(c.token_ids) and len(c.token_ids) <= 6
    assert c.token_ids == free.completions[0].token_ids[: len(c.token_ids)]


def test_end_of_sequence_is_kept_in_tokens_not_text(engine):
    [free] = engine.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=5))
    engine.eos_ids = frozenset({free.completions[0].token_ids[2]})  # pretend it is the EOS
    [ended] = engine.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=5))
    c = ended.completions[0]
    assert c.finish_reason == "stop" and c.token_ids == free.completions[0].token_ids[:3]
    assert c.text == engine.tokenizer.decode(c.token_ids[:2], skip_special_tokens=True)
    [ignored] = engine.generate(
        PROMPTS[:1], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    )
    assert ignored.completions[0].token_ids == free.completions[0].token_ids


def test_shares_the_training_models_weights(engine, tiny_model):
    """No copy: an in-place update of the training model changes the next generation, and
    generation leaves the training mode and autograd state as they were."""
    assert engine.model is tiny_model
    params = SamplingParams(temperature=0, max_tokens=8)
    before = engine.generate(PROMPTS, params)
    tiny_model.train()
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    after = engine.generate(PROMPTS, params)
    assert after != before
    assert tiny_model.training
    loss = tiny_model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
    loss.backward()  # generation did not leave the parameters unusable for training
    assert all(p.grad is not None for p in tiny_model.parameters() if p.requires_grad)


def test_load_weights_switches_to_another_module(engine, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    other = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    engine.load_weights(other)
    assert engine.model is other
    engine.sleep(), engine.wake_up()  # no-ops for this backend
    assert engine.generate(PROMPTS[:1], SamplingParams(max_tokens=2))[0].completions


def test_format_constraints_are_refused_not_ignored(engine):
    with pytest.raises(ValueError, match="vLLM backend"):
        engine.generate([chat("hi")], SamplingParams(max_tokens=4, regex="yes|no"))


def test_prompt_longer_than_the_context_is_refused(engine):
    engine.config = EngineConfig(max_model_len=16)
    with pytest.raises(ValueError, match="max_model_len"):
        engine.generate(PROMPTS, SamplingParams(max_tokens=8))


def test_plain_template_for_base_models(smol_tokenizer, tiny_model):
    messages = chat("Say hi.", system="You are terse.")
    text = render(smol_tokenizer, messages, "plain")
    assert text == "You are terse.\n\n### Request\nSay hi.\n\n### Response\n"
    assert "<|im_start|>" in render(smol_tokenizer, messages, "auto")
    engine = TransformersEngine(tiny_model, smol_tokenizer, template="plain")
    [g] = engine.generate([messages], SamplingParams(max_tokens=3, seed=0))
    assert list(g.prompt_token_ids) == prompt_ids(smol_tokenizer, messages, "plain")
    template = smol_tokenizer.chat_template
    try:
        smol_tokenizer.chat_template = None  # a base model's tokenizer
        assert render(smol_tokenizer, messages) == text
        with pytest.raises(ValueError, match="no chat template"):
            render(smol_tokenizer, messages, "chat")
    finally:
        smol_tokenizer.chat_template = template


def test_logprobs_are_those_of_the_tempered_nucleus_the_token_was_drawn_from(engine, tiny_model):
    """At temperature 0.7 and top-p 0.9 the reported log-probability is that of the
    distribution sampled from: softmax(logits / 0.7) restricted to the nucleus, renormalised."""
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=10, seed=5)
    [generation] = engine.generate(PROMPTS[1:2], params)
    completion = generation.completions[0]
    sequence = list(generation.prompt_token_ids) + list(completion.token_ids)
    with torch.no_grad():
        logits = tiny_model(torch.tensor([sequence])).logits[0].float()
    probs = torch.softmax(logits / 0.7, -1)[:-1][-len(completion.token_ids) :]
    for row, token, reported in zip(probs, completion.token_ids, completion.logprobs):
        ranked, order = row.sort(descending=True)
        keep = order[(ranked.cumsum(0) - ranked) <= 0.9]
        assert token in keep.tolist()  # never drawn from outside the nucleus
        expected = torch.log(row[token] / row[keep].sum())
        assert abs(reported - float(expected)) < 1e-4


def test_the_update_scores_the_tempered_distribution_the_engine_sampled(engine, tiny_model):
    """Answers sampled at temperature 0.7 (top-p 1): the first update's importance ratio is 1
    on every token, so nothing is clipped; scored at temperature 1 it would not be."""
    from accelerate import Accelerator

    from selfplay.config import TrainerConfig
    from selfplay.trainer.update import policy_update
    from selfplay.types import Rollout

    params = SamplingParams(n=4, temperature=0.7, max_tokens=8, seed=3)
    [generation] = engine.generate(PROMPTS[2:3], params)
    data = [
        Rollout("solve", "deduction", 0, generation.prompt_token_ids, c.token_ids, c.logprobs, 0)
        for c in generation.completions
    ]
    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    settings = TrainerConfig(micro_batch=4, max_grad_norm=1e9)
    pad = engine.tokenizer.pad_token_id

    def ratio(temperature: float) -> float:
        stats = policy_update(
            Accelerator(cpu=True), tiny_model, optimizer, scheduler, data,
            [1.0, -1.0, 1.0, -1.0], settings, pad, temperature=temperature,
        )  # fmt: skip
        return stats["ratio_mean"]

    assert ratio(0.7) == pytest.approx(1.0, abs=1e-5)
    assert abs(ratio(1.0) - 1.0) > 1e-3


def test_a_completion_steered_away_from_a_text_writes_none_of_its_ngrams(engine, smol_tokenizer):
    """`SamplingParams.avoid`: the greedy completion no longer holds a 3-gram of the text it
    avoids (its own earlier completion); a prompt that avoids nothing decodes as before. The
    longer prompt avoids, so the batch (sorted by length) holds it second, and once the other
    row has stopped it decodes on alone with its penalty."""
    from tests.engine.avoided import avoided_greedy, contains_ngram

    prompts = [PROMPTS[1], PROMPTS[0]]  # the first is the longer
    before, after, source = avoided_greedy(engine, smol_tokenizer, prompts)
    steered = after[0].completions[0]
    assert not contains_ngram(list(steered.token_ids), source, 3)
    other = before[1].completions[0]
    assert after[1].completions[0].token_ids == other.token_ids
    # a stop string that ends the other row early and is not in the steered one
    stop = next(
        other.text[k : k + 3]
        for k in range(1, len(other.text) - 3)
        if other.text[k : k + 3].strip() and other.text[k : k + 3] not in steered.text
    )
    avoid = ((before[0].completions[0].text,), ())
    params = SamplingParams(
        temperature=0, max_tokens=16, stop=(stop,), avoid=avoid, avoid_ngram=3, avoid_penalty=1e4
    )
    [alone, stopped] = engine.generate(prompts, params)
    assert stopped.completions[0].finish_reason == "stop"
    assert len(stopped.completions[0].token_ids) < len(other.token_ids)
    assert alone.completions[0].token_ids == steered.token_ids
