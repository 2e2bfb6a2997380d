"""The pool fixtures (a database on each back-end, the data sets) for these tests."""

from tests.pool_fixtures import config, data, store_url  # noqa: F401
