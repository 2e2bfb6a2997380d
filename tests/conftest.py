"""Shared fixtures: one sandboxed executor per session, the external data sets, markers."""

from __future__ import annotations

import os

import pytest

from selfplay.config import ExecutorConfig
from selfplay.data import data_root
from selfplay.executor import Executor


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def executor():
    with Executor(ExecutorConfig()) as ex:
        yield ex


def require_data(relative: str):
    """Path of an external data file; skips (or fails when SELFPLAY_REQUIRE_DATA=1) if absent."""
    path = data_root() / relative
    if not path.exists():
        message = f"external data {relative} not found under {data_root()} (set SELFPLAY_DATA)"
        if os.environ.get("SELFPLAY_REQUIRE_DATA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


_REPORT: list[str] = []


@pytest.fixture(scope="session")
def report():
    """Lines for the end-of-run summary (acceptance rates and the like)."""
    return _REPORT


def pytest_terminal_summary(terminalreporter):
    if _REPORT:
        terminalreporter.section("selfplay measurements")
        for line in _REPORT:
            terminalreporter.write_line(line)
