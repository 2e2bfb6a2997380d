"""Which run a sandbox child is at, and whether it is evaluating that run's input, in a page
the child shares with the zygote that forked it (`worker.py`).

A child that dies (a native call past its CPU time, the kernel out of memory) cannot say where
it was, so the zygote reads the page once the child is gone: a run that ends while its input
is evaluated is the input's (`input:<why>`), elsewhere the program's. Each child gets a page of
its own (`renew`, before the fork): a process the child left behind keeps only that one, which
the zygote no longer reads. The page says nothing the child's result lines could not say
already, and the zygote reads only a run index and a flag from it.
"""

from __future__ import annotations

import mmap
import struct

__all__ = ["Phase"]


class Phase:
    """Which run a child is at and whether it is evaluating that run's input, in a page it
    shares with the zygote: a child that dies (a native call past its CPU time, the kernel out
    of memory) cannot say so itself, so the zygote reads the page once the child is gone."""

    _LAYOUT = struct.Struct("=qB")  # run index, evaluating its input

    def __init__(self) -> None:
        self.page = mmap.mmap(-1, mmap.PAGESIZE)

    def renew(self) -> None:
        """A new page, for the next child to fork (whatever still maps the old one, a process
        the child left behind, writes to a page the zygote no longer reads)."""
        self.page.close()
        self.page = mmap.mmap(-1, mmap.PAGESIZE)
        self.begin(-1)

    def begin(self, index: int) -> None:
        self._LAYOUT.pack_into(self.page, 0, index, 0)

    def evaluating(self, flag: bool) -> None:
        self.page[self._LAYOUT.size - 1] = flag

    def in_input(self, index: int | None = None) -> bool:
        at, flag = self._LAYOUT.unpack_from(self.page, 0)
        return flag == 1 and index in (None, at)
