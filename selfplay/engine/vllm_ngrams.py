"""vLLM's side of `selfplay.engine.ngrams`: a logits processor that the engine loads by name
(`AVOID_NGRAMS`) and that applies an `NgramPenalty` to every request whose `extra_args` carry
one (`vllm_backend._avoiding`); other requests pass untouched. Imported by vLLM only."""

from __future__ import annotations

from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from selfplay.engine.ngrams import EXTRA_ARGS_KEY, NgramPenalty

__all__ = ["AvoidNgrams"]


class AvoidNgrams(AdapterLogitsProcessor):
    """One `NgramPenalty` per request that carries one, applied to its row of the logits."""

    def is_argmax_invariant(self) -> bool:
        return False  # the penalty can change the likeliest token: greedy requests need it too

    def new_req_logits_processor(self, params):
        args = (params.extra_args or {}).get(EXTRA_ARGS_KEY)
        if not args:
            return None
        return NgramPenalty(args["sources"], args["n"], args["penalty"])
