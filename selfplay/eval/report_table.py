"""`selfplay report` as a table for the terminal: a run's report or a comparison (`report.py`
builds both as one dict, which `--json` prints as it is)."""

from __future__ import annotations

from selfplay.types import NO_NEW_WORK

__all__ = ["render", "unreadable_warning"]


def render(result: dict) -> str:
    """The report (of `report` or `compare`) as a table for the terminal."""
    lines = []
    if "run" in result:
        lines.append(f"run {result['run']}: {result['steps']} steps")
        lines += _render_proposals(result.get("proposals") or {})
        lines += _render_proposal_log(result.get("proposal_log") or {})
        subsets = result["benchmarks"]
    else:
        lines.append(f"before: {result['before']}\nafter:  {result['after']}")
        lines += ["paired across prompt formats"] if result.get("across_formats") else []
        lines += [f"warning: {result['warning']}"] if "warning" in result else []
        lines += unreadable_warning(("before", "after"), result.get("unreadable_lines"))
        subsets = {k: v for k, v in result.items() if isinstance(v, dict)}
    if subsets:
        lines.append(
            f"{'set':<28}{'n':>6}{'before':>8}{'after':>8}{'delta':>8}{'gained':>8}{'lost':>6}"
            f"{'p':>10}"
        )
    elif "run" in result:
        lines.append(
            "held-out evaluations: none in the run's folder (run.eval_every=0, or no step "
            "evaluated yet); evaluate a checkpoint with `selfplay eval`"
        )
    for subset, row in subsets.items():
        if "note" in row:
            lines.append(f"{subset:<28}{row['note']}")
            continue
        steps = f" (steps {row['steps'][0]}->{row['steps'][1]})" if "steps" in row else ""
        lines.append(f"{subset}{steps}")
        if "steps" in row:  # a run's evaluations: the first and the last step's files
            names = [f"step {step}" for step in row["steps"]]
            lines += ["    " + w for w in unreadable_warning(names, row.get("unreadable_lines"))]
        lines.append(_render_stats("all", row))
        if row.get("example_answers"):
            before, after = row["example_answers"]
            lines.append(f"    answers copying the prompt's worked example: {before} -> {after}")
        if row.get("restarts"):
            before, after = row["restarts"]
            lines.append(f"    replies writing the prompt over again: {before} -> {after}")
        if row.get("non_trivial") is not None:
            lines.append(_render_stats("non-trivial", row["non_trivial"]))
            lines.append(_render_changes(row["non_trivial"]))
            if typed := row["non_trivial"].get("wrong_type_answers"):
                gained, lost = row["non_trivial"]["wrong_type_changes"]
                lines.append(
                    f"    answers of a wrong type: {typed[0]} -> {typed[1]} (gained from one "
                    f"{gained}, lost to one {lost})"
                )
        else:
            lines.append(_render_changes(row))
            lines.append("    (the records do not say which items copying solves)")
        if "problems" in row:
            lines += _render_problems(row["problems"])
        if len(row.get("curve", ())) > 2:
            points = ", ".join(
                f"{p['step']}: {p['accuracy']:.3f}"
                + (f" ({p['non_trivial_accuracy']:.3f})" if "non_trivial_accuracy" in p else "")
                for p in row["curve"]
            )
            lines.append(f"    by step, all (non-trivial): {points}")
        if "warning" in row:
            lines.append(f"    warning: {row['warning']}")
    if result.get("figures"):
        lines.append(f"figures: {', '.join(result['figures'])}")
    lines += [f"no figure: {note}" for note in result.get("figures_skipped", ())]
    return "\n".join(lines)


def unreadable_warning(names, counts) -> list[str]:
    """A warning line where lines of the samples files could not be read (`unreadable_lines`,
    one count per file, in the order of `names`): they are left out, and a file cut short
    while it was written would otherwise only show as a smaller n."""
    if not counts or not any(counts):
        return []
    where = ", ".join(
        f"{count} of {name}" for name, count in zip(names, counts, strict=True) if count
    )
    return [f"warning: lines that could not be read are left out ({where}): n counts the rest"]


def _render_problems(problems: dict) -> list[str]:
    """Per problem, on all problems and the non-trivial ones: the sign test on the problems'
    shares of right samples, then the problems with a right sample (pass@n)."""
    lines = []
    signs = {"all": problems, "non_trivial": problems["non_trivial"]}
    for label, s in signs.items():
        if s is not None and s["n"]:
            lines.append(
                f"    per problem (several samples each), {label.replace('_', '-')}: "
                f"{s['improved']} improved, {s['worsened']} worsened of {s['n']}, sign test p "
                f"{s['p_value']:.3g}"
            )
    for label, r in problems["any_right"].items():
        if r is not None and r["n"]:
            n = r["samples"] if isinstance(r["samples"], int) else "n"
            lines.append(
                f"    problems with a right sample (pass@{n}), {label.replace('_', '-')}: "
                f"{r['before']:.3f} -> {r['after']:.3f} of {r['n']}, {r['gained']} gained, "
                f"{r['lost']} lost, p {r['p_value']:.3g}"
            )
    return lines


def _render_proposals(proposals: dict) -> list[str]:
    if not proposals:
        return []
    first, last = proposals["first_steps"], proposals["last_steps"]
    lines = [f"proposals, steps {first[0]}-{first[1]} -> {last[0]}-{last[1]}:"]
    for key, value in proposals.items():
        if isinstance(value, list) and key not in ("first_steps", "last_steps"):
            lines.append(f"  {key:<26}{_num(value[0]):>8} -> {_num(value[1])}")
    lines.append(f"  new tasks in all: {proposals['new_tasks_total']}")
    waste = proposals.get("no_new_work") or {}
    if waste.get("valid"):
        kinds = ", ".join(f"{k} {_num(waste[k])}" for k in NO_NEW_WORK if waste.get(k) is not None)
        lines.append(
            f"  no new work, steps {waste['steps'][0]}-{waste['steps'][1]}: {_num(waste['all'])} "
            f"of {int(waste['valid'])} valid proposals ({kinds})"
        )
    if reasons := waste.get("reasons"):
        lines.append("  by type and reason: " + ", ".join(f"{k} {v}" for k, v in reasons.items()))
    if waste.get("retyped") is not None:
        lines.append(f"  abductions judged as deductions: {waste['retyped']}")
    if waste.get("reinput") is not None:
        lines.append(f"  trivial tasks given another input: {waste['reinput']}")
    return lines


def _render_proposal_log(log: dict) -> list[str]:
    if not log.get("proposals"):
        return []
    kinds = ", ".join(f"{k} {n} ({c} cut)" for k, (n, c) in log["outcomes"].items())
    steps = f" of steps {log['steps'][0]}-{log['steps'][-1]}" if log["steps"] else ""
    lines = [
        f"  proposals{steps} (proposals.jsonl): {log['proposals']}: {kinds} at the token limit"
    ]
    if reasons := log["not_valid_reasons"]:
        lines.append(
            f"  why not valid (the {len(reasons)} commonest): "
            + ", ".join(f"{k} {v}" for k, v in reasons.items())
        )
    if missing := log["steps_not_logged"]:
        lines.append(
            f"  warning: proposals.jsonl does not hold every proposal the metrics count at "
            f"{len(missing)} steps ({missing[0]}-{missing[-1]})"
        )
    if log["unreadable_lines"]:
        lines.append(f"  warning: {log['unreadable_lines']} unreadable lines of proposals.jsonl")
    return lines


def _render_stats(label: str, s: dict) -> str:
    return (
        f"  {label:<26}{s['n']:>6}{s['before']:>8.3f}{s['after']:>8.3f}"
        f"{s['delta']:>+8.3f}{s['gained']:>8}{s['lost']:>6}{s['p_value']:>10.3g}"
    )


def _render_changes(s: dict) -> str:
    def split(counts: dict) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())

    return f"    gained from {split(s['gained_from'])}; lost to {split(s['lost_to'])}"


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
