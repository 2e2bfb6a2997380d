"""The figures of `selfplay report`: PNG files beside its table, drawn with matplotlib.

A run folder gets, in `RUN/report/`:

- `training.png`: per step, one panel each for the solver's accuracy (in all and per task
  type), the valid rate of proposals per task type, the share of valid proposals that were no
  new work (in all and per kind), the token entropy of the trained samples, the KL divergence
  to the reference model with its coefficient, the mean reward of each role, and the pool's
  size. A panel whose metrics the run did not record (an older run) is left out; a NaN (no
  answer of a type that step, say) is a gap in its line.
- `evaluations.png`: each benchmark subset evaluated in the run at two steps or more, its
  accuracy at every evaluation on all items and on the non-trivial ones, with 95% intervals.
- `pool.png`: the tasks of the pool (`RUN/pool.sqlite`) by estimated solve rate at the run's
  last step, as `selfplay pool stats` counts them, with the frontier band.

`selfplay report --compare BEFORE AFTER` draws `vs-<BEFORE>.png` (in `report/` beside AFTER's
samples): per subset, the accuracy before and after on all items and on the non-trivial ones
with 95% intervals, annotated with the items gained and lost and McNemar's p as the report
computed them.

The intervals are Wilson score intervals (`paired.wilson`) on the report's counts. A figure with
nothing to draw is skipped with a note that says why. Figures are drawn on `Figure` objects and
saved by the Agg canvas, with no pyplot state and no display; this module is imported only by
the report command, so that the other commands do not load matplotlib.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from PIL import Image

from selfplay.eval.paired import wilson
from selfplay.types import NO_NEW_WORK, TASK_TYPES

__all__ = ["run_figures", "compare_figures", "training", "evaluations", "pool", "paired"]

DPI = 100
BEFORE, AFTER = "tab:gray", "tab:blue"
# one colour per task type in every panel, and black for all types together
COLORS = {"all": "black", "deduction": "tab:blue", "abduction": "tab:orange"}
COLORS |= {"induction": "tab:green", "math": "tab:purple"}

# The panels of `training.png`: title, whether the values are shares in [0, 1], and the lines
# as (metric, label); a metric ending in "/*" is one line per task type, labelled by the type.
PANELS = (
    ("solver accuracy", True, (("solve/accuracy", "all"), ("solve/accuracy/*", None))),
    ("valid proposals per task type", True, (("propose/valid_rate/*", None),)),
    (
        "no new work (share of valid proposals)",
        True,
        (
            ("propose/duplicate_share", "all"),
            *((f"propose/{kind}_share", kind) for kind in NO_NEW_WORK),
        ),
    ),
    ("token entropy", False, (("update/entropy", "entropy"),)),
    (
        "KL to the reference and its coefficient",
        False,
        (
            ("update/kl_ref", "KL"),
            ("update/kl_ref_solve", "KL, answers"),
            ("update/kl_ref_propose", "KL, proposals"),
            ("update/kl_steered", "KL steered on"),
            ("update/kl_coef", "coefficient"),
            ("update/kl_coef_propose", "proposer's coefficient (per role)"),
        ),
    ),
    ("mean reward", False, (("reward/propose", "propose"), ("reward/solve", "solve"))),
    ("pool size (tasks)", False, (("curriculum/pool_size", "tasks"),)),
)


def run_figures(folder: Path, result: dict, rows: list[dict], out: Path) -> tuple[list, list]:
    """The figures of a run folder from its report (`report.report`) and its metrics rows,
    written to `out`: (the paths written, a note for each figure skipped)."""
    out.mkdir(parents=True, exist_ok=True)
    written, notes = [], []
    if training(rows, out / "training.png", f"{folder.name}: {result['steps']} steps"):
        written.append(out / "training.png")
    else:
        notes.append("no step metrics: no training figure")
    if evaluations(result["benchmarks"], out / "evaluations.png"):
        written.append(out / "evaluations.png")
    else:
        notes.append("no benchmark evaluated in the run at two steps: no evaluation figure")
    stats, band, note = pool_stats(folder)
    if stats is None:
        notes.append(note)
    else:
        pool(stats, band, out / "pool.png")
        written.append(out / "pool.png")
    return written, notes


def compare_figures(result: dict, out: Path | None = None) -> tuple[list, list]:
    """The figure of a `report.compare` result, written to `out` (default: `report/` beside the
    AFTER samples): (the paths written, a note for each figure skipped)."""
    before, after = Path(result["before"]), Path(result["after"])
    out = out or after.parent / "report"
    name = before.parent.name if before.name == "samples.jsonl" else before.stem
    path = out / f"vs-{name}.png"
    out.mkdir(parents=True, exist_ok=True)
    if paired(result, path):
        return [path], []
    return [], ["no subset was evaluated on both sides: no figure"]


# ---------------------------------------------------------------------------------------------
# a run's figures


def training(rows: list[dict], path: Path, title: str) -> list[str]:
    """The per-step panels (`PANELS`) that have data: their titles, none (and nothing written)
    when no panel has. A step recorded twice (a resumed run replays it) counts as last
    recorded."""
    by_step = {row["step"]: row for row in rows}
    steps = sorted(by_step)
    ordered = [by_step[step] for step in steps]
    panels = []
    for name, share, lines in PANELS:
        drawn = [line for key, label in lines for line in _series(ordered, key, label)]
        if drawn:
            panels.append((name, share, drawn))
    if not panels:
        return []
    columns = min(2, len(panels))
    rows_of_panels = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(5.5 * columns, 2.3 * rows_of_panels + 0.5), layout="constrained")
    axes = list(fig.subplots(rows_of_panels, columns, squeeze=False, sharex=True).flat)
    for ax, (name, share, drawn) in zip(axes, panels):
        for label, values in drawn:
            color = COLORS.get(label)  # a task type's own, else the next in the cycle
            ax.plot(steps, values, "o-", markersize=2.5, linewidth=1.2, label=label, color=color)
        ax.set_title(name, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if share:
            ax.set_ylim(-0.03, 1.03)
        if len(drawn) > 1:  # beside the panel, where it covers no line
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:  # an odd panel count leaves one empty axes
        ax.set_visible(False)
    for ax in axes[len(panels) - columns : len(panels)]:  # the lowest panel of each column
        ax.set_xlabel("step")
        ax.xaxis.set_tick_params(labelbottom=True)
    fig.suptitle(title)
    _save(fig, path)
    return [name for name, _, _ in panels]


def _series(rows: list[dict], key: str, label: str | None) -> list[tuple[str, list[float]]]:
    """(label, value per row) of one metric, or of each task type's metric for "prefix/*";
    a metric no row recorded as a number is left out, a row without it is a NaN (a gap)."""
    if key.endswith("/*"):
        prefix = key[:-1]
        found = {k[len(prefix) :] for row in rows for k in row if k.startswith(prefix)}
        kinds = [t for t in TASK_TYPES if t in found] + sorted(found - set(TASK_TYPES))
        return [s for kind in kinds for s in _series(rows, prefix + kind, kind)]
    values = [_number(row.get(key)) for row in rows]
    return [(label, values)] if any(v == v for v in values) else []


def _number(value) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else math.nan


def evaluations(benchmarks: dict, path: Path) -> list[str]:
    """One panel per benchmark subset that the report followed over the run's evaluations
    (`curve`): accuracy by step on all items and on the non-trivial ones, with 95% intervals.
    The subsets drawn; none (and nothing written) when no subset was evaluated twice."""
    curves = {name: row["curve"] for name, row in benchmarks.items() if row.get("curve")}
    if not curves:
        return []
    columns = min(2, len(curves))
    rows = math.ceil(len(curves) / columns)
    fig = Figure(figsize=(3 + 3.5 * columns, 3.2 * rows), layout="constrained")
    axes = list(fig.subplots(rows, columns, squeeze=False).flat)
    for ax, (name, curve) in zip(axes, curves.items()):
        _accuracy_line(ax, curve, "n", "correct", "all items", "-", 0)
        hard = [p for p in curve if "non_trivial_n" in p]
        # moved right by 1% of the steps' span, so that the two intervals do not hide each other
        shift = 0.01 * (curve[-1]["step"] - curve[0]["step"])
        _accuracy_line(ax, hard, "non_trivial_n", "non_trivial_correct", "non-trivial", "--", shift)
        ax.set_title(name, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step")
        ax.set_ylabel("accuracy")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[len(curves) :]:
        ax.set_visible(False)
    fig.suptitle("held-out accuracy at each evaluation, 95% intervals")
    _save(fig, path)
    return list(curves)


def _accuracy_line(ax, points, n: str, correct: str, label: str, style: str, shift: float) -> None:
    if not points:
        return
    steps = [p["step"] + shift for p in points]
    share = [p[correct] / p[n] if p[n] else math.nan for p in points]
    low, high = zip(*(wilson(p[correct], p[n]) for p in points))
    errors = [[s - lo for s, lo in zip(share, low)], [hi - s for s, hi in zip(share, high)]]
    sizes = sorted({p[n] for p in points})
    label += f" (n {sizes[0]})" if len(sizes) == 1 else f" (n {sizes[0]}-{sizes[-1]})"
    ax.errorbar(steps, share, yerr=errors, fmt="o" + style, capsize=3, markersize=4, label=label)


def pool_stats(folder: Path):
    """(the pool's `PoolStats` at its last step, its frontier band, None), or (None, None, why
    not) when the run folder has no pool that can be read."""
    from selfplay import config as config_module
    from selfplay.config import CurriculumConfig
    from selfplay.curriculum.store import TaskStore

    path = folder / "pool.sqlite"
    if not path.is_file():
        return None, None, f"no pool at {path}: no difficulty histogram"
    config = CurriculumConfig()
    if (folder / "config.yaml").is_file():
        try:
            config = config_module.load(folder / "config.yaml", []).curriculum
        except config_module.ConfigError as err:
            return None, None, f"cannot read {folder / 'config.yaml'} ({err}): no pool figure"
    runs = TaskStore.runs(str(path), config)
    run = config.run if config.run in runs else runs[0] if len(runs) == 1 else None
    if run is None:
        return None, None, f"{path} holds runs {runs}, none of them {config.run!r}: no pool figure"
    with TaskStore.open(str(path), run, config, create=False) as store:
        return store.stats(growth=False), config.band, None


def pool(stats, band: tuple[float, float], path: Path) -> None:
    """The pool's attempted tasks per estimated solve-rate bin, the frontier band shaded, and
    the tasks never attempted as a bar of their own."""
    bins = len(stats.histogram)
    fig = Figure(figsize=(7, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.axvspan(*band, color="tab:green", alpha=0.12, label=f"frontier band {band[0]}-{band[1]}")
    ax.bar(
        [(i + 0.5) / bins for i in range(bins)],
        stats.histogram,
        width=0.9 / bins,
        color=AFTER,
        label="attempted",
    )
    ax.bar([-1.5 / bins], [stats.never_attempted], width=0.9 / bins, color=BEFORE, hatch="//")
    ax.set_xticks([-1.5 / bins, *(i / 5 for i in range(6))])
    ax.set_xticklabels(["never\nattempted", *(f"{i / 5:.1f}" for i in range(6))])
    ax.set_xlabel("estimated solve rate")
    ax.set_ylabel("tasks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    ax.set_title(f"pool of {stats.run!r} at step {stats.step}: {stats.tasks} tasks")
    _save(fig, path)


# ---------------------------------------------------------------------------------------------
# two evaluations, paired


def paired(result: dict, path: Path) -> list[str]:
    """Accuracy before and after per subset, on all items and on the non-trivial ones, with
    95% intervals and the report's gained, lost and McNemar p. The groups drawn ("cruxeval_o
    all", "cruxeval_o non-trivial", ...); none (and nothing written) when no subset was
    paired."""
    groups = []
    for subset, row in result.items():
        if not isinstance(row, dict) or "n" not in row:
            continue  # a subset evaluated on one side only
        groups.append((f"{subset}\nall", row, row.get("problems")))
        if row.get("non_trivial"):
            groups.append((f"{subset}\nnon-trivial", row["non_trivial"], None))
    if not groups:
        return []
    fig = Figure(figsize=(max(5.0, 1.7 * len(groups) + 1.5), 4.2), layout="constrained")
    ax = fig.subplots()
    for x, (_, stats, problems) in enumerate(groups):
        ends = []
        for side, offset, color in ((0, -0.15, BEFORE), (1, 0.15, AFTER)):
            k, n = stats["correct"][side], stats["n"]
            low, high = wilson(k, n)
            share = k / n if n else math.nan
            ax.errorbar(
                x + offset,
                share,
                yerr=[[share - low], [high - share]],
                fmt="o",
                color=color,
                capsize=4,
                label=("before", "after")[side] if x == 0 else None,
            )
            ends.append((x + offset, share, high))
        ax.plot([e[0] for e in ends], [e[1] for e in ends], color="black", alpha=0.3)
        note = f"gained {stats['gained']}, lost {stats['lost']}\np = {stats['p_value']:.2g}"
        if problems:  # several samples per problem: McNemar on samples is too confident
            note += f"\nproblems: p = {problems['p_value']:.2g}"
        ax.annotate(
            note,
            (x, max(e[2] for e in ends)),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{label}\nn {stats['n']}" for label, stats, _ in groups], fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("accuracy")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    names = [_name(Path(result[side])) for side in ("before", "after")]
    ax.set_title(f"{names[0]} -> {names[1]}: gained and lost items, McNemar p", fontsize=10)
    _save(fig, path)
    return [label.replace("\n", " ") for label, _, _ in groups]


def _name(path: Path) -> str:
    """An evaluation's name: its folder for `samples.jsonl`, else the file's stem."""
    return path.parent.name if path.name == "samples.jsonl" else path.stem


def _save(fig: Figure, path: Path) -> None:
    """Save as a PNG with a palette of 256 colours: a chart has few colours (anti-aliased edges
    aside), and the palette makes the file about a third of the size of full colour."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    Image.open(buffer).convert("RGB").quantize(256).save(path, optimize=True)
