"""create_backup / restore_backup against real PostgreSQL and Neo4j: a
two-collection corpus with library entities is backed up, restored into a
new empty database and an emptied Neo4j (no constraints or indexes left),
and the restored stores give the same counts and the same search results;
the store checker runs on them; disagreeing stores are refused at create."""
from __future__ import annotations

import json

import asyncpg
import pytest

from services.backup.manifest import MANIFEST_FILE, BackupError, Manifest
from services.backup.run import Targets, create_backup, restore_backup
from tests.backup.corpus import fill, neo4j_auth, searches, wipe_neo4j

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


def targets(dsn: str, uri: str) -> Targets:
    user, password = neo4j_auth()
    return Targets(dsn, uri, user, password)


async def test_round_trip_gives_the_same_counts_and_search_results(pg_new_database, neo4j_uri, tmp_path):
    source = await pg_new_database()
    await fill(source, neo4j_uri)
    before = await searches(source, neo4j_uri)
    assert set(before["counts"]["pg"]) == {"default", "notes"} and before["counts"]["kg"]
    assert before["pg.keyword"] and before["pg.keyword.notes"] and before["graph"] and before["graph.notes"]
    assert before["kg"] == ["劳动者", "用人单位"]

    manifest = await create_backup(tmp_path / "b1", targets(source, neo4j_uri))
    written = Manifest.from_json((tmp_path / "b1" / MANIFEST_FILE).read_text())
    assert written.consistency == {"stores_agree": True, "differences": [], "unchanged_during_backup": True}
    assert written.postgres.collections == {k: list(v) for k, v in before["counts"]["pg"].items()}
    assert written.neo4j.counts["nodes"]["Entity"] >= 2 and written.pg_schema_version >= 5
    assert manifest.files == written.files and not (tmp_path / "b1.partial").exists()
    # every document's text is in it: the owner's alone (a trial found postgres.dump 0644 in a 0755 folder)
    assert (tmp_path / "b1").stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "b1").rglob("*") if p.is_file()} == {0o600}

    fresh = await pg_new_database()
    await wipe_neo4j(neo4j_uri)
    report = await restore_backup(tmp_path / "b1", targets(fresh, neo4j_uri))
    assert report.problems == []  # the store checker finds the HNSW index ...
    assert any("held no HNSW index" in w for w in report.warnings)  # ... built by the restore
    after = await searches(fresh, neo4j_uri)
    assert after == before


async def test_disagreeing_stores_are_refused_unless_allowed(pg_new_database, neo4j_uri, tmp_path):
    source = await pg_new_database()
    await fill(source, neo4j_uri)
    conn = await asyncpg.connect(source)
    try:
        await conn.execute("DELETE FROM documents WHERE id = 'note-2'")
    finally:
        await conn.close()
    with pytest.raises(BackupError, match="collection 'notes': PostgreSQL has 3 documents"):
        await create_backup(tmp_path / "b2", targets(source, neo4j_uri))
    assert not (tmp_path / "b2").exists() and not (tmp_path / "b2.partial").exists()

    manifest = await create_backup(tmp_path / "b2", targets(source, neo4j_uri), allow_mismatch=True)
    assert manifest.consistency["stores_agree"] is False
    assert json.loads((tmp_path / "b2" / MANIFEST_FILE).read_text())["consistency"]["differences"]
    fresh = await pg_new_database()
    await wipe_neo4j(neo4j_uri)
    report = await restore_backup(tmp_path / "b2", targets(fresh, neo4j_uri))
    assert any("disagreed" in w for w in report.warnings)
    assert any("neo4j: 1 unexpected documents" in p for p in report.problems), report.problems
