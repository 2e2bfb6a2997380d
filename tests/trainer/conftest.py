"""The tiny model fine-tuned on the project's formats (see `tests/test_loop.py`), for the
trainer's run tests that need a gradient that is not zero."""

from tests.test_loop import formatted_model_dir  # noqa: F401
