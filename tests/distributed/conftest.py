"""The tiny model fine-tuned on the project's formats (see `tests/test_loop.py`), so that a
step's samples carry rewards that differ and a gradient that is not zero."""

from tests.test_loop import formatted_model_dir  # noqa: F401
