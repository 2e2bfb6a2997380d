"""The sandboxed executor: validates proposed code tasks and verifies answers.

Modules, trusted side: `api` (the `Executor`), `policy` (static checks, RestrictedPython
compilation), `runner` (sandboxed worker processes), `validate`, `verify`.
Sandbox side (standard library only): `worker`, `guards`, `hardening`.
Both sides: `values` (canonical text of values, literal parsing).

This package's `__init__` imports nothing, so that sandbox workers can import their modules
without the trusted side's dependencies; `from selfplay.executor import Executor` still works.
"""

__all__ = ["Executor"]


def __getattr__(name: str):
    if name == "Executor":
        from selfplay.executor.api import Executor

        return Executor
    raise AttributeError(name)
