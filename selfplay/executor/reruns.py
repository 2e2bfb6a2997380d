"""Which validations need a second run: the words and inputs through which a case can tell two
processes apart (`validate.py` runs every other case once; `policy.py` sets the flags)."""

from __future__ import annotations

import ast

__all__ = ["PROCESS_WORDS", "may_hold_set"]

#: What may make two runs of one program on one input differ, though every run starts alike: the
#: order of a set of strings follows the process's hash seed, and a default `repr` or `hash` shows
#: the object's address. A program can reach either only through a set display or comprehension or
#: one of these words (`id`, the clock and `time` are refused, and `random`, where a configuration
#: allows it, is reseeded with 0 every run and never reads entropy): the set builtins, `hash`,
#: `object`, classes (their instances hash by address), dict views (`d.keys() | s` is a set), the
#: set types of `typing` and `collections.abc`, and the ways to an attribute whose name is computed
#: (`getattr(d, 'ke' + 'ys')`). Validation runs such a program twice, in two workers with different
#: hash seeds, and every other program once (and again when its output shows an address:
#: `validate.py`).
PROCESS_WORDS = frozenset(
    """set frozenset hash __hash__ object class keys items Set FrozenSet AbstractSet
    MutableSet KeysView ItemsView getattr attrgetter methodcaller""".split()
)


def may_hold_set(literal: str) -> bool:
    """Whether a literal argument list holds a set (`{1, 2}`, `set(...)`, `frozenset(...)`):
    only a text with a brace or one of those words is parsed again to tell."""
    if "set(" in literal:
        return True
    if "{" not in literal:
        return False
    try:
        tree = ast.parse(f"f({literal})", "<input>", "eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return True  # not reached: the text is `parse_call_args`'s own
    return any(isinstance(node, ast.Set) for node in ast.walk(tree))
