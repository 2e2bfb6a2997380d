"""Shared by the backends' tests of `SamplingParams.avoid` (`selfplay.engine.ngrams`)."""

from __future__ import annotations

from selfplay.engine import SamplingParams


def contains_ngram(tokens, source, n: int) -> bool:
    grams = {tuple(source[i : i + n]) for i in range(len(source) - n + 1)}
    return any(tuple(tokens[i : i + n]) in grams for i in range(len(tokens) - n + 1))


def avoided_greedy(engine, tokenizer, prompts, steered: int = 0, n: int = 3, samples: int = 1):
    """Greedy completions of `prompts` (`samples` each), then again with prompt `steered`
    steered away from its own first greedy completion (the others avoid nothing): (before,
    after, the avoided text's tokens)."""
    greedy = SamplingParams(n=samples, temperature=0, max_tokens=16)
    before = engine.generate(prompts, greedy)
    text = before[steered].completions[0].text
    source = tokenizer.encode(text, add_special_tokens=False)
    assert contains_ngram(list(before[steered].completions[0].token_ids), source, n)
    avoid = tuple((text,) if k == steered else () for k in range(len(prompts)))
    params = SamplingParams(
        n=samples, temperature=0, max_tokens=16, avoid=avoid, avoid_ngram=n, avoid_penalty=1e4
    )
    return before, engine.generate(prompts, params), source
