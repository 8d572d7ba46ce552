"""Parent window selection (services.retriever_pg.parent_context): the
hit's section around it, overlaps removed, within a token budget centred on
the hit; nothing for a chunk alone in its section (a law article)."""
from __future__ import annotations

import pytest

from services.ingest.chunking import ChunkingConfig, chunk_document, chunk_sections
from services.ingest.files.model import Block, Section
from services.ingest.sentences import count_tokens, split_sentences
from services.retriever_pg.parent_context import SectionChunk, overlap_prefix, parent_window, section_run

pytestmark = pytest.mark.unit


def _chunks(texts: list[str], start: int = 0) -> list[SectionChunk]:
    return [SectionChunk(start + i, t) for i, t in enumerate(texts)]


def test_overlap_prefix_finds_the_repeated_leading_sentences():
    assert overlap_prefix("甲说了一句。乙又说了一句。", "乙又说了一句。丙最后说。") == len("乙又说了一句。")
    assert overlap_prefix("甲说了一句。", "丙最后说。丁也说。") == 0
    # never the whole following chunk
    assert overlap_prefix("甲说了一句。乙又说了一句。", "乙又说了一句。") == 0


def test_section_run_stops_at_a_gap_and_needs_the_hit():
    chunks = _chunks(["a", "b", "c"]) + [SectionChunk(5, "f")]
    assert [c.ordinal for c in section_run(1, chunks)] == [0, 1, 2]
    assert [c.ordinal for c in section_run(5, chunks)] == [5]
    assert section_run(9, chunks) == []


def test_a_chunk_alone_in_its_section_has_no_parent_context():
    assert parent_window(0, _chunks(["第一条 劳动者享有平等就业的权利。"]), 512) == ""
    assert parent_window(3, [], 512) == ""  # the hit not found


def test_window_is_centred_on_the_hit_and_within_budget():
    # five chunks of one sentence of 10 tokens each, no overlap
    texts = [f"第{n}句讲的是某件事。" for n in "一二三四五"]
    assert all(count_tokens(t) == 10 for t in texts)
    window = parent_window(2, _chunks(texts), 30)
    assert window.split("\n") == texts[1:4]  # one before, the hit, one after
    window = parent_window(2, _chunks(texts), 50)
    assert window.split("\n") == texts
    # at the section's start the budget goes to the following side
    assert parent_window(0, _chunks(texts), 30).split("\n") == texts[:3]
    # a budget the hit alone spends: nothing added, the caller keeps the chunk
    assert parent_window(2, _chunks(texts), 10) == ""
    with pytest.raises(ValueError):
        parent_window(2, _chunks(texts), -1)


def test_window_grows_by_sentences_after_first():
    texts = ["前一句很短。前两句也短。", "命中的块在这里。", "后一句很短。后两句也短。"]
    window = parent_window(1, _chunks(texts), count_tokens("命中的块在这里。后一句很短。"))
    assert window == "命中的块在这里。\n后一句很短。"
    window = parent_window(1, _chunks(texts), count_tokens("前两句也短。命中的块在这里。后一句很短。"))
    assert window == "前两句也短。\n命中的块在这里。\n后一句很短。"


def test_real_chunks_overlap_removed_hit_whole_and_reading_order():
    sentences = [f"这是第{i}个句子，它讲述文档里的第{i}件事情。" for i in range(60)]
    record = chunk_document("d", "文档", ["文档"], "".join(sentences), {}, ChunkingConfig(64, 16))
    chunks = [SectionChunk(c.ordinal, c.text) for c in record.chunks]
    assert len(chunks) > 6
    hit = record.chunks[4]
    window = parent_window(hit.ordinal, chunks, 160)
    assert hit.text in window
    assert count_tokens(window) <= 160
    got = [s for s in split_sentences(window.replace("\n", "")) if s.strip()]
    assert len(got) == len(set(got))  # the chunker's overlap is not repeated
    first = sentences.index(got[0])
    assert got == sentences[first:first + len(got)]  # consecutive, in reading order
    before = first
    after = len(sentences) - (first + len(got))
    hit_first = sentences.index(split_sentences(hit.text)[0])
    hit_last = sentences.index(split_sentences(hit.text)[-1])
    assert abs((hit_first - first) - ((first + len(got) - 1) - hit_last)) <= 1  # centred
    assert before > 0 and after > 0


def test_only_the_hit_section_counts_when_chunks_of_two_sections_are_given():
    record = chunk_sections("d", "文档", ["文档"], [
        Section(["文档", "第一节"], [Block("第一节的第一句话。第一节的第二句话。")]),
        Section(["文档", "第二节"], [Block("第二节的第一句话。第二节的第二句话。")]),
    ], {}, ChunkingConfig(10, 0))
    by_path: dict[tuple, list[SectionChunk]] = {}
    for c in record.chunks:
        by_path.setdefault(tuple(c.heading_path), []).append(SectionChunk(c.ordinal, c.text))
    first = by_path[("文档", "第一节")]
    assert parent_window(first[0].ordinal, first, 512) == "第一节的第一句话。\n第一节的第二句话。"


def test_gateway_asks_for_parent_context_by_setting_or_per_request():
    from services.common import names
    from services.gateway.config import GatewaySettings
    from services.gateway.search.pipeline import SearchFlow

    def tokens(settings: GatewaySettings, disabled=(), enabled=()) -> int:
        return SearchFlow(settings, None, [], None, None)._parent_tokens(frozenset(disabled), frozenset(enabled))

    off, on = GatewaySettings(), GatewaySettings(parent_context={"enabled": True, "tokens": 384})
    assert names.STAGE_PARENT_CONTEXT in names.SWITCHABLE_STAGES
    assert tokens(off) == 0
    assert tokens(off, enabled=["parent_context"]) == 512
    assert tokens(on) == 384
    assert tokens(on, disabled=["parent_context"]) == 0
    assert tokens(off, disabled=["parent_context"], enabled=["parent_context"]) == 0  # in both lists: off
