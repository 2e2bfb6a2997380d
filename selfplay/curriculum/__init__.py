"""The curriculum: a persistent pool of verified tasks that tracks how hard each one is for the
current solver and draws training batches at the frontier of its ability.

    schema.py      SQLAlchemy ORM tables: runs, tasks, task_references, attempts,
                   task_stats, abilities
    database.py    SQLite (WAL, crash-safe) or PostgreSQL by URL
    migrations.py  schema versions: migrate an older database or refuse with a clear message
    difficulty.py  discounted solve-rate posterior + online Rasch model (the math is there)
    sampler.py     learnability shapes, exploration, recent share, type quotas, seeded draws
    store.py       `TaskStore`, the API the training loop uses, and the only owner of the
                   run's in-memory state: writes, reads, replay, references and stats are
                   functions that take what they need and return values, which it applies
    records.py     what it takes and gives (`Provenance`, `TaskAttempts`, `PoolTask`,
                   `SolverBatch`, ...) and the task origins (`Origin`, `ORIGINS`)
    pool.py        `PoolIndex`: the per-task numbers of a run as in-memory numpy columns
    writes.py      the write transactions, each returning what it wrote
    reads.py       the queries: the index of a run, task rows by id
    replay.py      rebuilds the difficulty state in the database from the attempts
    references.py  K diverse frontier tasks per proposer prompt
    stats.py       counts, difficulty histogram and growth, as metrics or tables
    trajectories.py  each task's solve rate per step over the last steps, from `attempts`
    snapshot.py    a pool opened from a copy, for readers that must not migrate or key it

Reading data sets into the pool and exporting it: `selfplay.datasets`. The semi-supervised
selection of unlabeled tasks by their trajectories (TraPO) is `selfplay.semi`'s: the run hands
it to the store when it opens the pool (`TaskStore.open(selector=...)`), which applies it when
`curriculum.selection=trapo`; the pool imports nothing from `selfplay.semi`.
"""

__all__ = ["TaskStore", "Provenance", "TaskAttempts", "PoolTask", "SolverBatch", "StoreError"]


def __getattr__(name: str):
    if name in ("TaskStore", "StoreError"):
        from selfplay.curriculum import store

        return getattr(store, name)
    if name in ("Provenance", "TaskAttempts", "PoolTask", "SolverBatch"):
        from selfplay.curriculum import records

        return getattr(records, name)
    raise AttributeError(name)
