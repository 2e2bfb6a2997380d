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
generated.py        the generated family's frozen held-out tasks (deduction, abduction) as a
                    benchmark: does a run's solver improve on the kind of task it trains on
paired.py           the exact McNemar test on items evaluated before and after training, and the
                    Wilson interval of an accuracy
dispatch.py         `evaluate_benchmark`: a benchmark by name to its problems, judge and
                    evaluator; `selfplay eval` and the in-loop evaluation both call it
in_loop.py          the evaluation a run does every `run.eval_every` steps and after its last
report.py           `selfplay report <run>`: proposal rates early and late, each in-loop
                    benchmark at its first and last evaluation with the paired test
figures.py          the report's PNG figures (matplotlib): per-step training panels, accuracy at
                    each evaluation, the pool's difficulty histogram, paired before and after
commands.py         `selfplay eval <benchmark>` (samples.jsonl, summary.json and a table) and
                    `selfplay report`
"""
