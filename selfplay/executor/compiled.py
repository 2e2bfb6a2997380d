"""What the policy gives for a program or an input: its compiled form, or why it was refused
(`policy.py` decides; the executor, the compile helpers and the sandbox's batches carry these)."""

from __future__ import annotations

import marshal
from dataclasses import dataclass
from types import CodeType

__all__ = ["CompiledInput", "CompiledProgram", "PolicyRejection"]


class CompiledProgram:
    """A program that passed the policy, as its code object and as the `marshal` bytes the
    sandbox receives; each is derived from the other on first use (a compile helper sends the
    bytes, which then go to the sandbox without being loaded and dumped again here).

    `rerun`: whether the program may tell two processes apart (`reruns.PROCESS_WORDS`),
    so that validation runs it a second time, in another worker with another hash seed."""

    __slots__ = ("source", "rerun", "_code", "_marshalled")

    def __init__(
        self,
        code: CodeType | None = None,
        *,
        source: str,
        marshalled: bytes | None = None,
        rerun: bool = True,
    ):
        if code is None and marshalled is None:
            raise ValueError("a compiled program needs its code or its marshalled code")
        self.source, self._code, self._marshalled = source, code, marshalled
        self.rerun = rerun

    def __repr__(self) -> str:
        return f"CompiledProgram(source={self.source[:60]!r})"

    @property
    def code(self) -> CodeType:
        if self._code is None:
            self._code = marshal.loads(self._marshalled)
        return self._code

    @property
    def marshalled(self) -> bytes:
        if self._marshalled is None:
            self._marshalled = marshal.dumps(self._code)
        return self._marshalled


@dataclass(frozen=True)
class CompiledInput:
    text: str  # normalised argument text (also the key that identifies equal inputs)
    code: CodeType  # evaluates to (args, kwargs) through `_args_`
    expression: bool  # an expression input, evaluated against its own instance of the program
    rerun: bool = True  # it may hold a set, whose order follows the hash seed (validation reruns)


@dataclass(frozen=True)
class PolicyRejection:
    reason: str  # "syntax" or "policy:<rule>"
    detail: str
