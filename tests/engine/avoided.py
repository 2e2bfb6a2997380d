"""Shared by the backends' tests of `SamplingParams.avoid` (`selfplay.engine.ngrams`)."""

from __future__ import annotations

from selfplay.engine import SamplingParams


def contains_ngram(tokens, source, n: int) -> bool:
    grams = {tuple(source[i : i + n]) for i in range(len(source) - n + 1)}
    return any(tuple(tokens[i : i + n]) in grams for i in range(len(tokens) - n + 1))


def avoided_greedy(engine, tokenizer, prompts, n: int = 3):
    """Greedy completions of `prompts`, then again steered away from the first prompt's own
    greedy completion (the second prompt avoids nothing): (before, after, source tokens)."""
    greedy = SamplingParams(temperature=0, max_tokens=16)
    before = engine.generate(prompts, greedy)
    text = before[0].completions[0].text
    source = tokenizer.encode(text, add_special_tokens=False)
    assert contains_ngram(list(before[0].completions[0].token_ids), source, n)
    params = SamplingParams(
        temperature=0, max_tokens=16, avoid=((text,), ()), avoid_ngram=n, avoid_penalty=1e4
    )
    return before, engine.generate(prompts, params), source
