"""The curriculum: a persistent pool of verified tasks that tracks how hard each one is for the
current solver and draws training batches at the frontier of its ability.

    schema.py      SQLAlchemy ORM tables: runs, tasks, task_references, attempts,
                   task_stats, abilities
    database.py    SQLite (WAL, crash-safe) or PostgreSQL by URL
    migrations.py  schema versions: migrate an older database or refuse with a clear message
    difficulty.py  discounted solve-rate posterior + online Rasch model (the math is there)
    sampler.py     learnability shapes, exploration, recent share, type quotas, seeded draws
    references.py  K diverse frontier tasks per proposer prompt
    store.py       `TaskStore`, the API the training loop uses; records.py: what it takes/gives
    pool.py        the per-task numbers of a run as in-memory numpy columns
    writes.py      its write transactions; reads.py its queries; replay.py rebuilds estimates
    seeds.py       reading CRUXEval, MBPP (mbpp.py), AZR seeds and generic JSONL records
    trajectories.py  each task's solve rate per step over the last steps, from `attempts`
    selection.py   TraPO-style admission of unlabeled tasks by trajectory similarity
    importer.py    importing them, every task re-validated by the executor
    export.py      JSONL, Parquet and `datasets` folders, filtered, with provenance
    stats.py       counts, difficulty histogram and growth, as metrics or tables
    commands.py    `selfplay pool import|export|stats`
"""

__all__ = ["TaskStore", "Provenance", "Outcome", "PoolTask", "Batch", "StoreError"]


def __getattr__(name: str):
    if name in ("TaskStore", "StoreError"):
        from selfplay.curriculum import store

        return getattr(store, name)
    if name in ("Provenance", "Outcome", "PoolTask", "Batch"):
        from selfplay.curriculum import records

        return getattr(records, name)
    raise AttributeError(name)
