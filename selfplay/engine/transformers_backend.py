"""Generation with the training model itself (transformers): the default on CPU.

The engine holds a reference to the training model, not a copy: after an optimizer step the
next `generate` already uses the new weights, and `load_weights(model)` only has to say which
module to use. Prompts are left-padded into batches (at most `engine.batch_size` sequences,
sorted by length so that little padding is wasted) and decoded with a KV cache. Rows that
finish (end-of-sequence token or stop string) leave the batch and its cache, so a batch of
mostly short answers does not pay for its longest one at full width.

Sampling runs on a `torch.Generator`: a request with a seed is reproducible on its own, and
requests without one draw from the engine's generator seeded with `engine.seed`, so a run is
reproducible from its config. The global torch RNG is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from selfplay import console
from selfplay.config import EngineConfig
from selfplay.engine.base import Chat, Completion, Generation, SamplingParams
from selfplay.engine.ngrams import NgramPenalty
from selfplay.engine.template import prompt_ids

__all__ = ["TransformersEngine", "sample_tokens"]


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of `logits` (float32, [rows, vocab]) and its log-probability under
    the distribution it was drawn from: softmax(logits / temperature), restricted to the
    nucleus and renormalised when top_p < 1 (vLLM's "processed" log-probabilities). Greedy
    decoding reports the model's own log-probability (temperature 1)."""
    if temperature == 0:
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(1, token[:, None])[:, 0]
    logp = torch.log_softmax(logits / temperature, dim=-1)
    if top_p < 1:
        # Nucleus: keep the most likely tokens until their mass reaches top_p (the token that
        # crosses the threshold is kept, so at least one token always survives).
        sorted_logp, order = logp.sort(dim=-1, descending=True)
        sorted_probs = sorted_logp.exp()
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p
        outside = torch.zeros_like(outside).scatter(1, order, outside)
        logp = torch.log_softmax(logp.masked_fill(outside, float("-inf")), dim=-1)
    token = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
    return token, logp.gather(1, token[:, None])[:, 0]


class TransformersEngine:
    """The `Engine` protocol on a transformers causal LM that training updates in place."""

    def __init__(self, model, tokenizer, config: EngineConfig | None = None, template="auto"):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or EngineConfig()
        self.template = template
        self._generator: torch.Generator | None = None
        eos = {tokenizer.eos_token_id}
        configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos.update(configured if isinstance(configured, list) else [configured])
        self.eos_ids = frozenset(i for i in eos if i is not None)

    # -- the protocol ---------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Chat], params: SamplingParams) -> list[Generation]:
        if params.regex is not None:
            raise ValueError(
                "format-constrained generation (generation.constrained_proposals or "
                "constrained_answers) needs the vLLM backend (engine.backend=vllm); the "
                "transformers backend cannot constrain"
            )
        ids = [prompt_ids(self.tokenizer, p, self.template) for p in prompts]
        longest = max((len(x) for x in ids), default=0)
        if longest + params.max_tokens > self.config.max_model_len:
            raise ValueError(
                f"a prompt of {longest} tokens plus {params.max_tokens} new tokens exceeds "
                f"engine.max_model_len={self.config.max_model_len}"
            )
        rows = [i for i in range(len(ids)) for _ in range(params.n)]
        order = sorted(range(len(rows)), key=lambda r: len(ids[rows[r]]))
        generator = self._generator_for(params.seed)
        penalties = self._penalties(params, len(ids))
        done: dict[int, Completion] = {}
        with console.bar(len(rows)) as bar:
            for start in range(0, len(order), self.config.batch_size):
                chunk = order[start : start + self.config.batch_size]
                batch = [ids[rows[r]] for r in chunk]
                steer = [penalties[rows[r]] for r in chunk]
                completions = self._decode(batch, params, generator, bar, steer)
                done.update(zip(chunk, completions, strict=True))
        return [
            Generation(tuple(x), tuple(done[i * params.n + k] for k in range(params.n)))
            for i, x in enumerate(ids)
        ]

    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        device = self._device()
        with self._evaluating():
            out = []
            for start in range(0, len(sequences), self.config.batch_size):
                chunk = [list(s) for s in sequences[start : start + self.config.batch_size]]
                ids, mask, positions = self._left_pad(chunk, device)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions)
                logp = torch.log_softmax(logits.logits.float(), -1)
                picked = logp[:, :-1].gather(2, ids[:, 1:, None])[..., 0]
                out.extend(picked[r, ids.shape[1] - len(s) :].tolist() for r, s in enumerate(chunk))
        return out

    def load_weights(self, model) -> None:
        """Generate with `model` from now on. Its parameters are used where they are: training
        that updates them in place needs no call at all."""
        self.model = model

    def sleep(self) -> None:
        """Nothing to release: the weights are training's, the KV cache lives only in
        `generate`."""

    def wake_up(self) -> None:
        """See `sleep`."""

    def close(self) -> None:
        self.model = None

    # -- decoding -------------------------------------------------------------------------------

    def _generator_for(self, seed: int | None) -> torch.Generator:
        device = self._device()
        if seed is not None:
            return torch.Generator(device).manual_seed(seed)
        if self._generator is None or self._generator.device != device:
            self._generator = torch.Generator(device).manual_seed(self.config.seed)
        return self._generator

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _left_pad(self, batch: list[list[int]], device):
        width = max(len(x) for x in batch)
        ids = torch.full((len(batch), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, seq in enumerate(batch):
            ids[r, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[r, width - len(seq) :] = 1
        # Positions count real tokens only, so a left-padded row sees the same positions as
        # the unpadded sequence would.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(device), mask.to(device), positions.to(device)

    def _evaluating(self):
        return _EvalMode(self.model)

    def _step(self, ids, mask, positions, cache) -> torch.Tensor:
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float()

    def _penalties(self, params: SamplingParams, prompts: int) -> list[NgramPenalty | None]:
        """Per prompt, the penalty steering its completions away from `params.avoid`."""
        if params.avoid is None:
            return [None] * prompts
        if len(params.avoid) != prompts:
            raise ValueError(f"texts to avoid for {len(params.avoid)} of {prompts} prompts")
        encode = self.tokenizer.encode
        return [
            NgramPenalty(
                [encode(t, add_special_tokens=False) for t in texts],
                params.avoid_ngram,
                params.avoid_penalty,
            )
            if texts
            else None
            for texts in params.avoid
        ]

    def _decode(
        self, batch: list[list[int]], params: SamplingParams, generator, bar, steer=None
    ) -> list[Completion]:
        """The completions of one batch; `bar` moves on as its rows finish; `steer`, per row,
        an `NgramPenalty` applied to its logits at every step (or None)."""
        from transformers import DynamicCache

        with self._evaluating():
            ids, mask, positions = self._left_pad(batch, self._device())
            cache = DynamicCache(config=self.model.config)
            logits = self._step(ids, mask, positions, cache)
            rows = _Rows(len(batch), self, params)
            alive = torch.arange(len(batch), device=ids.device)
            for step in range(params.max_tokens):
                if steer and any(steer):
                    for j, row in enumerate(alive.tolist()):
                        if steer[row] is not None:
                            steer[row](rows.tokens[row], logits[j])
                token, logp = sample_tokens(logits, params.temperature, params.top_p, generator)
                keep = rows.append(alive.tolist(), token.tolist(), logp.tolist())
                bar.update(len(alive) - len(keep))
                if not keep or step == params.max_tokens - 1:
                    bar.update(len(keep))  # cut at the token limit
                    break
                if len(keep) < len(alive):
                    index = torch.tensor(keep, device=ids.device)
                    cache.batch_select_indices(index)
                    alive, token, mask = alive[index], token[index], mask[index]
                    positions = positions[index]
                mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=1)
                positions = positions[:, -1:] + 1
                logits = self._step(token[:, None], mask, positions, cache)
        return rows.completions()


class _Rows:
    """Tokens, log-probs and finish state of the rows of one decoding batch."""

    def __init__(self, n: int, engine: TransformersEngine, params: SamplingParams):
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.logprobs: list[list[float]] = [[] for _ in range(n)]
        self.finish: list[str | None] = [None] * n
        self.engine, self.params = engine, params
        self.eos = frozenset() if params.ignore_eos else engine.eos_ids
        # A stop string spans at most as many tokens as it has characters (plus one token
        # that may have started before it), so decoding that many recent tokens finds it.
        self.window = max((len(s) for s in params.stop), default=0) + 1

    def append(self, rows: list[int], tokens: list[int], logprobs: list[float]) -> list[int]:
        """Record one step; returns the batch positions that go on."""
        keep = []
        for j, (row, token, logprob) in enumerate(zip(rows, tokens, logprobs, strict=True)):
            self.tokens[row].append(token)
            self.logprobs[row].append(logprob)
            if token in self.eos or self._stopped(row):
                self.finish[row] = "stop"
            else:
                keep.append(j)
        return keep

    def _stopped(self, row: int) -> bool:
        if not self.params.stop:
            return False
        tail = self.engine.tokenizer.decode(self.tokens[row][-self.window :])
        return any(s in tail for s in self.params.stop)

    def completions(self) -> list[Completion]:
        out = []
        for tokens, logprobs, finish in zip(self.tokens, self.logprobs, self.finish, strict=True):
            body = tokens[:-1] if tokens and tokens[-1] in self.eos else tokens
            text = self.engine.tokenizer.decode(body, skip_special_tokens=True)
            cuts = [text.find(s) for s in self.params.stop if s in text]
            text = text[: min(cuts)] if cuts else text
            out.append(Completion(text, tuple(tokens), tuple(logprobs), finish or "length"))
        return out


class _EvalMode:
    """Eval mode and no autograd for the duration, then the model's previous mode back."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.was_training = self.model.training
        self.model.eval()
        self.no_grad = torch.inference_mode()
        self.no_grad.__enter__()

    def __exit__(self, *exc):
        self.no_grad.__exit__(*exc)
        self.model.train(self.was_training)
