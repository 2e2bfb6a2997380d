"""The stage tests' run fixture."""

from tests.stages.scripted import make_run  # noqa: F401
