"""The backup manifest and the decisions made from it (pure)."""
from __future__ import annotations

import pytest

from services.backup.manifest import (
    DATA_FILES,
    FORMAT_VERSION,
    BackupError,
    Manifest,
    StoreSummary,
    documents_fingerprint,
    file_entries,
    refusal,
    store_differences,
    summary_changes,
    verify_files,
    version_problems,
)

pytestmark = pytest.mark.unit
ROWS = [("default", "a", "h1"), ("notes", "b", "h2")]


def manifest(**over) -> Manifest:
    base = dict(created_at="2026-01-01T00:00:00+00:00", graphmesh_version="0.1.0", pg_schema_version=5,
                docgraph_version=2, postgres=StoreSummary({"default": [1, 2]}, "f", {"tables": {"public.documents": 1}}),
                neo4j=StoreSummary({"default": [1, 2]}, "f", {"node_total": 4}),
                consistency={"stores_agree": True, "differences": [], "unchanged_during_backup": True})
    return Manifest(**{**base, **over})


def test_fingerprint_ignores_order_and_sees_every_field():
    assert documents_fingerprint(ROWS) == documents_fingerprint(list(reversed(ROWS)))
    for changed in ([("default", "a", "h9"), ROWS[1]], [("other", "a", "h1"), ROWS[1]], [ROWS[0]]):
        assert documents_fingerprint(changed) != documents_fingerprint(ROWS)


def test_store_differences_name_the_collection_and_the_fingerprint():
    pg = StoreSummary({"default": [2, 5], "notes": [1, 1]}, documents_fingerprint(ROWS))
    assert store_differences(pg, StoreSummary({"default": [2, 5], "notes": [1, 1]}, documents_fingerprint(ROWS))) == []
    out = store_differences(pg, StoreSummary({"default": [2, 5]}, documents_fingerprint(ROWS[:1])))
    assert out[0] == "collection 'notes': PostgreSQL has 1 documents / 1 chunks, Neo4j 0 / 0"
    assert "content hashes differ" in out[1]
    same_counts = store_differences(pg, StoreSummary(pg.collections, documents_fingerprint([ROWS[0], ("notes", "b", "x")])))
    assert same_counts == ["the document ids or content hashes differ between PostgreSQL and Neo4j (same counts)"]


def test_summary_changes_reports_counts_that_moved():
    before = StoreSummary({"default": [1, 1]}, "f", {"node_total": 3, "relationships": {"NEXT": 1}})
    assert summary_changes(before, StoreSummary({"default": [1, 1]}, "f", {"node_total": 3, "relationships": {"NEXT": 1}}),
                           "Neo4j") == []
    after = StoreSummary({"default": [2, 2]}, "g", {"node_total": 5, "relationships": {"NEXT": 1}})
    out = summary_changes(before, after, "Neo4j")
    assert len(out) == 3 and all(line.startswith("Neo4j: ") for line in out)
    assert any("node_total changed from 3 to 5" in line for line in out)


def test_refusal_counts_rows_not_schema():
    assert refusal({}, 0) == ""
    assert refusal({"public.documents": 0, "public.schema_migrations": 5}, 0) == ""  # a migrated, empty database
    reason = refusal({"public.documents": 3, "public.chunks": 7, "public.schema_migrations": 5}, 12)
    assert reason == "PostgreSQL holds data: public.chunks (7 rows), public.documents (3 rows); Neo4j holds 12 nodes"
    assert refusal({}, 1) == "Neo4j holds 1 nodes"


def test_manifest_round_trips_and_rejects_other_formats():
    m = manifest()
    assert Manifest.from_json(m.to_json()) == m
    with pytest.raises(BackupError, match="not JSON"):
        Manifest.from_json("{")
    with pytest.raises(BackupError, match="not a GraphMesh backup"):
        Manifest.from_json('{"format": "other"}')
    with pytest.raises(BackupError, match=f"format version 99 is not supported .*version {FORMAT_VERSION}"):
        Manifest.from_json(m.to_json().replace(f'"format_version": {FORMAT_VERSION}', '"format_version": 99'))
    with pytest.raises(BackupError, match="incomplete"):
        Manifest.from_json('{"format": "graphmesh-backup", "format_version": 1, "postgres": {}, "neo4j": {}}')


def test_verify_files_finds_missing_and_corrupt_files(tmp_path):
    (tmp_path / "neo4j").mkdir()
    for name in DATA_FILES:
        (tmp_path / name).write_bytes(b"data of " + name.encode())
    m = manifest(files=file_entries(tmp_path))
    assert verify_files(tmp_path, m) == []
    (tmp_path / DATA_FILES[1]).write_bytes(b"data of " + DATA_FILES[1].encode()[::-1])  # same size, other bytes
    (tmp_path / DATA_FILES[2]).unlink()
    assert verify_files(tmp_path, m) == [f"{DATA_FILES[1]}: checksum mismatch (corrupt or changed since the backup)",
                                         f"{DATA_FILES[2]}: missing"]
    assert verify_files(tmp_path, manifest(files={}))[0] == f"{DATA_FILES[0]}: not listed in the manifest"


def test_version_problems():
    assert version_problems(manifest(), 5, 2) == ([], [])
    errors, _ = version_problems(manifest(pg_schema_version=6), 5, 2)
    assert errors and "newer than this GraphMesh knows (5)" in errors[0]
    errors, warnings = version_problems(manifest(pg_schema_version=4, docgraph_version=1), 5, 2)
    assert errors == [] and len(warnings) == 2 and "migrates it to 5" in warnings[0] and "relinked" in warnings[1]
