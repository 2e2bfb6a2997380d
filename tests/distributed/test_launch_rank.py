"""The rank a launcher gives a process, read before its process group exists."""

from __future__ import annotations

import pytest

from selfplay import console, loop
from selfplay.config import load
from selfplay.distributed import RANK_VARIABLES, launch_rank


@pytest.fixture
def unlaunched(monkeypatch):
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "name",
    ["RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "LOCAL_RANK"],
)
def test_each_launcher_s_rank_is_read(unlaunched, name):
    unlaunched.setenv(name, "3")
    assert launch_rank() == 3


def test_one_process_is_rank_0_and_the_global_rank_comes_first(unlaunched):
    assert launch_rank() == 0
    unlaunched.setenv("LOCAL_RANK", "1")  # torchrun on the second of two machines
    unlaunched.setenv("SLURM_PROCID", "1")  # srun started one torchrun a machine
    unlaunched.setenv("RANK", "5")
    assert launch_rank() == 5
    unlaunched.delenv("RANK")
    unlaunched.setenv("PMI_RANK", "4")  # mpirun under a Slurm allocation
    assert launch_rank() == 4
    unlaunched.setenv("RANK", "")  # set but empty: not a rank
    assert launch_rank() == 4


def test_a_run_started_by_srun_names_its_log_by_that_rank(unlaunched, tmp_path):
    """Only rank 0 writes run.log and shows bars, whichever launcher said the rank."""
    seen = {}

    def opened(config, out, log):
        seen.update(log=log, bars=console.showing())
        return tmp_path

    unlaunched.setenv("SLURM_PROCID", "2")
    unlaunched.setattr(loop, "_run", opened)
    loop.run(load(None, [f"run.folder={tmp_path}"]))
    assert seen == {"log": tmp_path / "run.rank2.log", "bars": False}
