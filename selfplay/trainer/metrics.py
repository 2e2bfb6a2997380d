"""Metrics of a run: a JSONL file in the run folder, TensorBoard, and W&B when asked.

Names are namespaced by stage (`propose/valid_rate/deduction`, `solve/accuracy/abduction`,
`curriculum/frontier_share`, `timing_s/verify`, ...). Every step appends one JSON line
`{"step": ..., "time": ..., <metrics>}` to `metrics.jsonl`. When a run resumes from the
checkpoint of step S, lines of later (lost) steps are dropped from the file and TensorBoard is
told to purge its events after S, so that each step appears once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from selfplay.files import keep_steps

__all__ = ["MetricsLogger", "ProposalLog", "SampleLog", "read_metrics"]


class MetricsLogger:
    def __init__(
        self,
        run_dir: Path,
        resume_step: int = 0,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        wandb_config: dict | None = None,
    ):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_after(resume_step)
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(
                str(Path(run_dir) / "tensorboard"), purge_step=resume_step + 1
            )
        self.wandb = None
        if wandb_project:
            import wandb

            self.wandb = wandb.init(
                project=wandb_project,
                dir=str(run_dir),
                config=wandb_config,
                id=Path(run_dir).name,
                resume="allow",
            )

    def _truncate_after(self, step: int) -> None:
        keep_steps(self.path, step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
        if self.writer is not None:
            for name, value in clean.items():
                self.writer.add_scalar(name, value, step)
            self.writer.flush()
        if self.wandb is not None:
            self.wandb.log(clean, step=step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()


class _StepLog:
    """A JSON line per record of each step in the run folder's `file`, decoded with the
    run's tokenizer; the lines of steps after `resume_step` (lost to an interruption) are
    dropped when a run resumes, as the metrics' are."""

    file = ""

    def __init__(self, run_dir: Path, tokenizer, resume_step: int = 0):
        self.path = Path(run_dir) / self.file
        self.tokenizer = tokenizer
        keep_steps(self.path, resume_step)

    def write(self, step: int, items) -> None:
        lines = [json.dumps(self._record(step, x)) for x in items]
        with self.path.open("a") as f:
            f.write("".join(line + "\n" for line in lines))

    def _record(self, step: int, item) -> dict:
        raise NotImplementedError


class SampleLog(_StepLog):
    """Every rollout of every step in `samples.jsonl` of the run folder, a JSON line each:
    `step`, `role`, `type` (task type), `group` (the prompt it was sampled from), `tokens`,
    `reward`, `advantage` and the completion's `text`, so that what the model wrote, and what
    it was rewarded for, can be read back (`run.log_samples`); a solver rollout whose prompt
    showed worked examples (`roles.worked_examples`) also has their answers as `shown`, and
    every solver rollout its prompt's `layout` (`roles.solver_layouts`). Like
    the metrics, lines of steps lost to an interruption are dropped when the run resumes."""

    file = "samples.jsonl"

    def _record(self, step: int, r) -> dict:
        record = {
            "step": step,
            "role": r.role,
            "type": r.task_type,
            "group": r.group,
            "tokens": len(r.completion_ids),
            "reward": r.reward,
            "advantage": round(r.advantage, 6),
            "text": self.tokenizer.decode(r.completion_ids, skip_special_tokens=True),
        }
        if r.shown:
            record["shown"] = list(r.shown)
        if r.layout:
            record["layout"] = r.layout
        return record


class ProposalLog(_StepLog):
    """Every proposal of every step (not the seeding's) in `proposals.jsonl` of the run folder,
    trained on or not (a run that trains the solver alone has no proposer lines in
    `samples.jsonl`), with what became of it: `step`, `type`, `group`, `tokens`, `cut`
    (stopped at the token limit), the completion's `text`, `outcome` (`malformed`, `invalid`,
    `valid`), `reason` (`Stored.failure`: `malformed:<why>`, the first failed run's reason or
    `induction_pairs`; "" for a valid one), `no_new_work` (`Stored`: why a valid proposal is
    no new work, "" for new work), `added` (a task new to the pool), `task_id`, `reinput` (the
    task took another input) and `references` (the pool ids its prompt showed); a valid one
    also its `task` (`type`, `program`, `inputs`, `outputs`, `message`, `n_visible`) as the
    store stage judged it: retyped or given another input where it was. Written with
    `samples.jsonl` (`run.log_samples`), and trimmed the same way when a run resumes."""

    file = "proposals.jsonl"

    def _record(self, step: int, s) -> dict:
        proposed = s.validated.proposed
        record = {
            "step": step,
            "type": proposed.task_type,
            "group": proposed.group,
            "tokens": len(proposed.completion_ids),
            "cut": proposed.finish_reason == "length",
            "text": self.tokenizer.decode(proposed.completion_ids, skip_special_tokens=True),
            "outcome": s.outcome,
            "reason": s.failure,
            "no_new_work": s.no_new_work,
            "added": s.added,
            "task_id": s.task_id,
            "reinput": s.validated.reinput,
            "references": list(proposed.references),
        }
        task = s.validated.task
        if task is not None:
            fields = ("type", "program", "inputs", "outputs", "message", "n_visible")
            record["task"] = {k: getattr(task, k) for k in fields}
        return record


def read_metrics(run_dir: Path) -> list[dict]:
    """The metrics lines of a run, in order."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
