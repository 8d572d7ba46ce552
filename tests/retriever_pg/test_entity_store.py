"""retriever_pg's entity cards on a real PostgreSQL: character-gram BM25 for
misspelt or partial names, the vector channel over name and alias
surfaces, idempotent re-ingestion and per-entity failures."""
from __future__ import annotations

import pytest
import pytest_asyncio

from services.retriever_pg.entity_store import EntityCard, EntityCardStore, surface_grams
from tests.retriever_pg.test_store import DIM, store, unit  # noqa: F401  (fixture)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


@pytest_asyncio.fixture(loop_scope="session")
async def cards(store):  # noqa: F811
    s = EntityCardStore(store.connection, DIM)
    async with store.connection() as conn:
        await conn.execute("TRUNCATE entity_cards CASCADE")
    return s


async def test_surface_grams_are_characters_and_bigrams_without_separators():
    assert surface_grams("Birt—Hogg") == list("birthogg") + ["bi", "ir", "rt", "th", "ho", "og", "gg"]
    assert surface_grams("荔枝核") == ["荔", "枝", "核", "荔枝", "枝核"]


async def test_keyword_channel_finds_partial_and_misordered_names(cards):
    result = await cards.ingest([
        EntityCard("荔枝核", "中药", aliases=["荔仁"]),
        EntityCard("荔枝", "水果"),
        EntityCard("核桃仁", "中药"),
    ])
    assert (result.stored, result.unchanged, result.failures) == (3, 0, [])
    hits = await cards.keyword_search("大荔核", 5)
    assert [h.name for h in hits][0] == "荔枝核"
    assert hits[0].channel == "pg.entity_keyword" and hits[0].score == 1.0
    assert all(0 < h.score <= 1 for h in hits)
    # an alias surface matches and is reported as what matched
    alias_hits = await cards.keyword_search("荔仁", 5)
    assert alias_hits[0].name == "荔枝核" and alias_hits[0].matched == "荔仁"
    assert await cards.keyword_search("完全无关", 5) == []


async def test_vector_channel_scores_an_entity_by_its_closest_surface(cards):
    await cards.ingest([
        # name far from the query, second alias identical to it
        EntityCard("玉蜀黍", aliases=["御米", "苞谷"], surface_embeddings=[unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0)]),
        EntityCard("高粱", surface_embeddings=[unit(0, 0, 0.6, 0.8)]),
        EntityCard("无向量"),  # keyword channel only
    ])
    hits = await cards.vector_search(unit(0, 0, 1, 0), 5)
    assert [h.name for h in hits] == ["玉蜀黍", "高粱"]
    assert hits[0].matched == "苞谷" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(0.6, abs=1e-5)
    assert hits[0].channel == "pg.entity_vector" and hits[0].relation == "direct"
    with pytest.raises(ValueError):
        await cards.vector_search([0.0] * DIM, 5)


async def test_reingest_is_idempotent_and_replaces_changed_cards(cards):
    first = EntityCard("马铃薯", "蔬菜", aliases=["洋芋"])
    assert (await cards.ingest([first])).stored == 1
    again = await cards.ingest([EntityCard("马铃薯", "蔬菜", aliases=["洋芋"])])
    assert (again.stored, again.unchanged) == (0, 1)
    changed = await cards.ingest([EntityCard("马铃薯", "蔬菜", aliases=["土豆"])])
    assert changed.stored == 1
    assert [h.name for h in await cards.keyword_search("土豆", 3)] == ["马铃薯"]
    assert await cards.keyword_search("洋芋", 3) == []  # the old alias's grams are gone
    assert await cards.count() == 1


async def test_bad_cards_are_reported_and_the_rest_stored(cards):
    result = await cards.ingest([
        EntityCard(" "),
        EntityCard("阿司匹林", surface_embeddings=[[1.0, 0.0]]),  # wrong dimension
        EntityCard("布洛芬", definition="含\x00字符"),
        EntityCard("对乙酰氨基酚", surface_embeddings=[unit(1, 1, 0, 0), unit(1, 0, 0, 0)]),  # 2 vectors, 1 surface
        EntityCard("青霉素"),
        EntityCard("青霉素"),
    ])
    assert result.stored == 1
    reasons = {f.index: f.reason for f in result.failures}
    assert sorted(reasons) == [0, 1, 2, 3, 5]
    assert "blank" in reasons[0] and "expected 4" in reasons[1] and "NUL" in reasons[2]
    assert "surfaces" in reasons[3] and "duplicate" in reasons[5]
    assert [h.name for h in await cards.keyword_search("青霉素", 3)] == ["青霉素"]


async def test_hostile_query_text_is_only_a_parameter(cards):
    await cards.ingest([EntityCard("阿莫西林")])
    for text in ["'; DROP TABLE entity_cards; --", "%_\\", "$1::text"]:
        await cards.keyword_search(text, 5)
    assert await cards.count() == 1


async def test_expansions_come_from_entity_names_definitions_and_headings(cards, store):  # noqa: F811
    from services.retriever_pg.expansions import suggest_expansions
    from tests.retriever_pg.test_store import make_doc

    await cards.ingest([
        EntityCard("农民专业合作社联合社", definition="由三个以上合作社出资设立"),
        EntityCard("出资人", definition="向合作社出资的成员"),
        EntityCard("社员大会", definition="合作社的权力机构"),
        EntityCard("无关实体", definition="与查询无关"),
    ])
    doc = make_doc("coop", ["三个以上的农民专业合作社可以出资设立联合社。"], terms=[["合作社", "出资", "联合社"]])
    doc.chunks[0].heading_path = ["中华人民共和国农民专业合作社法", "第七章 联合社的设立", "第五十六条"]
    await store.ingest_documents([doc])
    found = await suggest_expansions(store.connection, ["合作社", "出资", "联合社"])
    by_origin = {(e.origin, e.text, e.matched) for e in found}
    assert ("entity_name", "农民专业合作社联合社", "合作社") in by_origin  # L1: name contains a keyword
    assert ("entity_name", "出资人", "出资") in by_origin
    assert ("entity_description", "社员大会", "合作社") in by_origin    # L2: definition contains one
    assert not any(e.text == "无关实体" for e in found)
    # L3 (fewer than 5 so far): the chapter heading without its ordinal, never the article number
    assert [(e.text, e.matched) for e in found if e.origin == "heading"] == [("联合社的设立", "合作社+出资")]
    assert len({e.text for e in found}) == len(found)
    assert [e.origin for e in found] == sorted((e.origin for e in found), key=["entity_name", "entity_description", "heading"].index)
    assert await suggest_expansions(store.connection, ["合作社"], limit=1) == found[:1]
    # LIKE wildcards in a keyword match only themselves
    assert await suggest_expansions(store.connection, ["%%", "__"]) == []
