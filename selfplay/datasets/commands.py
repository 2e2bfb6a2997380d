"""`selfplay pool import|export|stats|rename`: the task pool from the command line.

  selfplay pool import FILE... --store PATH_OR_URL [--labeled] [--run NAME] [--rejects OUT]
                       [--limit N [--sample-seed S]]
  selfplay pool export --store PATH_OR_URL --format jsonl|parquet|hf --out PATH [--force]
                       [filters]
  selfplay pool stats --store PATH_OR_URL [--run NAME] [--step N] [--json] [--programs]
  selfplay pool rename --store PATH_OR_URL [--run NAME] NEW_NAME
  selfplay pool fork --store PATH [--run NAME] --out PATH NEW_NAME

`--store` is a SQLite file path or a database URL. Without `--run`, a store holding one run
means that run; an empty store gets `curriculum.run` on import. Import prints one JSON summary
per file (acceptance rate, rejects by reason) and a table on stderr; `--rejects` writes every
reject with its line and reason as JSONL; `--limit N` uses a seeded random sample of N records
of each file (a small labeled set). A task whose program is a program of a benchmark in
`curriculum.decontaminate` is rejected as `contaminated:<benchmark>`, except against the
benchmark whose own data file is imported (`contamination.import_check`). Trailing
`section.field=value` arguments override the configuration (e.g.
`curriculum.seed_visible_fraction=0.5 executor.workers=4`). `rename` gives a run another name:
a run folder copied to go on under a new `curriculum.run` resumes only with its pool renamed.
`fork` starts a new run from a run's seeded pool: a copy of the SQLite pool at `--out` holding
the run's step-0 tasks and answers under NEW_NAME, the seeding record beside it, so that
`curriculum.run=NEW_NAME` (its folder holding `--out`) trains from the same pool without seeding
again; runs that differ in one setting then start alike.
Export writes a temporary sibling of `--out` that takes its place only when complete; an
existing `--out` is refused unless `--force`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from sqlalchemy.exc import OperationalError

from selfplay import config as config_module
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.records import ORIGINS
from selfplay.types import TASK_TYPES


def register(sub: argparse._SubParsersAction) -> None:
    pool = sub.add_parser("pool", help="the task pool: import seeds, export, statistics")
    commands = pool.add_subparsers(dest="pool_command", required=True)

    p = commands.add_parser("import", help="validate and add the tasks of seed files")
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="JSONL (or .jsonl.gz), a JSON array, Parquet"
    )
    p.add_argument("--labeled", action="store_true", help="mark the tasks as a labeled set")
    p.add_argument("--types", nargs="+", choices=TASK_TYPES)
    p.add_argument("--rejects", help="write every reject (line, reason, detail) to this JSONL")
    p.add_argument(
        "--limit", type=int, default=0, help="use a random sample of N records of each file"
    )
    p.add_argument("--sample-seed", type=int, default=0, help="seed of the --limit sample")
    _common(p)
    p.set_defaults(handler=import_command)

    p = commands.add_parser("export", help="write the pool as JSONL, Parquet or a datasets folder")
    p.add_argument("--format", required=True, choices=("jsonl", "parquet", "hf"))
    p.add_argument("--out", required=True, help="file (jsonl, parquet) or folder (hf)")
    p.add_argument(
        "--force", action="store_true", help="replace an existing --out (once the export is done)"
    )
    p.add_argument("--type", nargs="+", default=(), dest="types", choices=TASK_TYPES)
    p.add_argument("--origin", nargs="+", default=(), dest="origins", choices=ORIGINS)
    p.add_argument("--min-p", type=float, default=0.0, help="lowest estimated solve rate")
    p.add_argument("--max-p", type=float, default=1.0, help="highest estimated solve rate")
    p.add_argument("--min-answers", type=int, default=0, help="fewest recorded answers")
    p.add_argument("--verified-only", action="store_true", help="only executor-validated tasks")
    p.add_argument("--step", type=int, help="estimate at this step (default: the last)")
    _common(p)
    p.set_defaults(handler=export_command)

    p = commands.add_parser("stats", help="counts, difficulty histogram and growth")
    p.add_argument("--step", type=int, help="estimate at this step (default: the last)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    p.add_argument(
        "--programs",
        action="store_true",
        help="add the proposed programs' statements, loop share and copies up to type over steps "
        "(reads them all)",
    )
    _common(p)
    p.set_defaults(handler=stats_command)

    p = commands.add_parser("rename", help="give a run of the store another name")
    p.add_argument("name", metavar="NEW_NAME", help="the run's new name")
    _common(p)
    p.set_defaults(handler=rename_command)

    p = commands.add_parser("fork", help="start a new run from a run's seeded pool (step 0)")
    p.add_argument("name", metavar="NEW_NAME", help="the new run's name (its curriculum.run)")
    p.add_argument("--out", required=True, help="the new SQLite pool (store/NEW_NAME/pool.sqlite)")
    _common(p)
    p.set_defaults(handler=fork_command)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="SQLite file path or database URL")
    p.add_argument("--run", help="run name (default: the store's only run)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")


def _open(args, create: bool):
    from selfplay.curriculum.store import TaskStore

    cfg = config_module.load(None, args.overrides)
    try:
        return _open_store(TaskStore, cfg, args, create)
    except OperationalError as err:
        raise StoreError(f"cannot open the store {_shown(args.store)}: {err.orig}") from None


def _shown(store: str) -> str:
    """`--store` as it may be printed: a URL's password hidden."""
    from selfplay.curriculum.database import shown

    return shown(store) if "://" in store else store


def _open_store(TaskStore, cfg, args, create: bool):
    from selfplay.curriculum import database

    run = _which_run(args, cfg, create)
    # opening a SQLite file creates it: a store that is only read is refused while missing,
    # not left behind as an empty file beside a typo
    if not create and database.missing_file(database.resolve_url(args.store, run)):
        raise StoreError(f"the store {_shown(args.store)} holds no tasks")
    return cfg, TaskStore.open(args.store, run, cfg.curriculum, create=create)


def _which_run(args, cfg, create: bool) -> str:
    """`--run`, else the store's only run (`curriculum.run` for an empty store being created)."""
    from selfplay.curriculum.reads import run_names

    if args.run is not None:
        return args.run
    runs = run_names(args.store, cfg.curriculum)
    if len(runs) > 1:
        raise StoreError(f"the store holds runs {runs}; choose one with --run")
    if not runs and not create:
        raise StoreError(f"the store {_shown(args.store)} holds no tasks")
    return runs[0] if runs else cfg.curriculum.run


def import_command(args: argparse.Namespace) -> int:
    from selfplay.datasets.contamination import BenchmarkPrograms, import_check
    from selfplay.datasets.importer import import_file
    from selfplay.executor.api import Executor
    from selfplay.mathcheck import MathChecker

    if args.limit < 0:
        raise StoreError("--limit must be 0 (all records) or positive")
    for path in args.files:  # refuse a missing file before importing any
        if not Path(path).is_file():
            raise StoreError(f"no file {path}")
    cfg, store = _open(args, create=True)
    names = cfg.curriculum.decontaminate
    loaded = BenchmarkPrograms.load(names)
    for name, path in loaded.missing.items():
        print(f"no {name} data at {path}: its programs are not checked", file=sys.stderr)
    rejects = open(args.rejects, "w", encoding="utf-8") if args.rejects else None  # noqa: SIM115
    with store, Executor(cfg.executor) as executor, MathChecker(cfg.mathcheck) as checker:
        for path in args.files:
            checked, own = import_check(Path(path), names, loaded)
            if own:
                print(
                    f"{path} is {own} itself: not checked against {own}, whose scores are no "
                    "held-out measurement for a model trained on this pool",
                    file=sys.stderr,
                )
            report = import_file(
                store,
                path,
                executor,
                labeled=args.labeled,
                types=args.types,
                checker=checker,
                limit=args.limit,
                sample_seed=args.sample_seed,
                benchmarks=checked,
            )
            print(json.dumps(report.summary()), flush=True)
            _print_report(report)
            for reject in report.rejects if rejects else ():
                rejects.write(
                    json.dumps({"file": report.file, **dataclasses.asdict(reject)}) + "\n"
                )
    if rejects:
        rejects.close()
    return 0


def _print_report(report) -> None:
    out = sys.stderr
    print(
        f"{report.file} ({report.format}): {report.records} records, {report.candidates} "
        f"candidate tasks, {report.accepted} accepted ({100 * report.acceptance_rate:.1f}%): "
        f"{report.added} added, {report.duplicates} already in the pool"
        + (f" ({report.relabeled} of them labeled now)" if report.relabeled else ""),
        file=out,
    )
    for reason, count in report.reasons().most_common():
        example = next(r for r in report.rejects if r.reason == reason)
        print(
            f"  {count:>6}  {reason:<28} e.g. line {example.line}: {example.detail[:70]}", file=out
        )


def export_command(args: argparse.Namespace) -> int:
    from selfplay.datasets.contamination import BENCHMARK_FILES, BenchmarkPrograms
    from selfplay.datasets.export import ExportFilter, export, refuse_existing

    benchmarks = BenchmarkPrograms.load(BENCHMARK_FILES)
    for name, path in benchmarks.missing.items():
        print(f"no {name} data at {path}: its programs are not checked", file=sys.stderr)
    try:
        flt = ExportFilter(
            tuple(args.types),
            tuple(args.origins),
            args.min_p,
            args.max_p,
            args.min_answers,
            args.verified_only,
            benchmarks,
        )
    except ValueError as err:
        raise StoreError(str(err)) from None
    _refuse_out_onto_store(args)
    refuse_existing(args.out, args.force)  # before the store is read
    _, store = _open(args, create=False)
    with store:
        count = export(store, args.format, args.out, flt, args.step, force=args.force)
    print(f"exported {count} tasks to {args.out}", file=sys.stderr)
    return 0


def _refuse_out_onto_store(args) -> None:
    """An `--out` that is the SQLite store's own file (or its WAL or shared-memory file) would
    be truncated while the store is read from it: refused before either is opened."""
    import os

    from sqlalchemy.engine import make_url

    from selfplay.curriculum import database

    cfg = config_module.load(None, args.overrides)
    url = make_url(database.resolve_url(args.store, args.run or cfg.curriculum.run))
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    db, out = Path(url.database).resolve(), Path(args.out).expanduser().resolve()
    for own in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
        if out == own or (out.exists() and own.exists() and os.path.samefile(out, own)):
            raise StoreError(f"--out {args.out} is the store's own file {own}: choose another")


def stats_command(args: argparse.Namespace) -> int:
    _, store = _open(args, create=False)
    with store:
        stats = store.stats(args.step, programs=args.programs)
    if args.json:
        data = dataclasses.asdict(stats)
        data["by_type_origin"] = {f"{t}/{o}": c for (t, o), c in stats.by_type_origin.items()}
        data["growth"] = [g._asdict() for g in stats.growth]
        print(json.dumps(data))
    else:
        print(stats.table())
    return 0


def rename_command(args: argparse.Namespace) -> int:
    """Rename a run in place: no estimates replayed, no index loaded, whatever the pool's size.
    Meant for a copied pool that no run has open; the runs that write to it go by its id."""
    from selfplay.curriculum import database
    from selfplay.curriculum.writes import rename_run

    if "{run}" in args.store:
        raise StoreError("--store: name the pool itself, not a template with {run}")
    cfg = config_module.load(None, args.overrides)
    try:
        old = _which_run(args, cfg, create=False)
        url = database.resolve_url(args.store, old)
        if database.missing_file(url):
            raise StoreError(f"the store {_shown(args.store)} holds no tasks")
        engine = database.create(url, cfg.curriculum)
        try:
            rename_run(engine, old, args.name)
        finally:
            engine.dispose()
    except OperationalError as err:
        raise StoreError(f"cannot open the store {_shown(args.store)}: {err.orig}") from None
    print(f"run {old!r} is now {args.name!r}", file=sys.stderr)
    return 0


def fork_command(args: argparse.Namespace) -> int:
    """Copy the run's seeded pool (what it held before step 1) to `--out` as the run NEW_NAME,
    with the seeding record (`seeding.json`) beside it so that the new run does not seed again.
    The copy is SQLite's online backup, so the source may be a run that is still going: the
    record is copied first, so that it never counts a round the copied pool lacks. Only step 0
    is forked: a copy of a later step would train from the base model against a pool that the
    step's own answers had shaped (a run's checkpoint goes with its folder: `pool rename`)."""
    import contextlib
    import shutil
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError

    from selfplay.files import SEEDING_FILE

    if any("://" in p or "{run}" in p for p in (args.store, args.out)):
        raise StoreError("fork copies one SQLite file to another: give --store and --out as paths")
    source, out = Path(args.store), Path(args.out)
    if not source.is_file():
        raise StoreError(f"--store {args.store}: no such file")
    made = [out, out.with_name(out.name + "-wal"), out.with_name(out.name + "-shm")]
    if any(p.exists() or p.is_symlink() for p in made):
        raise StoreError(f"--out {args.out} exists; fork writes a new pool")
    seeding, record = source.parent / SEEDING_FILE, out.parent / SEEDING_FILE
    copy_record = seeding.is_file() and seeding.resolve() != record.resolve()
    if copy_record and record.exists():
        raise StoreError(
            f"{record} exists: a fork puts its source's seeding record there; give --out a "
            "folder of its own (the new run's, store/NEW_NAME)"
        )
    cfg = config_module.load(None, args.overrides)
    folder = next((p for p in [out.parent, *out.parent.parents] if p.exists()), None)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if copy_record:
            made.append(record)
            shutil.copyfile(seeding, record)
        old, others, (tasks, attempts), kept = _fork(source, out, args, cfg)
    except BaseException as err:
        for path in made:
            path.unlink(missing_ok=True)
        for empty in [out.parent, *out.parent.parents]:  # the folders it made
            if empty == folder:
                break
            with contextlib.suppress(OSError):
                empty.rmdir()
        if isinstance(err, (sqlite3.Error, SQLAlchemyError)):
            raise StoreError(f"cannot fork {args.store}: {err}") from None
        raise
    print(
        f"run {old!r} at step 0 is run {args.name!r} in {args.out}: {kept} tasks; "
        f"{tasks} tasks and {attempts} attempt records of later steps left out"
        + (f", and the store's {others} other run(s)" if others else "")
        + (f"; {SEEDING_FILE} copied beside it" if copy_record else f"; no {SEEDING_FILE} copied"),
        file=sys.stderr,
    )
    return 0


def _fork(source: Path, out: Path, args, cfg):
    """The copy, its run alone and renamed, rolled back to step 0, compacted."""
    import sqlite3
    from contextlib import closing

    from selfplay.curriculum import database
    from selfplay.curriculum.reads import run_names
    from selfplay.curriculum.replay import keep_only_run
    from selfplay.curriculum.store import TaskStore
    from selfplay.curriculum.writes import rename_run

    # read-write, so that the last connection to close removes the -wal and -shm files it made
    # (a read-only one leaves them beside the source); the backup itself only reads
    reader = sqlite3.connect(source.resolve().as_uri(), uri=True)
    with closing(reader) as src, closing(sqlite3.connect(out)) as dst:
        src.backup(dst)
    # the runs asked of the copy: a pool of an older version is migrated there, not in place
    runs = run_names(str(out), cfg.curriculum)
    if not runs:
        raise StoreError(f"--store {args.store} holds no pool")
    if args.run is None and len(runs) > 1:
        raise StoreError(f"the store holds runs {runs}; choose one with --run")
    old = args.run or runs[0]
    if old not in runs:
        raise StoreError(f"the store has no run named {old!r} (it holds: {', '.join(runs)})")
    engine = database.create(database.resolve_url(str(out), args.name), cfg.curriculum)
    try:
        others = keep_only_run(engine, old)
        if args.name != old:  # the same name: a snapshot of the run's seeded pool
            rename_run(engine, old, args.name)
    finally:
        engine.dispose()
    with TaskStore.open(str(out), args.name, cfg.curriculum, create=False) as store:
        deleted = store.roll_back(0)
        kept = len(store)
    with closing(sqlite3.connect(out)) as db:
        db.execute("VACUUM")  # what the other runs and later steps held: a snapshot is small
    return old, others, deleted, kept
