"""The curriculum: a persistent pool of verified tasks that tracks how hard each one is for the
current solver and draws training batches at the frontier of its ability.

    schema.py      SQLAlchemy ORM tables: runs, tasks, task_references, attempts, abilities
    database.py    SQLite (WAL, crash-safe) or PostgreSQL by URL
    migrations.py  schema versions: migrate an older database or refuse with a clear message
    difficulty.py  discounted solve-rate posterior + online Rasch model (the math is there)
    sampler.py     learnability shapes, exploration, recent share, type quotas, seeded draws
    references.py  K diverse frontier tasks per proposer prompt
    store.py       `TaskStore`, the API the training loop uses (writes.py: its transactions)
    seeds.py       import of CRUXEval, AZR seeds and generic JSONL, re-validated
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
