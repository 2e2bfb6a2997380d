"""Generate real model completions for both roles and keep them as parser test fixtures.

    .venv/bin/python scripts/make_parse_fixtures.py [--per-type 64] [key=value ...]
    .venv/bin/python scripts/make_parse_fixtures.py --report      # only re-read the fixtures
    .venv/bin/python scripts/make_parse_fixtures.py --kinds solver/abduction --per-type 40 \
        --out tests/fixtures/abduction_answers.jsonl                # one kind, another file

Reference tasks and tasks to solve come from the AZR seed files ($SELFPLAY_DATA/azr_seed, else
../shared/data/azr_seed), validated by the executor so that their outputs are canonical. The
configured model (default: the embedded SmolLM2-135M-Instruct) writes `--per-type` proposals and
answers for each task type with the configured sampling; they are written to
tests/fixtures/completions.jsonl (or `--out`) with what was asked; `--kinds` limits them to some
of the six role/type kinds. The report (printed as JSON) says how many
parse and how many proposals the executor validates. Any `key=value` is a config override, e.g.
`engine.backend=vllm` or `roles.think=false`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "completions.jsonl"
TYPES = ("deduction", "abduction", "induction")


def seed_tasks(executor, data: Path, limit: int = 400):
    """Deduction/abduction and induction tasks from the AZR seed files, as the executor sees
    them; seeds it rejects (e.g. inputs that are not literals) are skipped."""
    from selfplay.proposer import task_from
    from selfplay.types import Proposal

    rows = [json.loads(x) for x in (data / "7b_coder_seed_io.jsonl").read_text().splitlines()]
    proposals = [Proposal("deduction", r["snippet"], (r["input"],)) for r in rows[:limit]]
    rows = [
        json.loads(x) for x in (data / "7b_coder_code_f_seed_io.jsonl").read_text().splitlines()
    ]
    proposals += [
        Proposal("induction", r["snippet"], tuple(r["inputs"]), " ".join(r["message"].split()))
        for r in rows[:limit]
        if r and len(r["message"]) < 300
    ]
    verdicts = executor.validate([c for p in proposals for c in p.cases])
    tasks, start = [], 0
    for p in proposals:
        task = task_from(p, verdicts[start : start + len(p.inputs)], n_visible=3)
        start += len(p.inputs)
        if task is not None:
            tasks.append(task)
    return tasks


KINDS = tuple(f"{role}/{t}" for role in ("proposer", "solver") for t in TYPES)


def requests(tasks, per_type: int, roles, references: int, rng: random.Random, kinds=KINDS):
    """(record, chat) pairs: proposals and answers, `per_type` of each of `kinds`."""
    from selfplay.proposer import proposer_prompt
    from selfplay.solver import solver_prompt

    simple = [t for t in tasks if t.type != "induction" and len(t.program) < 600]
    induction = [t for t in tasks if t.type == "induction" and len(t.inputs) > 3]
    out = []
    for kind in TYPES:
        for _ in range(per_type if f"proposer/{kind}" in kinds else 0):
            refs = rng.sample(induction if kind == "induction" else simple, references)
            program = rng.choice(simple).program if kind == "induction" else None
            record = {"role": "proposer", "type": kind, "program": program}
            out.append((record, proposer_prompt(kind, refs, roles, program)))
    for kind in TYPES:
        count = per_type if f"solver/{kind}" in kinds else 0
        for task in rng.sample(induction if kind == "induction" else simple, count):
            task = dataclasses.replace(task, type=kind)
            record = {"role": "solver", "type": kind, "task": dataclasses.asdict(task)}
            out.append((record, solver_prompt(task, roles)))
    return out


def generate(cfg, chats):
    from selfplay.engine import make_engine, sampling
    from selfplay.engine.model import load_model

    model, tokenizer, source = load_model(cfg.model)
    engine = make_engine(cfg, model, tokenizer, source)
    started = time.perf_counter()
    generations = engine.generate(chats, sampling(cfg.generation, n=1, seed=cfg.engine.seed))
    elapsed = time.perf_counter() - started
    engine.close()
    tokens = sum(len(g.completions[0].token_ids) for g in generations)
    print(f"generated {tokens} tokens in {elapsed:.0f} s", file=sys.stderr)
    return [g.completions[0] for g in generations]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-type", type=int, default=64)
    parser.add_argument("--report", action="store_true", help="only report on the fixtures")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--out", type=Path, default=FIXTURES, help="the fixture file")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()

    from selfplay import config as config_module
    from selfplay.executor import Executor
    from tests.fixture_report import report

    cfg = config_module.load(None, args.overrides)
    with Executor(cfg.executor) as executor:
        if not args.report:
            data = Path(os.environ.get("SELFPLAY_DATA", ROOT.parent / "shared" / "data"))
            tasks = seed_tasks(executor, data / "azr_seed")
            pairs = requests(
                tasks,
                args.per_type,
                cfg.roles,
                cfg.curriculum.references,
                random.Random(cfg.engine.seed),
                args.kinds,
            )
            completions = generate(cfg, [chat for _, chat in pairs])
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("w") as out:
                for (record, _), c in zip(pairs, completions, strict=True):
                    extra = {"text": c.text, "finish_reason": c.finish_reason}
                    out.write(json.dumps({**record, **extra}) + "\n")
        records = [json.loads(line) for line in args.out.read_text().splitlines()]
        summary = report(records, executor)
    reasons = Counter(summary.pop("failures"))
    sampled = {"temperature": cfg.generation.temperature, "top_p": cfg.generation.top_p}
    print(json.dumps({"model": cfg.model.name, "think": cfg.roles.think, **sampled, **summary}))
    print(json.dumps({"parse_failures": dict(reasons.most_common())}))
    return 0


if __name__ == "__main__":  # vLLM starts processes; this guard keeps them from re-running main
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
