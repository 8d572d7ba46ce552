"""The keyword channels over cached postings against the same channels in
SQL, and the cache seeing every write (its own, another replica's, raw
SQL) on the next query. Real PostgreSQL."""
from __future__ import annotations

import random

import pytest
import pytest_asyncio

from services.retriever_pg.store import PgStore
from tests.retriever_pg.test_store import DIM, make_doc

pytestmark = pytest.mark.integration

VOCABULARY = [f"词{i}" for i in range(30)]


def random_docs(seed: int, count: int, collection: str = "default"):
    rng = random.Random(seed)
    docs = []
    for d in range(count):
        texts, terms = [], []
        for _ in range(rng.randint(1, 3)):
            words = [rng.choice(VOCABULARY[:8] if rng.random() < 0.5 else VOCABULARY) for _ in range(rng.randint(1, 9))]
            texts.append("".join(words))
            terms.append(words)
        doc = make_doc(f"{collection}-d{seed}-{d:03d}", texts, terms=terms)
        doc.collection = collection
        docs.append(doc)
    return docs


@pytest_asyncio.fixture(loop_scope="session")
async def stores(pg_dsn: str):
    """(cached, sql, other): a store with the cache, one without, and a
    second cached store standing for another replica; one database."""
    made = [PgStore(pg_dsn, DIM, pool_min=1, pool_max=2, keyword_cache_mb=mb) for mb in (64, 0, 64)]
    for s in made:
        await s.open()
    await made[0].migrate()
    async with made[0]._conn() as conn:  # noqa: SLF001 - test isolation
        await conn.execute("TRUNCATE documents, chunks, chunk_terms")
    try:
        yield made
    finally:
        for s in made:
            await s.close()


def ranked(hits):
    return [(h.chunk_id, round(h.score, 9), h.evidence, h.text, h.collection) for h in hits]


@pytest.mark.asyncio(loop_scope="session")
async def test_cached_channels_give_the_sql_channels_lists(stores):
    cached, sql, _ = stores
    await cached.ingest_documents(random_docs(1, 40) + random_docs(2, 25, "other"))
    for s in stores:
        await s.refresh_stats()
    rng = random.Random(7)
    for _ in range(40):
        terms = rng.sample(VOCABULARY, rng.randint(1, 5)) + (["不在库里"] if rng.random() < 0.2 else [])
        scope = rng.choice([None, ["default"], ["other"], ["default", "other"], ["none"]])
        top_k = rng.choice([1, 3, 10, 50])
        mine = await cached.keyword_channels(terms, top_k, scope, with_embeddings=False)
        theirs = await sql.keyword_channels(terms, top_k, scope, with_embeddings=False)
        assert ranked(mine["pg.keyword"]) == ranked(theirs["pg.keyword"]), (terms, scope, top_k)
        assert ranked(mine["pg.fulltext"]) == ranked(theirs["pg.fulltext"]), (terms, scope, top_k)
        assert ranked(await cached.keyword_search(terms, top_k, scope)) == ranked(mine["pg.keyword"])
        assert ranked(await cached.fulltext_search(terms, top_k, scope)) == ranked(mine["pg.fulltext"])
    assert cached.keyword_cache.hits > 0 and cached.keyword_cache.misses > 0


@pytest.mark.asyncio(loop_scope="session")
async def test_a_replica_sees_another_replicas_ingest_and_delete_on_its_next_query(stores):
    cached, _, replica = stores
    await cached.ingest_documents(random_docs(3, 10))
    before = await replica.keyword_search(["新词"], 10)  # caches the (empty) postings of 新词
    assert before == []
    await cached.ingest_documents([make_doc("fresh", ["新词出现"], terms=[["新词", "出现"]])])
    await replica.refresh_stats()
    assert [h.document_id for h in await replica.keyword_search(["新词"], 10)] == ["fresh"]
    assert [h.document_id for h in await replica.fulltext_search(["新词"], 10)] == ["fresh"]
    await cached.delete_documents(["fresh"], None, ())
    assert await replica.keyword_search(["新词"], 10) == []


@pytest.mark.asyncio(loop_scope="session")
async def test_a_write_in_raw_sql_changes_the_generation(stores):
    cached, _, _ = stores
    await cached.ingest_documents([make_doc("raw", ["旧词"], terms=[["旧词"]])])
    assert [h.document_id for h in await cached.keyword_search(["旧词"], 10)] == ["raw"]
    async with cached._conn(write=True) as conn:  # noqa: SLF001 - a writer outside PgStore
        await conn.execute("UPDATE chunk_terms SET term = '改词' WHERE term = '旧词'")
    assert await cached.keyword_search(["旧词"], 10) == []
    assert [h.document_id for h in await cached.keyword_search(["改词"], 10)] == ["raw"]


@pytest.mark.asyncio(loop_scope="session")
async def test_postings_beyond_the_budget_are_evicted_least_recently_used(stores):
    cached, _, _ = stores
    await cached.ingest_documents(random_docs(4, 30))
    cache = cached.keyword_cache
    budget = cache.budget_bytes
    try:
        await cached.keyword_search(VOCABULARY[:8], 5)
        full = cache.cached_bytes
        assert full > 0
        cache.budget_bytes = full // 2
        await cached.keyword_search(VOCABULARY[8:12], 5)
        assert 0 < cache.cached_bytes <= full // 2
        # The newest terms are kept: asking them again reads nothing.
        misses = cache.misses
        await cached.keyword_search(VOCABULARY[8:12], 5)
        assert cache.misses == misses
    finally:
        cache.budget_bytes = budget


@pytest.mark.asyncio(loop_scope="session")
async def test_filters_by_metadata_are_answered_in_sql(stores):
    from services.common.filters import Condition

    cached, _, _ = stores
    doc = make_doc("tagged", ["标记词"], terms=[["标记词"]])
    doc.metadata = {"source": "tagged"}
    await cached.ingest_documents([doc])
    misses = cached.keyword_cache.misses
    hits = await cached.keyword_search(["标记词"], 5, None, [Condition("source", "eq", ("tagged",))])
    assert [h.document_id for h in hits] == ["tagged"]
    assert cached.keyword_cache.misses == misses  # the cache was not asked
