"""`selfplay.engine.ngrams`: the tokens that would complete an n-gram of the texts to avoid,
lowered by a finite penalty; and the sampling parameters a run's config makes of it."""

from __future__ import annotations

import pytest
import torch

from selfplay.config import GenerationConfig
from selfplay.config.fields import ConfigError
from selfplay.engine import SamplingParams
from selfplay.engine.ngrams import NgramPenalty, avoiding


def test_only_the_token_that_would_go_on_following_a_source_is_lowered():
    penalty = NgramPenalty([[1, 2, 3, 4], [7, 2, 3, 9]], n=3, penalty=5.0)
    assert penalty.banned([]) == [] and penalty.banned([2]) == []
    assert penalty.banned([8, 2, 3]) == [4, 9]  # (2, 3) goes on with 4 in one, 9 in the other
    assert penalty.banned([1, 2]) == [3] and penalty.banned([3, 2]) == []
    logits = torch.zeros(2, 10)
    row = penalty([5, 1, 2], logits[1])
    assert row.data_ptr() == logits[1].data_ptr()  # in place: the batch's row
    assert logits[1, 3] == -5.0 and logits[1].sum() == -5.0 and logits[0].abs().sum() == 0
    with pytest.raises(ValueError, match="n >= 2"):
        NgramPenalty([[1, 2]], n=1, penalty=1.0)


def test_a_config_turns_it_on_for_the_prompts_with_texts():
    params = SamplingParams(n=2)
    assert avoiding(params, GenerationConfig(), [["def f(): pass"]]) is params  # off
    on = GenerationConfig(avoid_reference_ngrams=6, avoid_reference_penalty=3.0)
    assert avoiding(params, on, [[], []]) is params  # nothing to avoid
    steered = avoiding(params, on, [["a", "b"], []])
    assert steered.avoid == (("a", "b"), ()) and steered.avoid_ngram == 6
    assert steered.avoid_penalty == 3.0 and steered.n == 2
    with pytest.raises(ValueError, match="avoid_ngram >= 2"):
        SamplingParams(avoid=(("a",),), avoid_ngram=1, avoid_penalty=1.0)
    with pytest.raises(ConfigError, match="at least 2"):
        GenerationConfig(avoid_reference_ngrams=1)
    with pytest.raises(ConfigError, match="avoid_reference_penalty"):
        GenerationConfig(avoid_reference_penalty=0.0)


def test_penalised_logprobs_are_not_taken_for_the_policys():
    """A steered completion's log-probabilities are the penalised distribution's: the update
    computes the policy's own (NaN), as it does for a constrained one."""
    import math

    from selfplay.engine.base import Completion, policy_logprobs

    completion = Completion("ab", (1, 2), (-0.5, -0.1), "stop")
    assert policy_logprobs(completion, SamplingParams()) == (-0.5, -0.1)
    steered = SamplingParams(avoid=(("x y",),), avoid_ngram=2, avoid_penalty=1.0)
    assert all(math.isnan(x) for x in policy_logprobs(completion, steered))
