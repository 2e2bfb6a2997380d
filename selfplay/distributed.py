"""Several processes share one step: the work of a stage is split across ranks and gathered.

A run is one process or N (accelerate with DDP or FSDP, torchrun, several machines). The
stages read the same either way; this module is the one place that knows about ranks:

  * `launch_rank` is this process's rank as its launcher set it, for what has to know it before
    the process group exists (the run's log file, which rank shows progress bars).
  * `Ranks` says who this process is and moves picklable records between processes
    (gather in rank order, broadcast from rank 0); with one process both are no-ops.
  * `Ranks.map` cuts a list of work into `shares` strided parts, runs the parts this rank
    owns and gathers every part's results in order, so each rank ends up with all of them.
    The engine's generation, the executor's validation and the judge (executor and math
    checker) go through it.
  * `generate` is `map` over prompts, each share sampled with a seed of its own (`share_seed`):
    ranks must not draw the same samples, and a run is reproducible for a given number of
    shares, which is the world size.
  * `SharedStore` is the task pool seen from every rank: rank 0 holds the `TaskStore` and is its
    one writer; every call runs there and its result is broadcast, so the sampled batch, the
    references and the ids of new tasks are the same on every rank.

Everything after the gathers (rewards, advantages over the whole step) is computed by every
rank on identical records, exactly as one process computes it; the update then trains each
rank on its share of the rollouts (`trainer.update`, `share=`).

Records are sent with `torch.distributed`'s object collectives, over a gloo group (the default
group on CPU; a second, gloo group where the default is NCCL, so that records never travel
through GPU memory). A failure on one rank inside `map` or a store call is sent to the others,
which raise too, rather than waiting for a result that never comes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from selfplay.engine.base import Generation, SamplingParams, derive_seed

__all__ = [
    "RANK_VARIABLES",
    "Ranks",
    "SharedStore",
    "RankFailed",
    "generate",
    "group_timeout",
    "launch_rank",
    "share_bounds",
    "share_of",
    "share_seed",
]


# where launchers put a process's rank, in the order they are read: the global rank of torchrun,
# accelerate and DeepSpeed (the one torch.distributed reads), of MPICH and Intel MPI, of Open
# MPI (the first three in accelerate's order), of Slurm's srun; last the rank on this machine,
# which a launcher of one machine may set alone
RANK_VARIABLES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "LOCAL_RANK")


def launch_rank() -> int:
    """This process's rank as its launcher set it (the first of `RANK_VARIABLES` that is set
    and not empty), before a process group exists; 0 without a launcher."""
    for name in RANK_VARIABLES:
        if value := os.environ.get(name):
            return int(value)
    return 0


class RankFailed(RuntimeError):
    """Another rank failed in a collective step; its error is in the message."""


@dataclass
class Ranks:
    """This process's place in the run. `shares` is how many parts shared work is cut into:
    the world size, unless one process is to reproduce an N-process run's samples."""

    rank: int = 0
    world_size: int = 1
    shares: int = 0  # 0: the world size
    group: Any = field(default=None, repr=False)  # process group of the object collectives

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of size {self.world_size}")
        self.shares = self.shares or self.world_size
        if self.shares % self.world_size:
            raise ValueError(
                f"{self.shares} shares cannot be spread evenly over {self.world_size} ranks"
            )

    @classmethod
    def of(cls, accelerator, timeout_s: float | None = None) -> Ranks:
        """The ranks of an `accelerate.Accelerator` (initialised: its process group exists);
        the gloo group made for records where the default one is NCCL waits `timeout_s` in a
        collective (torch's default when None), as the default group does (`group_timeout`)."""
        world, rank = accelerator.num_processes, accelerator.process_index
        if world == 1:
            return cls()
        import torch.distributed as dist

        group = None
        if dist.get_backend() != "gloo":
            timeout = None if timeout_s is None else timedelta(seconds=timeout_s)
            group = dist.new_group(backend="gloo", timeout=timeout)
        return cls(rank, world, group=group)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- collectives ----------------------------------------------------------------------------

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0's `obj` on every rank (what the others pass is ignored)."""
        if self.world_size == 1:
            return obj
        import torch.distributed as dist

        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier(group=self.group)

    def on_main(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """`fn(*args, **kwargs)` run on rank 0 only; its result (or its failure) on every rank."""
        if self.world_size == 1:
            return fn(*args, **kwargs)
        if self.is_main:
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:
                self.broadcast(_Failure(0, repr(error)))
                raise
            return self.broadcast(result)
        result = self.broadcast()
        if isinstance(result, _Failure):
            raise RankFailed(f"rank {result.rank} failed: {result.error}")
        return result

    # -- shared work ----------------------------------------------------------------------------

    def owned(self) -> range:
        """The shares this rank works on: shares k with k % world_size == rank."""
        return range(self.rank, self.shares, self.world_size)

    def map(self, fn: Callable[[list, int], list], items: Sequence) -> list:
        """`fn(part, k)` over the `shares` parts of `items` (part k: every shares-th item from
        the k-th, `share_of`), each part by the rank that owns it; the results in the order
        of the items, on every rank. `fn` returns one result per item of its part.

        Strided parts mix what lies together in `items` (a task type's prompts, a long
        program's answers), so that the ranks' parts take about as long."""
        mine: dict[int, list] | _Failure = {}
        try:
            for k in self.owned():
                part = share_of(items, k, self.shares)
                if part:
                    results = fn(part, k)
                    if len(results) != len(part):
                        raise ValueError(f"{len(results)} results for {len(part)} items")
                    mine[k] = results
        except BaseException as error:
            if self.world_size == 1:
                raise
            self.gather(_Failure(self.rank, repr(error)))
            raise
        parts: dict[int, list] = {}
        for got in self.gather(mine):
            if isinstance(got, _Failure):
                raise RankFailed(f"rank {got.rank} failed: {got.error}")
            parts.update(got)
        return [parts[i % self.shares][i // self.shares] for i in range(len(items))]


@dataclass(frozen=True)
class _Failure:
    rank: int
    error: str


def group_timeout(seconds: float):
    """accelerate's handler that gives the process group it creates a timeout of `seconds`
    (`run.process_group_timeout_s`): how long a rank waits in a collective before it fails.

    accelerate passes on only fields that differ from the handler's defaults, and its default
    timeout is NCCL's 600 s: 600 s exactly would leave a gloo group at torch's 1800. A
    microsecond more is passed on."""
    from accelerate.utils import InitProcessGroupKwargs

    timeout = timedelta(seconds=seconds)
    if timeout == InitProcessGroupKwargs().timeout:
        timeout += timedelta(microseconds=1)
    return InitProcessGroupKwargs(timeout=timeout)


def share_of(items: Sequence, k: int, shares: int) -> list:
    """Share k of `shares`: the items at k, k + shares, k + 2 shares, ..."""
    return list(items[k::shares])


def share_bounds(n: int, shares: int) -> list[tuple[int, int]]:
    """[start, stop) of each of `shares` contiguous parts of n items; sizes differ by at most
    one, the larger parts first."""
    if shares < 1:
        raise ValueError("shares must be at least 1")
    base, extra = divmod(n, shares)
    bounds, start = [], 0
    for k in range(shares):
        stop = start + base + (k < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


def share_seed(seed: int | None, share: int, shares: int) -> int | None:
    """The sampling seed of share `share` of `shares`: the seed itself for one share (a
    single-process run samples as it always has), a hash of (seed, shares, share) otherwise."""
    if seed is None or shares == 1:
        return seed
    return derive_seed(seed, shares, share)


def generate(ranks: Ranks, engine, prompts: Sequence, params: SamplingParams) -> list[Generation]:
    """`engine.generate(prompts, params)` with the prompts split across ranks: each rank
    samples its shares with its own engine and seeds (`share_seed`); every rank gets all
    generations, in prompt order."""
    regex, avoid = params.regex, params.avoid
    per_prompt = isinstance(regex, tuple)
    if per_prompt and len(regex) != len(prompts):
        raise ValueError(f"{len(regex)} regular expressions for {len(prompts)} prompts")
    if avoid is not None and len(avoid) != len(prompts):
        raise ValueError(f"texts to avoid for {len(avoid)} of {len(prompts)} prompts")

    def part(chats: list, k: int) -> list[Generation]:
        mine = replace(params, seed=share_seed(params.seed, k, ranks.shares))
        if per_prompt:
            mine = replace(mine, regex=tuple(share_of(regex, k, ranks.shares)))
        if avoid is not None:
            mine = replace(mine, avoid=tuple(share_of(avoid, k, ranks.shares)))
        return engine.generate(chats, mine)

    return ranks.map(part, prompts)


class SharedStore:
    """The task pool on every rank: rank 0 holds the `TaskStore` (`local`) and runs every call;
    the other ranks get its result. Every rank must make the same calls in the same order,
    which the stages do, since they run on identical records.

    Methods that are not collective (`engine`, `answers`, ...) are the store's own and exist
    on rank 0 only."""

    _COLLECTIVE = (
        "add_tasks",
        "record_attempts",
        "sample",
        "references",
        "get",
        "latest",
        "stats",
        "selection",
        "estimates",
        "induction_inputs",
        "keyed_tasks",
    )

    def __init__(self, store, ranks: Ranks):
        if ranks.is_main and store is None:
            raise ValueError("rank 0 must hold the task store")
        self._local = store
        self._ranks = ranks

    @property
    def local(self):
        """The `TaskStore` itself on rank 0, None elsewhere."""
        return self._local

    @property
    def ranks(self) -> Ranks:
        return self._ranks

    def __getattr__(self, name: str):
        if name in ("_local", "_ranks"):  # not set yet (say, while unpickling)
            raise AttributeError(name)
        if name in SharedStore._COLLECTIVE:

            def call(*args, **kwargs):
                return self._ranks.on_main(lambda: getattr(self._local, name)(*args, **kwargs))

            return call
        if self._local is None:
            raise AttributeError(f"the task store's {name!r} exists on rank 0 only")
        return getattr(self._local, name)

    def __len__(self) -> int:
        return self._ranks.on_main(lambda: len(self._local))

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
