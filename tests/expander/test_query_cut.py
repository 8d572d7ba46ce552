"""Long queries in the expander: keywords from the whole text by TF-IDF, the
embedded part chosen by content, and the cut reported by Expand."""
import numpy as np
import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from services.common.errors import InvalidArgument
from services.expander.config import ExpanderSettings
from services.expander.embedding import CachedEmbedder
from services.expander.query_cut import (
    METHOD_CONTENT, METHOD_HEAD, METHOD_WHOLE, char_window, cut_for_embedding, term_weights, weighted_keywords,
)
from services.expander.servicer import ExpanderServicer

pytestmark = pytest.mark.unit

# A case description of about 9,000 characters: a long theft narrative whose
# last sentences alone describe a second offence (firearms).
_FILLER = [
    "经审理查明，被告人张某于2019年3月至5月间，多次窜至某市某区居民小区，趁无人之机采用撬锁方式进入被害人家中，窃取现金及金银首饰。",
    "公安机关接到报案后调取监控录像，经排查锁定被告人，并在其租住处查获部分赃物，经鉴定涉案财物价值人民币二万余元。",
    "被告人到案后如实供述了自己的罪行，被害人的陈述、证人证言、现场勘验笔录、扣押清单及价格鉴定意见书等证据在卷佐证。",
]
_ENDING = "另查明，被告人张某在租住处非法持有以火药为动力发射弹丸的枪支二支、子弹三十发，经鉴定系具有杀伤力的枪支和弹药。"


def long_description(chars: int = 9000) -> str:
    parts, size, i = [], 0, 0
    while size < chars - len(_ENDING):
        parts.append(_FILLER[i % len(_FILLER)])
        size += len(parts[-1])
        i += 1
    return "".join(parts) + _ENDING


def test_keywords_come_from_the_whole_text():
    text = long_description()
    assert len(text) >= 8900 and "枪支" not in text[:8500]
    keywords, found = weighted_keywords(text, 256)
    assert "枪支" in keywords and "弹药" in keywords and found == len(keywords)


def test_keywords_are_bounded_heaviest_first_by_tfidf():
    text = long_description()
    keywords, found = weighted_keywords(text, 30)
    assert len(keywords) == 30 and found > 30
    weights = term_weights(text)
    kept = [weights.get(k, 0.0) for k in keywords]
    assert kept == sorted(kept, reverse=True)
    assert min(kept) >= max(weights.get(k, 0.0) for k in weighted_keywords(text, 256)[0] if k not in keywords)
    # same count: the rarer term (jieba IDF 枪支 9.46 > 合同 6.48) is heavier;
    # sublinear tf: said three times (合同) does not beat said twice (枪支)
    text = "合同成立。合同生效。合同终止。被告人持有枪支。枪支已收缴。"
    assert weighted_keywords(text, 1)[0] == ["枪支"]


def test_short_query_keeps_every_keyword_in_order():
    keywords, found = weighted_keywords("公司股东会的职权有哪些", 64)
    assert keywords[:2] == ["公司", "股东"] and found == len(keywords)
    with pytest.raises(ValueError):
        weighted_keywords("公司", 0)


def test_content_cut_keeps_the_end_and_reports_spans():
    text = long_description()
    cut = cut_for_embedding(text, char_window(300))
    assert cut.method == METHOD_CONTENT and cut.original_chars == len(text)
    assert 0 < cut.embedded_chars == len(cut.text) <= 300
    assert cut.text == "".join(text[a:b] for a, b in cut.spans)
    assert all(0 <= a < b <= len(text) for a, b in cut.spans)
    assert [a for a, _ in cut.spans] == sorted(a for a, _ in cut.spans)
    assert "枪支" in cut.text  # the one sentence with new content words

    head = cut_for_embedding(text, char_window(300), method=METHOD_HEAD)
    assert head.method == METHOD_HEAD and head.spans[0][0] == 0 and "枪支" not in head.text
    assert head.text == text[: head.embedded_chars]


def test_a_query_that_fits_is_embedded_whole():
    cut = cut_for_embedding("醉酒驾驶机动车会受到什么处罚？", char_window(300))
    assert cut.method == METHOD_WHOLE and cut.spans == [(0, cut.original_chars)]


def test_a_single_sentence_longer_than_the_window_is_sliced_to_fit():
    text = "被告人" + "甲乙丙丁" * 400  # no sentence end, no comma
    cut = cut_for_embedding(text, char_window(100))
    assert 0 < cut.embedded_chars <= 100 and cut.text == "".join(text[a:b] for a, b in cut.spans)


class FakeEmbedder:
    """A fixed-vector embedder with a 300-character window."""

    name, dimension = "fake", 4

    def __init__(self):
        self.seen: list[str] = []

    def query_window(self):
        return char_window(300)

    def embed(self, texts, *, query, deadline=None):
        self.seen.extend(texts)
        return np.tile(np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32), (len(texts), 1))


async def test_expand_reports_how_a_long_description_was_cut():
    servicer = ExpanderServicer(ExpanderSettings(embedding={"cache": ""}))
    fake = FakeEmbedder()
    servicer._embedder = CachedEmbedder(fake, None)
    text = long_description()
    response = await servicer.Expand(expander_pb2.ExpandRequest(query=text, embed=True), None)
    cut = response.query_cut
    assert cut.method == types_pb2.QUERY_CUT_METHOD_CONTENT_SENTENCES
    assert cut.original_chars == len(response.normalized_query) and 0 < cut.embedded_chars <= 300
    kept = "".join(response.normalized_query[s.start:s.end] for s in cut.kept_spans)
    assert fake.seen == [kept] and len(kept) == cut.embedded_chars and "枪支" in kept
    assert cut.keywords_found == len(response.keywords) > 30 and "枪支" in response.keywords
    assert len(response.embedding) == 4

    short = await servicer.Expand(expander_pb2.ExpandRequest(query="专利权的期限是多久？", embed=True), None)
    assert short.query_cut.method == types_pb2.QUERY_CUT_METHOD_WHOLE
    assert short.query_cut.embedded_chars == short.query_cut.original_chars == len(short.normalized_query)

    bounded = ExpanderServicer(ExpanderSettings(embedding={"cache": ""}, max_keywords=30))
    few = await bounded.Expand(expander_pb2.ExpandRequest(query=text), None)
    assert len(few.keywords) == 30 and few.query_cut.keywords_found == cut.keywords_found

    no_embedding = await servicer.Expand(expander_pb2.ExpandRequest(query=text), None)
    assert no_embedding.query_cut.embedded_chars == 0 and not no_embedding.query_cut.kept_spans
    assert no_embedding.query_cut.original_chars == len(no_embedding.normalized_query)


async def test_expand_accepts_10000_characters_and_refuses_more():
    settings = ExpanderSettings(embedding={"cache": ""})
    assert settings.max_query_chars == 10_000 and settings.max_entity_query_chars == 2_000
    servicer = ExpanderServicer(settings)
    servicer._embedder = CachedEmbedder(FakeEmbedder(), None)
    text = long_description(10_000)[:10_000]
    response = await servicer.Expand(expander_pb2.ExpandRequest(query=text, embed=True), None)
    assert response.query_cut.original_chars == len(response.normalized_query)
    with pytest.raises(InvalidArgument) as err:
        await servicer.Expand(expander_pb2.ExpandRequest(query=text + "。"), None)
    assert err.value.field == "query"
