"""How work is split across ranks, in one process: shares, seeds, ordered gathers, the store's
one writer, and the update's micro-batches and loss normalisation (that N ranks' averaged
gradients are the one process's gradient)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from accelerate import Accelerator

from selfplay.config import ConfigError, TrainerConfig, load
from selfplay.distributed import (
    RankFailed,
    Ranks,
    SharedStore,
    generate,
    group_timeout,
    share_bounds,
    share_seed,
)
from selfplay.engine import SamplingParams, chat
from selfplay.trainer.update import micro_batch_share, policy_update
from tests.trainer.test_trainer_update import rollouts, tiny_model


def test_share_bounds_cover_the_items_in_order_and_balance_them():
    assert share_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert share_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert share_bounds(0, 2) == [(0, 0), (0, 0)]
    with pytest.raises(ValueError, match="at least 1"):
        share_bounds(3, 0)


def test_share_seeds_differ_per_share_and_keep_one_process_unchanged():
    assert share_seed(123, 0, 1) == 123  # one process samples as it always has
    assert share_seed(None, 1, 2) is None
    seeds = {share_seed(123, k, n) for n in (2, 4) for k in range(n)}
    assert len(seeds) == 6 and 123 not in seeds
    assert share_seed(123, 1, 2) == share_seed(123, 1, 2)  # reproducible


def test_ranks_reject_impossible_worlds():
    with pytest.raises(ValueError, match="not in a world"):
        Ranks(rank=2, world_size=2)
    with pytest.raises(ValueError, match="spread evenly"):
        Ranks(rank=0, world_size=2, shares=3)
    assert Ranks(rank=1, world_size=2).shares == 2


def test_one_process_gathers_its_shares_in_order():
    ranks = Ranks(shares=3)
    assert ranks.gather("x") == ["x"] and ranks.broadcast(5) == 5
    seen = []

    def work(part, k):
        seen.append(k)
        return [(k, item) for item in part]

    out = ranks.map(work, list("abcdefg"))
    assert out == [(0, "a"), (1, "b"), (2, "c"), (0, "d"), (1, "e"), (2, "f"), (0, "g")]
    assert seen == [0, 1, 2]
    with pytest.raises(ValueError, match="2 results for 3 items"):
        ranks.map(lambda part, k: part[:2], list("abcdefg"))


def test_generation_in_shares_samples_each_share_with_its_seed(tiny_model_dir, tiny_model):
    from transformers import AutoTokenizer

    from selfplay.config import EngineConfig
    from selfplay.engine.transformers_backend import TransformersEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = TransformersEngine(tiny_model, tokenizer, EngineConfig())
    prompts = [chat(f"count to {k}") for k in range(5)]
    params = SamplingParams(n=2, max_tokens=6, seed=7)
    whole = generate(Ranks(), engine, prompts, params)
    assert whole == engine.generate(prompts, params)  # one share: the engine's own call
    shared = generate(Ranks(shares=2), engine, prompts, params)
    first = engine.generate(
        prompts[0::2], SamplingParams(n=2, max_tokens=6, seed=share_seed(7, 0, 2))
    )
    second = engine.generate(
        prompts[1::2], SamplingParams(n=2, max_tokens=6, seed=share_seed(7, 1, 2))
    )
    assert shared == [first[0], second[0], first[1], second[1], first[2]]
    assert [g.prompt_token_ids for g in shared] == [g.prompt_token_ids for g in whole]
    with pytest.raises(ValueError, match="2 regular expressions for 5 prompts"):
        generate(Ranks(shares=2), engine, prompts, SamplingParams(regex=("a", "b")))
    # texts to avoid are split as the prompts are: each share's engine gets its own
    asked = []

    class Recording:
        def generate(self, chats, mine):
            asked.append((len(chats), mine.avoid))
            return engine.generate(chats, mine)

    avoid = tuple((f"count to {k}",) if k % 2 else () for k in range(5))
    steered = SamplingParams(max_tokens=4, seed=7, avoid=avoid, avoid_ngram=2, avoid_penalty=9.0)
    generate(Ranks(shares=2), Recording(), prompts, steered)
    assert asked == [(3, avoid[0::2]), (2, avoid[1::2])]
    with pytest.raises(ValueError, match="texts to avoid for 2 of 5 prompts"):
        generate(Ranks(shares=2), engine, prompts, replace(steered, avoid=avoid[:2]))


def test_the_shared_store_is_the_store_in_one_process(tmp_path):
    from selfplay.config import CurriculumConfig
    from selfplay.curriculum import Provenance, TaskStore
    from selfplay.types import Task

    local = TaskStore.open(str(tmp_path / "pool.sqlite"), "t", CurriculumConfig())
    store = SharedStore(local, Ranks())
    result = store.add_tasks([Task("deduction", "def f(a):\n    return a", ("1",), ("1",))],
                             Provenance("seed", 0, "", "test"))  # fmt: skip
    assert len(store) == 1 and store.get(result.ids)[0].task.inputs == ("1",)
    assert store.answers == local.answers  # not collective: the store's own
    store.close()
    with pytest.raises(ValueError, match="rank 0 must hold"):
        SharedStore(None, Ranks())
    other = SharedStore(None, Ranks(rank=1, world_size=2))
    with pytest.raises(AttributeError, match="rank 0 only"):
        _ = other.engine


def test_failures_on_rank_zero_reach_every_rank_as_errors():
    with pytest.raises(ZeroDivisionError):
        Ranks().on_main(lambda: 1 / 0)
    assert issubclass(RankFailed, RuntimeError)


@pytest.mark.parametrize("count", [0, 1, 5, 8, 9])
def test_every_rank_runs_the_same_micro_batches_over_a_balanced_share(count):
    active = list(range(100, 100 + count)) or [100]
    shares = [micro_batch_share(active, 2, Ranks(rank=r, world_size=3)) for r in range(3)]
    assert len({len(s) for s in shares}) == 1  # the same number of micro-batches everywhere
    taken = sorted(i for s in shares for micro in s for i in micro)
    assert taken == active  # each rollout once
    sizes = [sum(map(len, s)) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert all(len(micro) <= 2 for s in shares for micro in s)


class _Alone(Ranks):
    """One rank of a simulated world, run alone: its gathers see its own statistics twice,
    and nothing averages its gradients (the test does)."""

    def gather(self, obj):
        return [obj] * self.world_size


def _update(model, data, advantages, share=None, micro_batch=2) -> dict[str, torch.Tensor]:
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    settings = TrainerConfig(micro_batch=micro_batch, max_grad_norm=1e9)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    policy_update(accelerator, model, optimizer, scheduler, data, advantages, settings, 0,
                  seed=3, share=share)  # fmt: skip
    return {k: v - before[k] for k, v in model.state_dict().items()}


@pytest.mark.parametrize("micro_batch", [1, 2])  # 1: rank 1 runs a zero-weight micro-batch
def test_ranks_averaged_gradients_equal_one_process_gradient(micro_batch):
    """Plain SGD with lr 1 moves each parameter by minus its gradient: the average of two
    ranks' moves is what DDP's averaged gradient would do, and must be one process's move."""
    data = rollouts(tiny_model(), count=7)
    advantages = [1.0, -0.5, 0.0, 2.0, -1.0, 0.5, 0.0]
    one = _update(tiny_model(), data, advantages, micro_batch=micro_batch)
    ranks = [_update(tiny_model(), data, advantages, _Alone(r, 2), micro_batch) for r in range(2)]
    moved = False
    for name, delta in one.items():
        averaged = (ranks[0][name] + ranks[1][name]) / 2
        assert torch.allclose(averaged, delta, atol=1e-6), name
        moved |= bool(delta.abs().max() > 0)
    assert moved, "the update must change the parameters"


def test_processes_on_one_machine_share_its_cores(monkeypatch):
    from selfplay.config import ConfigError, load
    from selfplay.runs import _set_threads

    before = torch.get_num_threads()
    try:
        _set_threads(0, Ranks())  # one process: torch's own choice
        assert torch.get_num_threads() == before
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
        _set_threads(0, Ranks(rank=1, world_size=64))
        assert torch.get_num_threads() == 1  # more processes than cores: one each
        _set_threads(3, Ranks())
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ConfigError, match="run.threads"):
        load(None, ["run.threads=-1"])


def test_fsdp_is_refused_where_it_cannot_work():
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from selfplay.config import load
    from selfplay.runs import _check_sharding

    fsdp = SimpleNamespace(distributed_type=DistributedType.FSDP)
    ddp = SimpleNamespace(distributed_type=DistributedType.MULTI_CPU)
    vllm = load(None, ["engine.backend=vllm"])
    _check_sharding(fsdp, vllm)
    _check_sharding(ddp, load(None, ["engine.backend=transformers", "trainer.lora.rank=8"]))
    with pytest.raises(ValueError, match="needs engine.backend=vllm"):
        _check_sharding(fsdp, load(None, ["engine.backend=transformers"]))
    with pytest.raises(ValueError, match="LoRA"):
        _check_sharding(fsdp, load(None, ["engine.backend=vllm", "trainer.lora.rank=8"]))


def test_the_process_group_timeout_is_configured_and_reaches_accelerate():
    assert load(None, []).run.process_group_timeout_s == 1800
    assert group_timeout(1800).to_kwargs()["timeout"].total_seconds() == 1800
    # accelerate drops a value equal to its default (600 s); it must still reach torch
    assert group_timeout(600).to_kwargs()["timeout"].total_seconds() == pytest.approx(600)
    with pytest.raises(ConfigError, match="process_group_timeout_s"):
        load(None, ["run.process_group_timeout_s=0"])
