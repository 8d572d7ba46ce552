"""retriever_pg's extra channels on a real PostgreSQL: hit-count full text,
trigram matching for short queries, and the same-document boost."""
from __future__ import annotations

import numpy as np
import pytest

from graphmesh.common.v1 import types_pb2
from services.common.convert import hits_to_candidates
from services.common.retriever import RetrievalQuery
from services.common.text import query_keywords
from services.retriever_pg.backend import PgBackend, PgChannelConfig
from tests.retriever_pg.test_store import make_doc, store, unit  # noqa: F401  (fixture)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


async def test_fulltext_orders_by_hit_count_then_length(store):  # noqa: F811
    await store.ingest_documents([
        make_doc("a", ["试用期 工资 劳动合同 很长很长很长的一段文字"], terms=[["试用期", "工资", "劳动合同", "很长", "文字", "一段"]]),
        make_doc("b", ["试用期 工资"], terms=[["试用期", "工资"]]),
        make_doc("c", ["试用期"], terms=[["试用期"]]),
    ])
    hits = await store.fulltext_search(["试用期", "工资", "劳动合同"], 10)
    assert [(h.document_id, h.score) for h in hits] == [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    assert hits[0].evidence == " ".join(sorted(["试用期", "工资", "劳动合同"]))
    # equal hit counts: the shorter chunk first
    hits = await store.fulltext_search(["试用期", "工资"], 10)
    assert [h.document_id for h in hits][:2] == ["b", "a"]
    # the cut-off keeps the shorter one too
    assert [h.document_id for h in await store.fulltext_search(["试用期", "工资"], 1)] == ["b"]


async def test_trigram_finds_short_query_as_substring_and_escapes_wildcards(store):  # noqa: F811
    await store.ingest_documents([
        make_doc("t1", ["醉驾的处罚由公安机关决定。"]),
        make_doc("t2", ["100%_完成的任务。"]),
    ])
    hits = await store.trigram_search("醉驾", 5)
    assert hits and hits[0].document_id == "t1" and hits[0].evidence == "substring"
    literal = await store.trigram_search("%_", 5)
    assert [h.document_id for h in literal] == ["t2"]  # '%' and '_' match only themselves


async def test_boost_pulls_same_document_neighbours_when_hits_concentrate(store):  # noqa: F811
    texts = ["第一段讲合同订立。", "第二段讲合同履行。", "第三段讲别的事情。", "第四段讲其他。", "第五段也无关。"]
    await store.ingest_documents([make_doc("long", texts), make_doc("other", ["合同的另一份文件。"])])
    backend = PgBackend(store, PgChannelConfig(boost=True, boost_window=2, boost_limit=10, boost_min_hits=2))
    hits, timings = await backend.retrieve(RetrievalQuery(query="合同订立和履行", keywords=query_keywords("合同订立和履行"), embedding=[], top_k=5))
    boosted = [h for h in hits if h.channel == "pg.boost"]
    assert boosted, [(h.chunk_id, h.channel) for h in hits]
    assert all(h.document_id == "long" for h in boosted)
    assert {h.chunk_id for h in boosted} <= {"long#2", "long#3", "long#4"}
    assert all(h.evidence.startswith("same-document:long#") for h in boosted)
    assert "pg.boost" in {t.stage for t in timings}
    # switched off per request
    hits, _ = await backend.retrieve(RetrievalQuery(query="合同订立和履行", keywords=query_keywords("合同订立和履行"),
                                                    embedding=[], top_k=5, disabled=frozenset({"pg.boost"})))
    assert not [h for h in hits if h.channel == "pg.boost"]


async def test_user_dictionary_term_does_not_match_its_parts_in_keyword_search(store):  # noqa: F811
    import jieba

    from services.common import text

    text.use_user_dictionary(["三级医院"])
    try:
        await store.ingest_documents([
            make_doc("whole", ["本市三级医院应当公开收费标准。"]),
            make_doc("parts", ["二三级公立医院的收费标准另行规定。"]),
        ])
        keywords = text.query_keywords("三级医院")
        assert keywords == ["三级医院"]
        assert [h.document_id for h in await store.keyword_search(keywords, 5)] == ["whole"]
    finally:
        jieba.del_word("三级医院")
        text.use_user_dictionary([])


async def test_a_numbered_name_is_found_by_its_number_not_by_every_chunk_repeating_the_digit(store):  # noqa: F811
    rows = {3: "3号仓库第{r}排货架的最大承重为{w}千克，叉车限速每小时{n}公里，仓库管理员每天巡检并记录货架状况。",
            5: "第5部分 区域5管理 5号仓库第{r}排货架的最大承重为{w}千克。"}
    await store.ingest_documents([
        make_doc(f"w{n}", ["".join(row.format(r=r, w=100 + 10 * r + n, n=n) for r in range(1, 8))]) for n, row in rows.items()])
    backend = PgBackend(store, PgChannelConfig())
    query = "3号仓库第5排货架最大承重是多少？"
    hits, _ = await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5))
    bm25 = [h.document_id for h in hits if h.channel == "pg.keyword"]
    assert bm25[0] == "w3", bm25  # "3号" is one term; the lone digits of the 第5部分 chunk outnumber it otherwise


async def test_translated_channel_also_ranks_the_other_language_chunks_by_cosine_among_themselves(store):  # noqa: F811
    """pg.translated's second list: cosine among the other writing system's chunks alone, fused with the
    translated words by RRF; every hit's score is its cosine to the query, also for a chunk only the words
    found. A Chinese chunk closer to the query than any English one is not in the channel."""
    await store.ingest_documents([
        make_doc("zh", ["公司差旅住宿标准为每晚 500 元。"], embeddings=[unit(1, 0, 0, 0)]),
        make_doc("fee", ["The late fee is 20 yuan a day."], embeddings=[unit(0.6, 0.8, 0, 0)]),
        make_doc("pwd", ["Passwords must be at least 14 characters long."], embeddings=[unit(0.2, 0, 1, 0)]),
    ])
    backend = PgBackend(store)
    query = "逾期一天罚多少钱？"
    words = [("逾期", ["overdue"], []), ("罚", ["penalty"], [])]  # no word the English text holds
    hits, _ = await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=unit(1, 0.1, 0, 0),
                                                    top_k=5, translated_script="latin", translated_words=words))
    translated = [h for h in hits if h.channel == "pg.translated"]
    assert [h.chunk_id for h in translated] == ["fee#0", "pwd#0"]  # by cosine: words found nothing
    assert translated[0].score == pytest.approx(sum(a * b for a, b in zip(unit(1, 0.1, 0, 0), unit(0.6, 0.8, 0, 0))), abs=1e-4)
    assert translated[0].evidence == "cosine"
    # a document chunk: packed under that source's quota (35% of the context), not full text's 10%
    [candidate] = hits_to_candidates(translated[:1], PgBackend.source_by_channel)
    assert candidate.source == types_pb2.SOURCE_DOCUMENT_CHUNK
    words = [("密码", ["password", "passwords"], [])]
    hits, _ = await backend.retrieve(RetrievalQuery(query="密码", keywords=["密码"], embedding=unit(1, 0.1, 0, 0), top_k=5,
                                                    translated_script="latin", translated_words=words))
    pwd = next(h for h in hits if h.channel == "pg.translated" and h.chunk_id == "pwd#0")
    assert pwd.evidence == "translated words and cosine"
    assert pwd.score == pytest.approx(sum(a * b for a, b in zip(unit(1, 0.1, 0, 0), unit(0.2, 0, 1, 0))), abs=1e-4)
    # a chunk only the words find (below the cosine list's top_k) is scored by its cosine read for it
    await store.ingest_documents([make_doc("hours", ["The desk opens at 9 am."], embeddings=[unit(0.5, 0.5, 0, 0)])])
    hits, _ = await backend.retrieve(RetrievalQuery(query="密码", keywords=["密码"], embedding=unit(1, 0.1, 0, 0), top_k=2,
                                                    translated_script="latin", translated_words=words))
    by_words = next(h for h in hits if h.channel == "pg.translated" and h.chunk_id == "pwd#0")
    assert by_words.evidence == "translated words" and by_words.score == pytest.approx(pwd.score, abs=1e-4)
    assert set(await store.cosines(unit(1, 0.1, 0, 0), ["fee#0", "pwd#0", "nope#0"])) == {"fee#0", "pwd#0"}


async def test_translated_channel_finds_the_other_language_documents_by_the_query_words_translated(store):  # noqa: F811
    """pg.translated: BM25 over the translations the expander sends, kept to the documents written in their
    writing system; an English product name that also appears in Chinese text does not bring that text in."""
    await store.ingest_documents([
        make_doc("security", ["Passwords for company accounts must be at least 14 characters long.",
                              "Secrets are stored in Vault and rotated every 90 days."]),
        make_doc("travel", ["公司差旅住宿标准为每晚 500 元，Vault 账号由行政统一开通。"]),
    ])
    backend = PgBackend(store)
    words = [("公司", ["company", "companies"], []), ("账号", ["account", "accounts"], []),
             ("密码", ["password", "passwords"], []), ("vault", ["vault"], [])]
    query = "公司账号的密码最短要多少位？"
    hits, timings = await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[],
                                                          top_k=5, translated_script="latin", translated_words=words))
    translated = [h for h in hits if h.channel == "pg.translated"]
    assert [h.chunk_id for h in translated][:1] == ["security#0"] and {h.script for h in translated} == {"latin"}
    assert "travel#0" not in {h.chunk_id for h in translated}  # Chinese text, though it names Vault
    assert "pg.translated" in {t.stage for t in timings}
    assert await store.collection_scripts(["default"]) == {"latin", "cjk"} and await store.collection_scripts(["nope"]) == set()
    searched = []
    keyword_channels = store.keyword_channels

    async def spy(*args, **kwargs):
        searched.append(args)
        return await keyword_channels(*args, **kwargs)

    store.keyword_channels = spy
    try:
        only_translated = frozenset({"pg.keyword", "pg.fulltext", "pg.trigram", "pg.boost"})
        english_only = make_doc("handbook", ["Annual leave is 15 days."])
        english_only.collection = "english"
        chinese_only = make_doc("规定", ["年假为十五天。"])
        chinese_only.collection = "chinese"
        await store.ingest_documents([english_only, chinese_only])
        # no document of the target system: not run; documents of the target system only (a Chinese question
        # over English documents), or of both: run
        for collections, runs in ((["nope"], 0), (["chinese"], 0), (["english"], 1), (["default"], 2)):
            await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5,
                                                  collections=collections, translated_script="latin",
                                                  translated_words=words, disabled=only_translated))
            assert len(searched) == runs, collections
    finally:
        del store.keyword_channels
    # no translation, or the channel switched off: not run
    for request in (RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5),
                    RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5,
                                   translated_script="latin", translated_words=words,
                                   disabled=frozenset({"pg.translated"}))):
        hits, timings = await backend.retrieve(request)
        assert not [h for h in hits if h.channel == "pg.translated"] and "pg.translated" not in {t.stage for t in timings}


async def test_centred_channel_compares_chunks_of_two_writing_systems_with_each_systems_centroid_removed(store):  # noqa: F811
    """Where the collections hold Chinese and English documents, pg.vector keeps its plain cosines and
    pg.centred scores each system's nearest chunks by cosine with that system's mean chunk vector removed:
    the English chunk a Chinese-leaning query vector is nearest to, among the English ones, comes first."""
    zh = [unit(1, 0, 0.2, 0), unit(0.9, 0.1, 0, 0.3)]
    en = [unit(0, 1, 0.3, 0), unit(0.2, 0.9, 0, 0.2)]
    await store.ingest_documents([
        make_doc("zh0", ["年假为十五天。"], embeddings=[zh[0]]),
        make_doc("zh1", ["病假须提交医院证明。"], embeddings=[zh[1]]),
        make_doc("en0", ["The gym opens at 7 am."], embeddings=[en[0]]),
        make_doc("en1", ["Parking costs 100 yuan a month."], embeddings=[en[1]]),
    ])
    centroids = await store.script_centroids(["default"])
    assert set(centroids) == {"cjk", "latin"}
    assert centroids["cjk"] == pytest.approx((np.asarray(zh[0]) + zh[1]) / 2, abs=1e-5)
    assert centroids["latin"] == pytest.approx((np.asarray(en[0]) + en[1]) / 2, abs=1e-5)
    backend = PgBackend(store)
    query = unit(0.9, 0.3, 0.2, 0)
    hits, timings = await backend.retrieve(RetrievalQuery(query="停车多少钱", keywords=[], embedding=query, top_k=4))
    plain = [h.chunk_id for h in hits if h.channel == "pg.vector"]
    centred = [h for h in hits if h.channel == "pg.centred"]
    assert plain == ["zh0#0", "zh1#0", "en1#0", "en0#0"]
    assert [h.chunk_id for h in centred] == ["en1#0", "zh0#0", "zh1#0", "en0#0"]
    expected = np.asarray(en[1]) - centroids["latin"]
    assert centred[0].score == pytest.approx(float(np.dot(query, expected) / np.linalg.norm(expected)), abs=1e-4)
    assert [h.embedding for h in centred] == [[]] * 4  # asked without embeddings: none sent on
    assert {"pg.vector", "pg.centred"} <= {t.stage for t in timings}
    [candidate] = hits_to_candidates(centred[:1], PgBackend.source_by_channel)
    assert candidate.source == types_pb2.SOURCE_DOCUMENT_CHUNK
    def dense(found):
        return {h.channel for h in found} & {"pg.vector", "pg.centred"}

    # either channel switched off runs alone
    hits, _ = await backend.retrieve(RetrievalQuery(query="停车", keywords=[], embedding=query, top_k=4,
                                                    disabled=frozenset({"pg.centred"})))
    assert dense(hits) == {"pg.vector"}
    hits, _ = await backend.retrieve(RetrievalQuery(query="停车", keywords=[], embedding=query, top_k=4,
                                                    disabled=frozenset({"pg.vector"})))
    assert dense(hits) == {"pg.centred"}
    # a document without letters (no writing system) is still searched, and keeps its plain cosine
    await store.ingest_documents([make_doc("digits", ["2024 - 2025"], embeddings=[unit(0.9, 0.3, 0.2, 0)])])
    hits, _ = await backend.retrieve(RetrievalQuery(query="停车", keywords=[], embedding=query, top_k=5))
    by_channel = {(h.channel, h.chunk_id): h.score for h in hits}
    assert ("pg.vector", "digits#0") in by_channel
    assert by_channel[("pg.centred", "digits#0")] == pytest.approx(1.0, abs=1e-4)  # the query's own vector
    # a collection of one writing system: pg.vector only, as before
    english_only = make_doc("handbook", ["Annual leave is 15 days."], embeddings=[en[0]])
    english_only.collection = "english"
    await store.ingest_documents([english_only])
    hits, _ = await backend.retrieve(RetrievalQuery(query="leave", keywords=[], embedding=query, top_k=4,
                                                    collections=["english"]))
    assert dense(hits) == {"pg.vector"}
    # a new Chinese chunk moves the Chinese centroid at once (a quick read: the same documents rank the same)
    await store.ingest_documents([make_doc("zh2", ["食堂早餐七点开始。"], embeddings=[unit(0, 0, 1, 0)])])
    moved = await store.script_centroids(["default"])
    assert moved["cjk"] == pytest.approx((np.asarray(zh[0]) + zh[1] + unit(0, 0, 1, 0)) / 3, abs=1e-5)
    # a scope whose read was slow keeps its centroids after a write, until a minute has passed
    read_at, _, kept, counts = store._centroids[("default",)]
    store._centroids[("default",)] = (read_at, 5.0, kept, counts)
    await store.ingest_documents([make_doc("zh3", ["图书馆晚上十点关门。"], embeddings=[unit(0, 0, 0, 1)])])
    assert (await store.script_centroids(["default"]))["cjk"] == pytest.approx(moved["cjk"])
    store._centroids[("default",)] = (read_at - 3600, 5.0, kept, counts)  # an hour later
    assert (await store.script_centroids(["default"]))["cjk"] == pytest.approx(
        (np.asarray(zh[0]) + zh[1] + unit(0, 0, 1, 0) + unit(0, 0, 0, 1)) / 4, abs=1e-5)


async def test_the_centroids_are_read_again_when_a_new_writing_system_arrives(store):  # noqa: F811
    """The first English file beside Chinese ones: even centroids kept after writes (a large scope's) lack
    its system, so they are read again at once and pg.centred runs on the next question."""
    await store.ingest_documents([make_doc("zh", ["年假为十五天。", "病假须提交医院证明。"],
                                           embeddings=[unit(1, 0, 0, 0), unit(1, 0.1, 0, 0)])])
    assert set(await store.script_centroids(["default"])) == {"cjk"}
    read_at, _, kept, counts = store._centroids[("default",)]
    store._centroids[("default",)] = (read_at, 5.0, kept, counts)  # as if slow to read: kept after writes, but not this one
    await store.ingest_documents([make_doc("en", ["Parking costs 100 yuan a month.", "The gym opens at 7 am."],
                                           embeddings=[unit(0, 1, 0, 0), unit(0.1, 1, 0, 0)])])
    assert set(await store.script_centroids(["default"])) == {"cjk", "latin"}
    hits, _ = await PgBackend(store).retrieve(RetrievalQuery(query="parking", keywords=[], embedding=unit(1, 1, 0, 0),
                                                             top_k=2))
    assert "pg.centred" in {h.channel for h in hits}
