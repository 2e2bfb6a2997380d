"""Programs that run a benchmark's own unit tests inside the sandbox.

HumanEval and MBPP judge a solution by executing test code (`check(candidate)`, or a list of
`assert` lines). The executor runs programs that define `f`, so each builder returns a program
whose `f()` runs the tests and returns True; with the input `""` it validates exactly when every
test passes, and its reason says why not (`crash:AssertionError`, `timeout`, `policy:import`...).
"""

from __future__ import annotations

import textwrap

#: Name the tested function is kept under, in case it is itself called `f` (HumanEval/106).
CANDIDATE = "_candidate"


def humaneval_program(problem: dict, completion: str) -> str:
    """Prompt + completion + the problem's `check`, wrapped as `f()`."""
    return (
        problem["prompt"]
        + completion
        + "\n\n"
        + problem["test"]
        + f"\n\n{CANDIDATE} = {problem['entry_point']}\n\n"
        + f"def f():\n    check({CANDIDATE})\n    return True\n"
    )


def mbpp_program(problem: dict, code: str) -> str:
    """Imports + code + set-up + the problem's assert lines, wrapped as `f()`."""
    imports = "\n".join(problem.get("test_imports") or [])
    asserts = "\n".join(problem["test_list"])
    return (
        f"{imports}\n{code}\n{problem.get('test_setup_code') or ''}\n\n"
        f"def f():\n{textwrap.indent(asserts, '    ')}\n    return True\n"
    )
