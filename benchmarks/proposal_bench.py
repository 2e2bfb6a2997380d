"""Proposal parse and valid rates per task type, with and without format-constrained generation,
and what the valid deduction and abduction proposals are: new work, or the seed again.

    .venv/bin/python benchmarks/proposal_bench.py [--n 16] [--modes free constrained] [k=v ...]
    .venv/bin/python benchmarks/proposal_bench.py --recipe recipes/cpu_learn.yaml \
        --types deduction abduction --modes constrained --references seed --n 32 roles.topics=true
    ... --save completions.jsonl        # keep the completions (and their prompts' hashes)
    ... --judge-saved completions.jsonl # judge them again, same arguments, no model

The model (default: the embedded SmolLM2-135M-Instruct) writes `--n` proposals per task type
with the recipe's sampling (default recipes/cpu_demo.yaml: temperature 0.7, top-p 0.9, 256 new
tokens) on the vLLM backend, as a zero-data run's first step asks for them: no references, or
with `--references seed` AZR's identity seed as the one reference of every deduction and
abduction prompt (what a zero-data run's seeding and first step show), or with `--references
pool --pool PATH --pool-run NAME [--pool-step N]` the references that run's propose stage draws
from its pool at step N (a copy of the pool is opened); induction proposals write inputs for
programs of the AZR seed file ($SELFPLAY_DATA/azr_seed) that the executor validates. With
`roles.topics=true` each deduction and abduction prompt names the idea a run would draw for it
at that step (0 without a pool; `selfplay.proposer.topics`), and `roles.reference_layout`
shows the references as a run would. `free` samples as the loop does by default;
`constrained` keeps every proposal inside its layout's regular expression
(`generation.constrained_proposals`). A proposal is parsed as the propose stage parses it and
valid when the executor accepts every run (`task_from`) and, for deduction and abduction, the
program has at least `roles.min_statements` statements (the validate stage refuses it unrun).

Of the valid deduction and abduction tasks, as the store stage would judge them: `copies` (the
canonical program of a reference its prompt showed, or a program that behaves as the
reference's does, `behaviour_copies` of them, as `selfplay.new_work` judges it), `trivial`
(`selfplay.trivial`: copying answers it, or its output does not move with its input;
`trivial:<reason>` counts each reason apart; with `curriculum.retype_fixed_abductions` an
abduction its output answers is judged as the deduction the store stage makes of it, `retyped`
of them, and with `curriculum.reinput_trivial` a task that is a copy or constant at its input
at the other input the store stage gives it, `reinput` of them), `repeats` (the canonical
program of an earlier valid proposal of the same mode), `new` (the rest), and the shape of the
new ones:
`statements` (median, as `selfplay.proposer.complexity` counts them) and `loop_share`. One
JSON line per mode and type; the last line is the summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("deduction", "abduction", "induction")


def seed_programs(executor, count: int, rng: random.Random) -> list[str]:
    """Short programs of the AZR seed file that run on their seed input."""
    from selfplay.files import data_root

    path = data_root() / "azr_seed" / "7b_coder_seed_io.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if len(r["snippet"]) < 600]
    verdicts = executor.validate([(r["snippet"], r["input"]) for r in rows])
    programs = [r["snippet"] for r, v in zip(rows, verdicts, strict=True) if v.ok]
    return [rng.choice(programs) for _ in range(count)]


def prompts(
    config, n: int, programs: list[str], types=TYPES, references=None, step: int = 0
) -> list[tuple[str, str | None, object, list]]:
    """(task type, program, chat, references shown) for `n` proposals of each type;
    deduction and abduction prompts show `references(salt, n)[k]` (none without it) and, with
    `roles.topics`, the idea a run draws at `step`."""
    from selfplay.proposer import proposer_prompt
    from selfplay.proposer.topics import prompt_topic
    from selfplay.types import WRITTEN_TYPES

    refuse = not config.curriculum.keep_trivial
    stock = refuse and config.curriculum.refuse_stock_inputs
    out = []
    for kind in types:
        # a run numbers the task types of `selfplay.task_types` for its draws (`salt`)
        order = config.selfplay.task_types
        salt = order.index(kind) if kind in order else len(order)
        written = kind in WRITTEN_TYPES
        drawn = references(salt, n) if references and written else []
        for k in range(n):
            program = programs[k] if kind == "induction" else None
            topic = prompt_topic(config, kind, step, k)
            shown = list(drawn[k]) if k < len(drawn) else []
            chat = proposer_prompt(
                kind, shown, config.roles, program, refuse, topic=topic, refuse_stock=stock
            )
            out.append((kind, program, chat, shown))
    return out


def identity_seed(executor):
    """AZR's seed task, as a zero-data run's pool holds it before the first step."""
    from selfplay.runs import IDENTITY_SEED
    from selfplay.types import Task

    [verdict] = executor.validate([IDENTITY_SEED])
    return Task("deduction", IDENTITY_SEED[0], (verdict.input,), (verdict.output,))


def pool_references(
    path: Path, run: str, step: int | None, config, types, n: int
) -> tuple[dict[int, list[list]], int]:
    """The references a run's propose stage draws at `step` (default: the pool's last) for `n`
    prompts of each deduction and abduction type of `types` (numbered as the run numbers
    `selfplay.task_types`), from a copy of the SQLite pool at `path` (`opened_copy`):
    {type number: one list of tasks per prompt}, and the step."""
    from selfplay.curriculum.snapshot import opened_copy
    from selfplay.types import WRITTEN_TYPES

    # the pool as its run left it, never opened in place
    with opened_copy(path, run, config.curriculum) as store:
        at = store.last_step if step is None else step
        drawn = {
            salt: [
                [r.task for r in refs]
                for refs in store.references(n, at, types=list(WRITTEN_TYPES), salt=salt)
            ]
            for salt, kind in enumerate(config.selfplay.task_types)
            if kind in WRITTEN_TYPES and kind in types
        }
    return drawn, at


def shape(executor, proposed, stock: bool = False, behaviour: bool = True) -> dict[str, float]:
    """What the valid deduction and abduction tasks of one mode and type, each with the
    references its prompt showed, are (see the module's docstring); `stock`: a guessable
    abduction counts as trivial (`curriculum.refuse_stock_inputs`); `behaviour`: a program
    that behaves as a shown reference's does is a copy too, as the store stage judges it
    (`curriculum.behaviour_copies`, `selfplay.new_work.behaves_as`), counted also apart
    (`behaviour_copies`)."""
    import statistics
    from types import SimpleNamespace

    from selfplay.distributed import Ranks
    from selfplay.new_work import behaves_as
    from selfplay.proposer.canonical import canonical_program
    from selfplay.proposer.complexity import loops, statements
    from selfplay.trivial import trivial_reasons

    tasks = [task for task, _ in proposed]
    reasons = trivial_reasons(executor, tasks, stock=stock) if tasks else []
    texts = {
        k
        for k, (task, shown) in enumerate(proposed)
        if canonical_program(task.program) in {canonical_program(r.program) for r in shown}
    }
    others = {
        k: (task, [r.program for r in shown])
        for k, (task, shown) in enumerate(proposed)
        if k not in texts and shown
    }
    run = SimpleNamespace(ranks=Ranks(), executor=executor)
    alike = set(behaves_as(run, others)) if behaviour and others else set()
    seen: set[str] = set()
    counts = Counter()
    sizes, looped = [], []
    for k, ((task, _), reason) in enumerate(zip(proposed, reasons, strict=True)):
        canonical = canonical_program(task.program)
        if k in texts or k in alike:
            counts["copies"] += 1
            counts["behaviour_copies"] += k in alike
        elif reason:
            counts["trivial"] += 1
            counts[f"trivial:{reason}"] += 1
        elif canonical in seen:
            counts["repeats"] += 1
        else:
            counts["new"] += 1
            sizes.append(statements(task.program) or 0)
            looped.append(bool(loops(task.program)))
        seen.add(canonical)
    out = {key: counts[key] for key in ("new", "copies", "behaviour_copies", "trivial", "repeats")}
    out.update(sorted((key, n) for key, n in counts.items() if key.startswith("trivial:")))
    if tasks:
        out["no_new_work_share"] = round(1 - counts["new"] / len(tasks), 3)
    if sizes:
        out["statements"] = float(statistics.median(sizes))
        out["loop_share"] = round(sum(looped) / len(looped), 3)
    return out


def judge(config, executor, requests, completions) -> dict[str, dict]:
    """Per task type: proposals, parsed, valid, truncated, and why the rest failed."""
    from types import SimpleNamespace

    from selfplay.distributed import Ranks
    from selfplay.new_work import replacements
    from selfplay.proposer import parse_proposal, task_from
    from selfplay.proposer.complexity import too_simple
    from selfplay.types import WRITTEN_TYPES, ParseFailure

    roles = config.roles
    counts = {kind: Counter() for kind, *_ in requests}
    parsed = []
    tasks = {kind: [] for kind in counts}
    for (kind, program, _, shown), c in zip(requests, completions, strict=True):
        result = parse_proposal(
            c.text,
            kind,
            program=program,
            min_inputs=roles.induction_visible + 1,
            max_inputs=roles.induction_inputs,
            truncated=c.cut,
        )
        counts[kind]["proposals"] += 1
        counts[kind]["truncated"] += c.cut
        counts[kind]["tokens"] += len(c.token_ids)
        if isinstance(result, ParseFailure):
            counts[kind][f"failed:{result.reason}"] += 1
            continue
        counts[kind]["parsed"] += 1
        if kind in WRITTEN_TYPES and too_simple(result.program, roles.min_statements):
            counts[kind]["failed:too_simple"] += 1  # the validate stage refuses it unrun
            continue
        parsed.append((result, shown))
    verdicts = iter(executor.validate([case for p, _ in parsed for case in p.cases]))
    for p, shown in parsed:
        runs = [next(verdicts) for _ in p.cases]
        task = task_from(p, runs, n_visible=roles.induction_visible)
        counts[p.type]["valid"] += task is not None
        if task is not None:
            tasks[p.type].append((task, shown))
    curriculum = config.curriculum
    repairs = not curriculum.keep_trivial
    for kind in ("deduction", "abduction"):
        if tasks.get(kind) and repairs:
            # as the store stage does (`new_work.replacements`): an abduction its output answers
            # judged as its deduction, a task trivial at its input at another input
            given = [task for task, _ in tasks[kind]]
            run = SimpleNamespace(config=config, ranks=Ranks(), executor=executor)
            judged = replacements(run, given)
            changed = [
                (t.type != g.type, t.inputs != g.inputs) for t, g in zip(judged, given, strict=True)
            ]
            if curriculum.retype_fixed_abductions and kind == "abduction":
                counts[kind]["retyped"] = sum(retyped for retyped, _ in changed)
            if curriculum.reinput_trivial:
                counts[kind]["reinput"] = sum(moved for _, moved in changed)
            tasks[kind] = [(t, shown) for t, (_, shown) in zip(judged, tasks[kind], strict=True)]
    out = {kind: dict(c) for kind, c in counts.items()}
    for kind in ("deduction", "abduction"):
        if kind in out:
            out[kind] |= shape(
                executor, tasks[kind], curriculum.refuse_stock_inputs, curriculum.behaviour_copies
            )
    return out


def run_mode(mode: str, config, engine, executor, requests, save) -> tuple[dict[str, dict], float]:
    from dataclasses import replace

    from selfplay.engine import sampling
    from selfplay.extract import ANSWER_STOP

    params = sampling(config.generation, n=1, seed=config.run.seed, stop=ANSWER_STOP)
    if mode == "constrained":
        from selfplay.proposer.layout import proposal_regex, think_limit

        think = think_limit(config.generation.max_new_tokens)
        regexes = tuple(proposal_regex(kind, config.roles, think) for kind, *_ in requests)
        params = replace(params, regex=regexes)
    from selfplay.engine.ngrams import avoiding
    from selfplay.proposer.prompts import shown_programs

    # as the propose stage does under `generation.avoid_reference_ngrams`
    shown = [shown_programs(kind, refs, config.roles) for kind, *_, refs in requests]
    params = avoiding(params, config.generation, shown)
    started = time.perf_counter()
    generations = engine.generate([r[2] for r in requests], params)
    wall = time.perf_counter() - started
    completions = [g.completions[0] for g in generations]
    if save:
        for (kind, _, chat, _), c in zip(requests, completions, strict=True):
            record = {"mode": mode, "type": kind, "text": c.text, "finish": c.finish_reason}
            record |= {"tokens": len(c.token_ids), "prompt": prompt_hash(chat)}
            save.write(json.dumps(record) + "\n")
    return judge(config, executor, requests, completions), wall


def prompt_hash(chat) -> str:
    """A short hash of a prompt's messages, saved beside its completion."""
    import hashlib

    text = json.dumps([[m.role, m.content] for m in chat])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def saved_completions(path: Path, mode: str, requests) -> list:
    """The completions of `mode` that `--save` wrote to `path`, one per request in order, to
    judge again without the model; a file that holds the prompts' hashes must have been
    written for these prompts (older files hold neither the hashes nor the token counts,
    which are then 0)."""
    from selfplay.engine.base import Completion

    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    records = [r for r in records if r["mode"] == mode]
    kinds = [r["type"] for r in records]
    hashes = [r.get("prompt") for r in records]
    asked = [prompt_hash(chat) for _, _, chat, _ in requests]
    if any(hashes) and hashes != asked:
        raise SystemExit(f"{path}: its completions were written for other prompts")
    if kinds != [kind for kind, *_ in requests]:
        raise SystemExit(
            f"{path}: its {len(records)} {mode} completions are not the {len(requests)} "
            "prompts these arguments ask for (same --n, --types and --references?)"
        )
    out = []
    for r in records:
        tokens = r.get("tokens", 0)
        out.append(Completion(r["text"], (0,) * tokens, (0.0,) * tokens, r["finish"]))
    return out


def report(mode: str, counts: dict[str, dict], wall: float | None) -> dict[str, dict]:
    """Print one JSON line per task type of `mode`; the summary's rates of each."""
    rates = {}
    for kind, c in counts.items():
        line = {"mode": mode, "type": kind, **c}
        if wall is not None:
            line["generate_s"] = round(wall, 1)
        print(json.dumps(line), flush=True)
        rates[kind] = {
            "parse_rate": round(c.get("parsed", 0) / c["proposals"], 3),
            "valid_rate": round(c.get("valid", 0) / c["proposals"], 3),
        }
        for key in ("no_new_work_share", "new", "copies", "statements", "loop_share"):
            if key in c:
                rates[kind][key] = c[key]
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=16, help="proposals per task type and mode")
    parser.add_argument("--modes", nargs="+", default=["free", "constrained"])
    parser.add_argument("--save", type=Path, help="write the completions to this JSONL file")
    parser.add_argument(
        "--judge-saved",
        type=Path,
        help="judge the completions --save wrote there, with the same arguments, without "
        "generating (e.g. after the judgement changed)",
    )
    parser.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "cpu_demo.yaml")
    parser.add_argument("--types", nargs="+", default=list(TYPES), choices=TYPES)
    parser.add_argument(
        "--references",
        choices=("none", "seed", "pool"),
        default="none",
        help="seed: AZR's identity seed is the one reference of deduction and abduction prompts; "
        "pool: those a run draws from --pool at --pool-step",
    )
    parser.add_argument("--pool", type=Path, help="a run's SQLite pool (with --references pool)")
    parser.add_argument("--pool-run", default="default", help="its run (`curriculum.run`)")
    parser.add_argument("--pool-step", type=int, help="the step drawn at (default: the last)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()

    from selfplay import config as config_module
    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model
    from selfplay.executor import Executor

    started = time.perf_counter()
    config = config_module.load(args.recipe, ["engine.backend=vllm", *args.overrides])
    rng = random.Random(config.run.seed)
    summary = {"model": config.model.name, "backend": config.engine.backend, "n": args.n}
    summary |= {"think": config.roles.think, "temperature": config.generation.temperature}
    summary |= {"references": args.references, "topics": config.roles.topics}
    summary |= {"reference_layout": config.roles.reference_layout}
    if args.save and args.judge_saved:
        parser.error("--judge-saved judges saved completions: --save has nothing to write")
    save = args.save.open("w") if args.save else None
    with Executor(config.executor) as executor:
        programs = seed_programs(executor, args.n, rng) if "induction" in args.types else []
        references, step = None, 0
        if args.references == "seed":
            seed = identity_seed(executor)
            references = lambda salt, n: [[seed]] * n  # noqa: E731
        elif args.references == "pool":
            if not args.pool:
                parser.error("--references pool needs --pool")
            drawn, step = pool_references(
                args.pool, args.pool_run, args.pool_step, config, args.types, args.n
            )
            references = lambda salt, n: drawn[salt]  # noqa: E731
            summary |= {"pool": str(args.pool), "pool_run": args.pool_run, "pool_step": step}
        requests = prompts(config, args.n, programs, args.types, references, step)
        if args.judge_saved:
            for mode in args.modes:
                completions = saved_completions(args.judge_saved, mode, requests)
                counts = judge(config, executor, requests, completions)
                summary[mode] = report(mode, counts, None)
            summary["judged"] = str(args.judge_saved)
            print(json.dumps(summary))
            return 0
        model, tokenizer, source = load_model(config.model)
        engine = make_engine(config, model, tokenizer, source)
        try:
            for mode in args.modes:
                counts, wall = run_mode(mode, config, engine, executor, requests, save)
                summary[mode] = report(mode, counts, wall)
        finally:
            engine.close()
            if save:
                save.close()
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # vLLM starts processes; this guard keeps them from re-running main
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
