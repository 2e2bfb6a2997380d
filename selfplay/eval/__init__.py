"""Evaluation on the benchmarks of the field, with the sandboxed executor as the judge."""
