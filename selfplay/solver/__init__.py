"""The solver: prompts for the three task types, and parsing of its answers.

prompt = solver_prompt(task, cfg.roles)
answer = parse_answer(reply(prompt, completion.text), task.type)   # Answer or ParseFailure
verdicts = executor.verify_many([(task, [answer.text, ...])])
"""

from selfplay.solver.parse import parse_answer
from selfplay.solver.prompts import (
    humaneval_prompt,
    math_prompt,
    mbpp_prompt,
    reply,
    solver_prompt,
    solver_stop,
)

__all__ = [
    "solver_prompt",
    "solver_stop",
    "reply",
    "parse_answer",
    "math_prompt",
    "humaneval_prompt",
    "mbpp_prompt",
]
