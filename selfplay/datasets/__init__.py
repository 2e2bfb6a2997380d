"""Data sets in and out of the task pool: reading external data and labeled sets, importing
them (every task re-validated by the executor), and exporting the verified pool.

    candidates.py  what a record becomes: a task to validate, a math problem or a reject
    seeds.py       reading CRUXEval, AZR seeds, GSM8K, MATH-500 and generic JSONL records
    mbpp.py        MBPP: each test assert becomes a deduction and an abduction task
    importer.py    importing candidates into a pool, with a report of every reject
    export.py      JSONL, Parquet and `datasets` folders, filtered, with provenance
    commands.py    `selfplay pool import|export|stats`

Where the external data sets live (`$SELFPLAY_DATA`) and JSONL reading: `selfplay.files`.
"""
