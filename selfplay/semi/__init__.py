"""Semi-supervised runs: a small labeled set anchors self-play.

labeled.py       labeled sets (`seed.labeled`) checked before the model loads and imported
                 when a run starts; the selection log (`selection.jsonl`)
trajectories.py  each task's solve rate per step over the last steps, from `attempts`
selection.py     TraPO-style admission of unlabeled tasks by trajectory similarity to the
                 labeled tasks (the curriculum's sampler applies it)
"""

from selfplay.semi.labeled import SelectionLog, import_labeled, labeled_paths

__all__ = ["SelectionLog", "import_labeled", "labeled_paths"]
