"""Fixtures of the task pool tests (curriculum, datasets, semi): a fresh database on each
back-end, the data sets. Each of those folders' conftest.py takes them from here.

SQLite always runs. PostgreSQL runs when SELFPLAY_TEST_POSTGRES_URL names a server (an admin
URL; each test gets its own new database there), e.g. from `scripts/test_postgres.sh start`;
without it those tests skip, and with SELFPLAY_REQUIRE_POSTGRES=1 (as CI sets) they fail.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from selfplay.config import CurriculumConfig
from selfplay.files import data_root


def _admin_url() -> str | None:
    url = os.environ.get("SELFPLAY_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SELFPLAY_REQUIRE_POSTGRES") == "1":
            pytest.fail("SELFPLAY_REQUIRE_POSTGRES=1 but SELFPLAY_TEST_POSTGRES_URL is not set")
        return None
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A URL (or SQLite path) of an empty database, on each back-end."""
    if request.param == "sqlite":
        yield str(tmp_path / "pool.sqlite")
        return
    admin = _admin_url()
    if admin is None:
        pytest.skip("no PostgreSQL server: set SELFPLAY_TEST_POSTGRES_URL")
    name = f"selfplay_test_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    url = sa.engine.make_url(admin).set(database=name)
    yield url.render_as_string(hide_password=False)
    with engine.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    engine.dispose()


@pytest.fixture
def config() -> CurriculumConfig:
    return CurriculumConfig()


@pytest.fixture
def data() -> Path:
    root = data_root()  # $SELFPLAY_DATA, else shared/data beside the repository
    if not (root / "azr_seed").is_dir() or not (root / "cruxeval").is_dir():
        message = f"external data sets not found at {root} (set SELFPLAY_DATA)"
        if os.environ.get("SELFPLAY_REQUIRE_DATA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return root
