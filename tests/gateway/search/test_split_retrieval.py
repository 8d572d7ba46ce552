"""A Retrieve asked in two parts (split_retrieval): each part asks only its
channels, and the merged replies are exactly the candidates one combined
request gives, checked against the retrievers' own grouping of hits
(services.common.convert.hits_to_candidates)."""
from __future__ import annotations

import pytest

from graphmesh.retriever.v1 import retriever_pb2
from services.common import names
from services.common.convert import hits_to_candidates
from services.common.records import Hit
from services.gateway.search.split_retrieval import keyword_part, merge_parts, vector_part
from services.retriever_pg.backend import PgBackend

pytestmark = pytest.mark.unit


def request(**fields) -> retriever_pb2.RetrieveRequest:
    base = dict(query="加班费", keywords=["加班费"], query_embedding=[0.6, 0.8], hyde_embedding=[0.8, 0.6],
                adapted_embedding=[0.0, 1.0], top_k=20,
                disabled_channels=[names.PG_TRIGRAM], collections=["default"])
    return retriever_pb2.RetrieveRequest(**{**base, **fields})


def hit(chunk: str, channel: str, score: float, context: str = "", embedding=()) -> Hit:
    return Hit(chunk_id=chunk, document_id=chunk.split("#")[0], title="法", heading_path=["法", chunk],
               text=f"text of {chunk}", ordinal=0, channel=channel, score=score, context_text=context,
               embedding=list(embedding))


def test_keyword_part_drops_every_vector_and_pg_translated_and_keeps_everything_else():
    part = keyword_part(request())
    assert not part.query_embedding and not part.hyde_embedding and not part.adapted_embedding
    assert list(part.keywords) == ["加班费"] and part.top_k == 20 and list(part.collections) == ["default"]
    # pg.translated would run on its translated words alone without the vector: it runs in the vector part
    assert list(part.disabled_channels) == sorted([names.PG_TRIGRAM, names.PG_TRANSLATED])


def test_vector_part_asks_only_the_vector_channels_and_keeps_those_switched_off():
    part = vector_part(request(disabled_channels=[names.PG_HYDE]), [0.1, 0.2])
    assert list(part.query_embedding) == pytest.approx([0.1, 0.2])
    on = [c for c in names.PG_CHANNELS if c not in part.disabled_channels]
    assert on == [names.PG_VECTOR, names.PG_CENTRED, names.PG_ADAPTED, names.PG_TRANSLATED]
    assert list(part.keywords) == ["加班费"]  # the keyword channels are off by name, not by missing keywords
    # the adapted vector, known only once the embedding is in, comes with it
    assert list(vector_part(request(adapted_embedding=[]), [0.1, 0.2], adapted=[0.3, 0.4]).adapted_embedding) == \
        pytest.approx([0.3, 0.4])


def test_the_parts_leave_the_request_unchanged():
    original = request()
    keyword_part(original)
    vector_part(original, [0.5])
    assert original == request()


def test_merging_the_parts_gives_what_one_combined_reply_gives():
    sources = PgBackend.source_by_channel
    vector_hits = [hit("b#0", names.PG_VECTOR, 0.91, embedding=[1.0, 0.0]), hit("a#0", names.PG_VECTOR, 0.88),
                   hit("c#0", names.PG_HYDE, 0.80)]
    keyword_hits = [hit("a#0", names.PG_KEYWORD, 12.0, context="section of a", embedding=[0.0, 1.0]),
                    hit("d#0", names.PG_KEYWORD, 9.0), hit("a#0", names.PG_FULLTEXT, 2.0),
                    hit("e#0", names.PG_BOOST, 0.5), hit("b#0", names.PG_BOOST, 0.5)]
    combined = hits_to_candidates(vector_hits + keyword_hits, sources)
    merged = merge_parts(hits_to_candidates(vector_hits, sources), hits_to_candidates(keyword_hits, sources))
    assert merged == combined
    a = next(c for c in merged if c.id == "a#0")
    assert [s.channel for s in a.channel_scores] == [names.PG_VECTOR, names.PG_KEYWORD, names.PG_FULLTEXT]
    assert a.context_text == "section of a" and list(a.embedding) == [0.0, 1.0]


def test_merging_does_not_change_its_inputs():
    sources = PgBackend.source_by_channel
    vectors = hits_to_candidates([hit("a#0", names.PG_VECTOR, 0.9)], sources)
    keywords = hits_to_candidates([hit("a#0", names.PG_KEYWORD, 3.0)], sources)
    merge_parts(vectors, keywords)
    assert [s.channel for s in vectors[0].channel_scores] == [names.PG_VECTOR]


def test_merging_with_one_part_empty_is_the_other_part():
    sources = PgBackend.source_by_channel
    keywords = hits_to_candidates([hit("a#0", names.PG_KEYWORD, 3.0), hit("b#0", names.PG_FULLTEXT, 1.0)], sources)
    assert merge_parts([], keywords) == keywords
    assert merge_parts(keywords, []) == keywords
