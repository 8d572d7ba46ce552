"""pg_dump / pg_restore discovery and the DSN handed to them (unit)."""
from __future__ import annotations

import os

import pytest

from services.backup.manifest import BackupError
from services.backup.postgres import find_tools, libpq_target

pytestmark = pytest.mark.unit


def test_the_password_goes_into_the_environment_not_the_arguments():
    uri, env = libpq_target("postgresql://gm:s3cr%40t@db.example:5433/graphmesh?sslmode=require")
    assert uri == "postgresql://gm@db.example:5433/graphmesh?sslmode=require"
    assert env["PGPASSWORD"] == "s3cr@t"
    uri, env = libpq_target("postgresql://gm@/graphmesh?host=/run/pg&password=pw&port=5432")
    assert uri == "postgresql://gm@/graphmesh?host=/run/pg&port=5432" and env["PGPASSWORD"] == "pw"


def test_a_dsn_without_password_keeps_the_callers_pgpassword(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "from-env")
    uri, env = libpq_target("postgresql://postgres@/postgres?host=/tmp/sock&port=5432")
    assert uri == "postgresql://postgres@/postgres?host=/tmp/sock&port=5432" and env["PGPASSWORD"] == "from-env"
    with pytest.raises(BackupError, match="postgresql:// URI"):
        libpq_target("host=db user=gm")


def test_tools_come_from_pg_bin_or_the_bundled_server(tmp_path):
    with pytest.raises(BackupError, match="no executable"):
        find_tools(str(tmp_path))
    for name in ("pg_dump", "pg_restore"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    assert find_tools(str(tmp_path)) == {"pg_dump": tmp_path / "pg_dump", "pg_restore": tmp_path / "pg_restore"}
    bundled = find_tools()
    assert all(p.name == n and os.access(p, os.X_OK) for n, p in bundled.items())
