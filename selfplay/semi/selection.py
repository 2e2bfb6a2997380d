"""Reliability selection in the spirit of TraPO: labeled tasks' learning trajectories decide
which unlabeled (self-proposed or seed) tasks the solver may train on.

TraPO (Yang et al., "TraPO: A Semi-Supervised Reinforcement Learning Framework for Boosting
LLM Reasoning") observes that unlabeled samples whose pass-rate trajectory over training
follows that of the labeled samples are the reliable ones, and trains only on those. Here:

* the trajectory of a task is its solve rate in each of the last `trapo_window` steps (the
  pool's `selfplay.curriculum.trajectories`, derived from the recorded attempts); NaN where it
  got no answers;
* the reference is the labeled tasks' pooled solve rate per step (their correct answers over
  their answers in that step): how the model's ability on trusted tasks moves;
* a task's similarity is the Pearson correlation of its trajectory with the reference over
  the steps where both have answers. A task that rises as the model learns correlates
  highly; one that is flat (always or never solved) has no variance and scores 0; one whose
  rate is noise scores near 0; one that falls while the model improves on trusted tasks (a
  wrong label, an answer checked against the wrong output) scores below 0;
* a task with answers in fewer than `trapo_min_points` of those steps is not judged yet and
  stays drawable (it needs draws to get a trajectory); so is every task while the reference
  has fewer points, or does not move (no evidence to judge by);
* a judged task is admitted when its similarity is at least `trapo_threshold` and it is among
  the `trapo_top` share of the judged tasks with the highest similarity. A task not admitted
  gets sampling weight 0; once its answers leave the window it is judged afresh.

Departures from the paper: TraPO matches trajectories of pseudo-labelled (majority-vote)
rewards on unlabeled math questions over epochs; here every answer is checked by the executor,
the trajectories are per step over a sliding window, and the reference is the pooled labeled
rate rather than a set of per-sample labeled trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from selfplay.config import CurriculumConfig
from selfplay.curriculum.trajectories import Trajectories


@dataclass(frozen=True)
class Selection:
    """The judgement of one step on every unlabeled task with answers in the window."""

    step: int
    ids: np.ndarray
    similarity: np.ndarray  # NaN where not judged
    points: np.ndarray  # steps where the task and the reference both have answers
    admitted: np.ndarray
    reasons: tuple[str, ...]  # why each was admitted or not
    reference: np.ndarray  # labeled solve rate in each step of the window

    @property
    def rejected(self) -> np.ndarray:
        return self.ids[~self.admitted]

    def metrics(self) -> dict[str, float]:
        judged = np.isfinite(self.similarity)
        ref = self.reference[np.isfinite(self.reference)]
        m = {
            "curriculum/trapo_tasks": float(len(self.ids)),
            "curriculum/trapo_judged": float(judged.sum()),
            "curriculum/trapo_admitted": float((self.admitted & judged).sum()),
            "curriculum/trapo_rejected": float((~self.admitted).sum()),
            "curriculum/trapo_reference_points": float(len(ref)),
            "curriculum/trapo_reference_change": float(ref[-1] - ref[0]) if len(ref) > 1 else 0.0,
        }
        if judged.any():
            m["curriculum/trapo_mean_similarity"] = float(self.similarity[judged].mean())
            admitted, judged_n = m["curriculum/trapo_admitted"], m["curriculum/trapo_judged"]
            m["curriculum/trapo_admit_rate"] = admitted / judged_n
        return m

    def records(self) -> list[dict]:
        """One plain record per task: what the run's selection log keeps."""
        return [
            {
                "step": self.step,
                "task_id": int(i),
                "admitted": bool(a),
                "reason": r,
                "similarity": None if np.isnan(s) else round(float(s), 4),
                "points": int(p),
            }
            for i, s, p, a, r in zip(
                self.ids, self.similarity, self.points, self.admitted, self.reasons, strict=True
            )
        ]


def reference_trajectory(traj: Trajectories, labeled: np.ndarray) -> np.ndarray:
    """Pooled solve rate of the labeled rows in each step; NaN where they got no answers."""
    answers = traj.answers[labeled].sum(axis=0)
    correct = traj.correct[labeled].sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(answers > 0, correct / answers, np.nan)


def similarity(rates: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Pearson correlation of each row with the reference over the steps both have, points).

    A row without variance scores 0 (it does not move with the reference); NaN where the
    reference has no variance over the row's steps, or where they share under two steps.
    """
    both = np.isfinite(rates) & np.isfinite(reference)[None, :]
    points = both.sum(axis=1)
    x = np.where(both, rates, 0.0)
    y = np.where(both, reference[None, :], 0.0)
    count = np.maximum(points, 1)[:, None]
    dx = np.where(both, x - x.sum(axis=1, keepdims=True) / count, 0.0)
    dy = np.where(both, y - y.sum(axis=1, keepdims=True) / count, 0.0)
    vx, vy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (dx * dy).sum(axis=1) / np.sqrt(vx * vy)
    score = np.where(vx <= 1e-12, 0.0, score)
    score = np.where((vy <= 1e-12) | (points < 2), np.nan, score)
    return score, points


def select(
    config: CurriculumConfig, traj: Trajectories, labeled: np.ndarray, step: int
) -> Selection:
    """Judge the unlabeled rows of `traj` (`labeled` marks the labeled rows)."""
    reference = reference_trajectory(traj, labeled)
    rates = traj.rates[~labeled]
    ids = traj.ids[~labeled]
    score, points = similarity(rates, reference)
    usable_reference = np.isfinite(reference).sum() >= config.trapo_min_points
    judged = usable_reference & (points >= config.trapo_min_points) & np.isfinite(score)
    score = np.where(judged, score, np.nan)
    ranked = np.argsort(-np.where(judged, score, -np.inf), kind="stable")
    keep = int(np.ceil(config.trapo_top * judged.sum()))
    in_top = np.zeros(len(ids), dtype=bool)
    in_top[ranked[:keep]] = True
    passes = judged & (score >= config.trapo_threshold)
    admitted = ~judged | (passes & in_top)
    reasons = []
    for i in range(len(ids)):
        if not usable_reference:
            reasons.append("no_reference")
        elif points[i] < config.trapo_min_points:
            reasons.append("few_points")
        elif not judged[i]:
            reasons.append("reference_flat")
        elif admitted[i]:
            reasons.append("similar")
        elif not passes[i]:
            reasons.append("flat" if score[i] == 0.0 else "dissimilar")
        else:
            reasons.append("beyond_top")
    return Selection(step, ids, score, points, admitted, tuple(reasons), reference)
