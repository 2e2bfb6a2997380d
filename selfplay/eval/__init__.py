"""Evaluation on the benchmarks of the field, each with its judge: CRUXEval (the sandboxed
executor), HumanEval and MBPP (their own tests, run in the sandbox), GSM8K and MATH-500 (the
math checker, `selfplay.mathcheck`). `commands.py` is `selfplay eval`."""
