"""Semi-supervised runs: a small labeled set anchors self-play.

labeled.py       labeled sets (`seed.labeled`) checked before the model loads and imported
                 when a run starts; the selection log (`selection.jsonl`)
selection.py     TraPO-style admission of unlabeled tasks by trajectory similarity to the
                 labeled tasks (`selfplay.curriculum.trajectories`); the run hands its `select` to
                 the pool when it opens it, and the pool's sampler applies it
"""

from selfplay.semi.labeled import SelectionLog, import_labeled, labeled_paths

__all__ = ["SelectionLog", "import_labeled", "labeled_paths"]
