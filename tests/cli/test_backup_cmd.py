"""``graphmesh backup create|restore`` through the command, on real
PostgreSQL and Neo4j named by the retrievers' settings: a restore into
stores that hold data is refused without --force and changes nothing; with
--force it replaces them and the store check passes."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest

from services.cli.main import main
from tests.backup.corpus import fill, neo4j_auth, searches

pytestmark = [pytest.mark.integration]
ASYNC = pytest.mark.asyncio(loop_scope="session")


def use_stores(monkeypatch, tmp_path, dsn: str, uri: str) -> None:
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", dsn)
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", uri)
    user, password = neo4j_auth()
    for name, value in (("USER", user), ("PASSWORD", password)):
        if value:
            monkeypatch.setenv(f"GRAPHMESH_RETRIEVER_GRAPH_NEO4J__{name}", value)


@ASYNC
async def test_restore_into_stores_with_data_needs_force(pg_new_database, neo4j_uri, tmp_path, monkeypatch, capsys):
    source = await pg_new_database()
    await fill(source, neo4j_uri)
    before = await searches(source, neo4j_uri)
    use_stores(monkeypatch, tmp_path, source, neo4j_uri)
    backup = str(tmp_path / "backup")
    assert await asyncio.to_thread(main, ["backup", "create", backup]) == 0
    assert "backup written to" in capsys.readouterr().out

    assert await asyncio.to_thread(main, ["backup", "restore", backup]) == 2
    err = capsys.readouterr().err
    assert "the target stores are not empty (PostgreSQL holds data: public.chunk_terms" in err
    assert "Neo4j holds" in err and "pass --force" in err
    assert await searches(source, neo4j_uri) == before

    fresh = await pg_new_database()  # PostgreSQL empty, Neo4j not: refused before anything is written
    use_stores(monkeypatch, tmp_path, fresh, neo4j_uri)
    assert await asyncio.to_thread(main, ["backup", "restore", backup]) == 2
    assert "Neo4j holds" in capsys.readouterr().err
    conn = await asyncpg.connect(fresh)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
    finally:
        await conn.close()

    conn = await asyncpg.connect(source)
    try:
        await conn.execute("DELETE FROM documents WHERE collection = 'notes'")  # changed since the backup
    finally:
        await conn.close()
    use_stores(monkeypatch, tmp_path, source, neo4j_uri)
    assert await asyncio.to_thread(main, ["backup", "restore", backup, "--force"]) == 0
    out = capsys.readouterr().out
    assert "counts match the manifest, store check passed" in out
    assert "graphmesh down && graphmesh up" in out  # a trial's running retrievers failed on the recreated vector type
    assert await searches(source, neo4j_uri) == before


@ASYNC
async def test_create_refuses_a_folder_that_is_not_empty(pg_new_database, neo4j_uri, tmp_path, monkeypatch, capsys):
    use_stores(monkeypatch, tmp_path, await pg_new_database(), neo4j_uri)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    assert await asyncio.to_thread(main, ["backup", "create", str(tmp_path / "taken")]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["backup", "restore", str(tmp_path / "taken")]) == 2
    assert "holds no manifest.json" in capsys.readouterr().err


def test_a_stack_on_moved_ports_is_backed_up_on_its_own_bolt_port(tmp_path, monkeypatch):
    """A trial's backup of a stack on moved ports connected to 7687, another stack's Neo4j."""
    from services.cli import stack
    from services.cli.backup_cmd import targets_from_settings

    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://127.0.0.1:1/x")
    for name in ("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", "GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", "GRAPHMESH_NEO4J_BOLT_PORT",
                 "GRAPHMESH_RETRIEVER_GRAPH_NEO4J__USER", "GRAPHMESH_RETRIEVER_GRAPH_NEO4J__PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    (stack.state_dir() / "secrets").mkdir(parents=True)
    (stack.state_dir() / "secrets" / "neo4j-password").write_text("s3cret\n")
    assert targets_from_settings().neo4j_uri == "bolt://127.0.0.1:7687"
    stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:53051", "GRAPHMESH_NEO4J_BOLT_PORT": "10687"})
    stack.use_stack_addresses()  # what every command but up and down does first
    targets = targets_from_settings()
    assert (targets.neo4j_uri, targets.auth) == ("bolt://127.0.0.1:10687", ("neo4j", "s3cret"))


def test_stores_that_cannot_be_reached_are_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://u@127.0.0.1:9/x")  # nothing listens there
    assert main(["backup", "create", str(tmp_path / "backup")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "is the stack up?" in err and "Traceback" not in err and len(err.splitlines()) == 1
