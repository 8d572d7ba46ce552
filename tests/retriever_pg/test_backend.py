"""Stored chunk embeddings on a real PostgreSQL (issue 27): every
retriever_pg channel (vector, HyDE, adapted, keyword, full text, trigram, boost)
reads a hit's stored embedding only when the request asks for it
(RetrievalQuery.with_embeddings), and a Retrieve's candidates carry it
only with RetrieveRequest.with_embeddings."""
from __future__ import annotations

import numpy as np
import pytest

from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.retriever import RetrievalQuery, RetrieverServicer
from services.retriever_pg.backend import PgBackend, PgChannelConfig
from services.retriever_pg.store import MIN_CENTROID_CHUNKS
from tests.retriever_pg.test_store import make_doc, store, unit  # noqa: F401  (fixture)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

QUERY = "试用期"  # short (trigram runs) and a keyword of two chunks of one document (boost runs)
TEXTS = ["第一段：试用期不得超过一个月。", "第二段：试用期工资不得低于本单位相同岗位最低档工资。",
         "第三段讲别的事情。", "第四段讲其他。", "第五段也无关。"]
#: Every channel a RetrieveRequest below runs.
CHANNELS = {names.PG_VECTOR, names.PG_HYDE, names.PG_ADAPTED, names.PG_KEYWORD, names.PG_FULLTEXT, names.PG_TRIGRAM,
            names.PG_BOOST}


async def _ingest(store) -> dict[str, list[float]]:  # noqa: F811
    """Stores two documents, every chunk with its own embedding; returns {chunk id: embedding}."""
    vectors = [unit(1 + i, 1, 0.5 * i, 0.2) for i in range(len(TEXTS))]
    other = unit(0, 0, 1, 1)
    await store.ingest_documents([make_doc("long", TEXTS, embeddings=vectors),
                                  make_doc("other", ["工资按月支付。"], embeddings=[other])])
    return {**{f"long#{i}": v for i, v in enumerate(vectors)}, "other#0": other}


def _backend(store) -> PgBackend:  # noqa: F811
    return PgBackend(store, PgChannelConfig(boost=True, boost_window=2, boost_limit=10, boost_min_hits=2))


@pytest.mark.parametrize("with_embeddings", [False, True])
async def test_channels_read_stored_embeddings_only_when_asked(store, with_embeddings):  # noqa: F811
    stored = await _ingest(store)
    hits, _ = await _backend(store).retrieve(RetrievalQuery(
        query=QUERY, keywords=[QUERY], embedding=unit(1, 1, 0, 0.2), hyde_embedding=unit(2, 1, 0.5, 0.2),
        adapted_embedding=unit(0, 0, 1, 1), top_k=10, with_embeddings=with_embeddings))
    assert {h.channel for h in hits} == CHANNELS, [(h.chunk_id, h.channel) for h in hits]
    for h in hits:
        if with_embeddings:
            assert h.embedding == pytest.approx(stored[h.chunk_id], abs=1e-6), (h.channel, h.chunk_id)
        else:
            assert h.embedding == [], (h.channel, h.chunk_id)


async def test_retrieve_candidates_carry_stored_embeddings_only_with_with_embeddings(store):  # noqa: F811
    stored = await _ingest(store)
    servicer = RetrieverServicer(_backend(store), None, 1000)  # Retrieve never touches the entity backend

    async def retrieve(with_embeddings: bool) -> list:
        request = retriever_pb2.RetrieveRequest(
            query=QUERY, keywords=[QUERY], query_embedding=unit(1, 1, 0, 0.2), hyde_embedding=unit(2, 1, 0.5, 0.2),
            adapted_embedding=unit(0, 0, 1, 1), top_k=10, with_embeddings=with_embeddings)
        return list((await servicer.Retrieve(request, None)).candidates)

    plain = await retrieve(False)
    assert {s.channel for c in plain for s in c.channel_scores} == CHANNELS
    assert set(stored) <= {c.id for c in plain}
    assert all(len(c.embedding) == 0 for c in plain), [(c.id, len(c.embedding)) for c in plain]

    full = await retrieve(True)
    assert [c.id for c in full] == [c.id for c in plain]
    for c in full:
        assert list(c.embedding) == pytest.approx(stored[c.id], abs=1e-6), c.id


async def test_a_retrieve_cancelled_at_once_leaves_no_search_unawaited(store):  # noqa: F811
    """A call whose deadline passes as it starts is cancelled before its
    channel tasks run: no store coroutine may be left made and never
    awaited (Python's RuntimeWarning in the service log)."""
    import asyncio
    import gc
    import warnings

    await _ingest(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            task = asyncio.create_task(_backend(store).retrieve(RetrievalQuery(
                query=QUERY, keywords=[QUERY], embedding=unit(1, 1, 0, 0.2), top_k=10)))
            await asyncio.sleep(0)  # the retrieve starts its channel tasks, which have not run yet
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            del task
        await asyncio.sleep(0.05)  # the cancelled channel tasks finish
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_a_retrieve_over_two_writing_systems_sends_their_centroids_with_pg_centred(store):  # noqa: F811
    """Where the collection mixes Chinese and English documents, the reply carries pg.centred scores, the
    centroids they were scored with, and (asked for) each hit's stored embedding; over one system, neither."""
    stored = await _ingest(store)
    english = [unit(0, 1, 1, 0.1 * i) for i in range(MIN_CENTROID_CHUNKS)]
    await store.ingest_documents([make_doc("en", [f"Wages are paid monthly ({i})." for i in range(len(english))],
                                           embeddings=english)])
    servicer = RetrieverServicer(_backend(store), None, 1000)
    request = retriever_pb2.RetrieveRequest(query=QUERY, keywords=[QUERY], query_embedding=unit(1, 1, 0, 0.2),
                                            top_k=20, with_embeddings=True)
    reply = await servicer.Retrieve(request, None)
    centred = {c.id: c for c in reply.candidates if any(s.channel == names.PG_CENTRED for s in c.channel_scores)}
    assert set(centred) == {*stored, *(f"en#{i}" for i in range(len(english)))}
    assert list(centred["en#0"].embedding) == pytest.approx(english[0], abs=1e-6)
    centroids = {c.script: list(c.values) for c in reply.script_centroids}
    assert set(centroids) == {"cjk", "latin"}
    assert centroids["latin"] == pytest.approx(np.mean(english, axis=0).tolist(), abs=1e-6)
    chinese = await store.script_centroids(["default"])
    assert centroids["cjk"] == pytest.approx(chinese["cjk"].tolist(), abs=1e-6)
    request.collections[:] = ["nope"]  # no document there: nothing mixes
    reply = await servicer.Retrieve(request, None)
    assert not reply.script_centroids and not reply.candidates


async def test_a_writing_system_of_too_few_chunks_for_a_centroid_is_not_centred(store):  # noqa: F811
    """A trial's one English note beside Chinese documents: its centroid was itself, so centring made it a zero
    vector (pg.centred 0.0) and Answer quoted a Chinese passage. Now nothing is centred there: pg.vector alone,
    no centroids sent, and the note keeps its place."""
    await _ingest(store)
    await store.ingest_documents([make_doc("en", ["VPN is required when working from home."], embeddings=[unit(1, 1, 0, 0.2)])])
    reply = await RetrieverServicer(_backend(store), None, 1000).Retrieve(retriever_pb2.RetrieveRequest(
        query=QUERY, keywords=[QUERY], query_embedding=unit(1, 1, 0, 0.2), top_k=10, with_embeddings=True), None)
    channels = {s.channel for c in reply.candidates for s in c.channel_scores}
    assert names.PG_VECTOR in channels and names.PG_CENTRED not in channels and not reply.script_centroids
    vector_first = min(reply.candidates, key=lambda c: next((s.rank for s in c.channel_scores if s.channel == names.PG_VECTOR), 99))
    assert vector_first.id == "en#0"
    assert set(await store.script_centroids(["default"])) == {"cjk"}


async def test_pg_adapted_ranks_by_cosine_to_the_adapted_vector_and_is_switched_off_by_name(store):  # noqa: F811
    await _ingest(store)
    backend = _backend(store)
    # the adapted vector points at the other document's chunk, which the query's own vector ranks last
    query = dict(query=QUERY, keywords=[QUERY], embedding=unit(1, 1, 0, 0.2), adapted_embedding=unit(0, 0, 1, 1), top_k=3)
    hits, _ = await backend.retrieve(RetrievalQuery(**query))
    adapted = [h for h in hits if h.channel == names.PG_ADAPTED]
    assert adapted[0].chunk_id == "other#0" and adapted[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.score for h in adapted] == sorted((h.score for h in adapted), reverse=True)
    hits, _ = await backend.retrieve(RetrievalQuery(**query, disabled=frozenset({names.PG_ADAPTED})))
    assert names.PG_ADAPTED not in {h.channel for h in hits}
    with pytest.raises(Exception) as err:  # the same checks as the query embedding, naming its field
        await backend.retrieve(RetrievalQuery(**{**query, "adapted_embedding": [0.5, 0.5]}))
    assert "adapted_embedding" in str(err.value)
