"""selfplay: one language model teaches itself to reason by proposing and solving code tasks.

This module stays import-free: the sandbox workers import `selfplay.executor` modules with
nothing but the standard library available.
"""

__version__ = "0.1.0"
