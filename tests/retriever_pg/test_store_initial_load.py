"""PgStore's initial load: an ingest into a nearly empty store drops the
HNSW index, vector search is exact meanwhile, and the index is built once
no ingest has come for the quiet time (services/retriever_pg/store.py)."""
from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

import services.retriever_pg.store as store_module
from services.retriever_pg.store import PgStore
from tests.retriever_pg.test_store import ARTICLES, DIM, fetchval, make_doc, unit

pytestmark = pytest.mark.integration

QUIET_S = 0.4
VECTORS = {"第十条": unit(1, 0, 0, 0), "第十九条": unit(0, 1, 0, 0), "第四十七条": unit(0, 0, 1, 0)}
DOCS = [make_doc(k, [ARTICLES[k]], embeddings=[v]) for k, v in VECTORS.items()]


async def _fresh_store(dsn: str, quiet_s: float = QUIET_S) -> PgStore:
    s = PgStore(dsn, DIM, pool_min=1, pool_max=2, initial_load_quiet_s=quiet_s)
    await s.open()
    await s.migrate()
    async with s._conn() as conn:  # noqa: SLF001 - test isolation
        await conn.execute("TRUNCATE documents, chunks, chunk_terms")
    await s.refresh_stats()
    return s


@pytest_asyncio.fixture(loop_scope="session")
async def store(pg_dsn: str):
    s = await _fresh_store(pg_dsn)
    try:
        yield s
    finally:
        await s.close()


async def _index_oid(store: PgStore):
    return await fetchval(store, "SELECT to_regclass('chunks_embedding_hnsw_idx')::oid")


async def _wait_for_index(store: PgStore, within_s: float = 10.0):
    deadline = time.monotonic() + within_s
    while (oid := await _index_oid(store)) is None:
        assert time.monotonic() < deadline, "the HNSW index was not built after the load went quiet"
        await asyncio.sleep(0.05)
    return oid


async def _nearest(store: PgStore, vector: list[float], k: int) -> list[str]:
    return [h.document_id for h in await store.vector_search(vector, k)]


async def test_a_first_load_searches_exactly_and_builds_the_index_once_quiet(store):
    assert await _index_oid(store) is not None
    assert (await store.ingest_documents(DOCS[:2])).stored == 2
    assert store.initial_load_open
    assert await _index_oid(store) is None
    assert await _nearest(store, unit(0.1, 1, 0, 0), 1) == ["第十九条"]
    assert (await store.ingest_documents(DOCS[2:])).stored == 1  # within the quiet time: the same load
    assert await _index_oid(store) is None
    await _wait_for_index(store)
    assert not store.initial_load_open
    assert await _nearest(store, unit(0, 0.1, 1, 0), 3) == ["第四十七条", "第十九条", "第十条"]


async def test_an_ingest_into_a_loaded_store_keeps_its_index(store, monkeypatch):
    monkeypatch.setattr(store_module, "_INITIAL_LOAD_MAX_CHUNKS", 2)
    assert (await store.ingest_documents(DOCS[:2])).stored == 2
    built = await _wait_for_index(store)
    assert (await store.ingest_documents(DOCS[2:])).stored == 1  # 2 chunks stored: not a first load
    assert not store.initial_load_open
    assert await _index_oid(store) == built
    assert await _nearest(store, unit(0, 0, 1, 0), 1) == ["第四十七条"]


async def test_a_call_still_running_holds_the_load_open(store, monkeypatch):
    write = store._write  # noqa: SLF001 - a slow store call, from the inside

    async def slow_write(*args, **kwargs):
        await asyncio.sleep(QUIET_S * 3)
        return await write(*args, **kwargs)

    monkeypatch.setattr(store, "_write", slow_write)
    call = asyncio.create_task(store.ingest_documents(DOCS))
    await asyncio.sleep(QUIET_S * 2)
    assert store.initial_load_open and await _index_oid(store) is None
    assert (await call).stored == 3
    assert await _index_oid(store) is None  # the quiet time counts from the call's end
    await _wait_for_index(store)


def test_the_quiet_time_stretches_with_the_pauses_between_calls(pg_dsn):
    s = PgStore(pg_dsn, DIM, initial_load_quiet_s=10)
    assert s._initial_load_quiet_s() == 10  # noqa: SLF001 - pure arithmetic of the rule
    s._longest_pause = 5  # noqa: SLF001 - a slow embedder: calls 5 s apart
    assert s._initial_load_quiet_s() == 15  # noqa: SLF001
    s._longest_pause = 100  # noqa: SLF001
    assert s._initial_load_quiet_s() == store_module._INITIAL_LOAD_QUIET_MAX_S  # noqa: SLF001
    with pytest.raises(ValueError, match="initial_load_quiet_s"):
        PgStore(pg_dsn, DIM, initial_load_quiet_s=-1)


async def test_a_store_closed_during_a_load_gets_its_index_at_the_next_migrate(pg_dsn):
    first = await _fresh_store(pg_dsn)
    try:
        assert (await first.ingest_documents(DOCS)).stored == 3
        assert first.initial_load_open
    finally:
        await first.close()
    await first.open()  # the same store, opened again
    try:
        assert await first.migrate() == [] and await _index_oid(first) is not None
        assert not first.initial_load_open
        assert (await first.ingest_documents(DOCS)).unchanged == 3
        assert first.initial_load_open  # still a small store: a load again, and it ends
        await _wait_for_index(first)
    finally:
        await first.close()
    second = await _fresh_store(pg_dsn, quiet_s=0)
    try:
        assert await _index_oid(second) is not None
    finally:
        await second.close()


async def test_a_quiet_time_of_zero_keeps_the_index_row_by_row(pg_dsn):
    s = await _fresh_store(pg_dsn, quiet_s=0)
    try:
        before = await _index_oid(s)
        assert (await s.ingest_documents(DOCS)).stored == 3
        assert not s.initial_load_open
        assert await _index_oid(s) == before
    finally:
        await s.close()


async def test_the_index_is_built_after_the_deadline_of_the_ingest_that_opened_the_load_has_passed(store):
    from services.common.store_deadline import deadline_scope
    with deadline_scope(0.2):  # the RPC's remaining deadline: spent long before the load goes quiet
        assert (await store.ingest_documents(DOCS)).stored == 3
    assert store.initial_load_open
    await asyncio.sleep(0.3)
    await _wait_for_index(store)
    assert await _nearest(store, unit(0, 0.1, 1, 0), 1) == ["第四十七条"]
