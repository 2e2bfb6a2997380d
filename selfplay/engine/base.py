"""The generation protocol every backend implements, and the records it exchanges.

A request is a batch of chats (each a tuple of `Message`) and one `SamplingParams`; the answer is
one `Generation` per chat, holding the prompt's token ids and `n` completions, each with its
token ids and the log-probability of every sampled token.

Log-probabilities are those of the distribution each token was sampled from: softmax(logits /
temperature), restricted to the top-p nucleus and renormalised (greedy decoding reports the
model's own, temperature-1 log-probability). The trainer scores the same tempered distribution
(`trainer.update`), so with top-p 1 the importance ratio of the first update after sampling is
exactly 1; with top-p < 1 it is the ratio of the tempered policy to the truncated sampler, at
most 1 for every sampled token.

Completion token ids include the end-of-sequence token when the model produced one (the policy
learns to stop), and the tokens through a stop string; the `text` is cut before the stop string
and has special tokens removed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "Message",
    "Chat",
    "SamplingParams",
    "Completion",
    "Generation",
    "Engine",
    "chat",
    "derive_seed",
    "policy_logprobs",
]


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


Chat = tuple[Message, ...]


def chat(user: str, system: str | None = None, begun: str = "") -> Chat:
    """A one-turn chat: an optional system message and a user message, and the start of the
    reply when `begun` is given (the model continues that text)."""
    head = (Message("system", system),) if system else ()
    tail = (Message("assistant", begun),) if begun else ()
    return (*head, Message("user", user), *tail)


def derive_seed(*parts: int) -> int:
    """A 63-bit seed that depends only on `parts` (e.g. run seed, step, stage; or a call's seed
    and a request's index), the same in every process and Python version.

    Seeds built by arithmetic (`seed + k * n`) make neighbouring steps, stages and requests
    share seeds, and with them near-identical samples; a hash spreads them over 2**63 values,
    so two of a run's requests meet only by chance (a million requests of 8 samples: about 1
    in a million). The result, plus a vLLM request's sample index j < n, fits torch's seeds.
    """
    text = ",".join(str(int(part)) for part in parts).encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: `n` completions per prompt; temperature 0 means greedy."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # for benchmarks: always produce max_tokens tokens
    # Format-constrained generation (vLLM only): every completion of a prompt matches this
    # regular expression; one for all prompts, or one per prompt, in order.
    regex: str | tuple[str, ...] | None = None
    # Per prompt, texts whose n-grams (of `avoid_ngram` tokens) the completions are steered
    # away from: a token that would complete one loses `avoid_penalty` logits
    # (`selfplay.engine.ngrams`).
    avoid: tuple[tuple[str, ...], ...] | None = None
    avoid_ngram: int = 0
    avoid_penalty: float = 0.0

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1:
            raise ValueError("n and max_tokens must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and 0 < top_p <= 1")
        if any(not s for s in self.stop):
            raise ValueError("stop strings must not be empty")
        regexes = (self.regex,) if isinstance(self.regex, str) else self.regex or ()
        if not all(regexes):
            raise ValueError("a regex must not be empty")
        if self.avoid is not None and (self.avoid_ngram < 2 or self.avoid_penalty <= 0):
            raise ValueError("texts to avoid need avoid_ngram >= 2 and avoid_penalty > 0")


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # one per token id
    # stop: ended on its own (end of sequence or a stop string); length: cut by the token
    # limit; error: stopped by the engine (vLLM ends a request whose sampled token its
    # structured-output grammar rejects)
    finish_reason: Literal["stop", "length", "error"]

    @property
    def cut(self) -> bool:
        """Did not end on its own: whatever answer it holds may be unfinished."""
        return self.finish_reason != "stop"

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError("a completion needs one log-probability per token")


@dataclass(frozen=True)
class Generation:
    """The completions of one prompt."""

    prompt_token_ids: tuple[int, ...]
    completions: tuple[Completion, ...] = field(default_factory=tuple)


@runtime_checkable
class Engine(Protocol):
    """A generation backend. Engines are used from one thread."""

    tokenizer: object  # the transformers tokenizer that renders and tokenizes prompts

    def generate(self, prompts: Sequence[Chat], params: SamplingParams) -> list[Generation]:
        """One `Generation` per prompt, in order, each with `params.n` completions."""
        ...

    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        """log p(token_i | tokens_<i) for i >= 1 of each token sequence, under current weights."""
        ...

    def load_weights(self, model) -> None:
        """Generate from now on with the weights of `model` (the training model)."""
        ...

    def sleep(self) -> None:
        """Release accelerator memory until `wake_up` (a no-op where unsupported)."""
        ...

    def wake_up(self) -> None:
        """Re-acquire what `sleep` released; push weights afterwards if they changed."""
        ...

    def close(self) -> None: ...


def policy_logprobs(completion: Completion, params: SamplingParams) -> tuple[float, ...]:
    """The completion's log-probabilities under the policy that sampled it, as far as the
    engine knows them. Format-constrained generation masks the tokens outside the layout, so
    the engine's are those of the masked, renormalised distribution (the token the layout
    forced has log-probability 0, whatever the policy gave it): none are given then (NaN), and
    the update takes the policy's own (`trainer.loss.policy_loss`). So with texts to avoid
    (`avoid`): the engine's are those of the penalised distribution."""
    if params.regex is None and params.avoid is None:
        return completion.logprobs
    return (math.nan,) * len(completion.logprobs)
