"""Evaluation on the benchmarks of the field, with pass@k.

harness.py          `evaluate(problems, prompt, judge, ...)`: the one evaluation loop (generate
                    n samples, read answers, judge them in one batch, pass@k, per-sample records)
cruxeval.py         CRUXEval-O/I: problems, prompts, answer parsing; judged by `selfplay.judge`
                    (the sandboxed executor, inputs read as expressions)
math_benchmarks.py  GSM8K and MATH-500: problems as labeled math tasks, answer extraction;
                    judged by `selfplay.judge` (the math checker, `selfplay.mathcheck`)
code_benchmarks.py  HumanEval and MBPP: problems, prompts, code extraction; judged by
                    `CodeTestJudge`, their own tests run in a sandbox widened for test code
code_tests.py       the test programs HumanEval and MBPP answers are run in
passk.py            the unbiased pass@k estimator
in_loop.py          the evaluation a run does every `run.eval_every` steps
commands.py         `selfplay eval <benchmark>`: samples.jsonl, summary.json and a table
"""
