"""Parent context on a real PostgreSQL: a top hit comes back with the
neighbouring chunks of its own section (same document, same heading_path,
reading order, chunker overlap removed), and a chunk alone in its section
(a law article) with none."""
from __future__ import annotations

import hashlib

import pytest

from services.common.records import DocumentRecord
from services.common.retriever import RetrievalQuery
from services.common.text import query_keywords
from services.ingest.chunking import ChunkingConfig, chunk_sections
from services.ingest.files.model import Block, Section
from services.retriever_pg.backend import PgBackend
from tests.retriever_pg.test_store import make_doc, store  # noqa: F401  (fixture)

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

FIRST = [f"第一节第{i}句讲述培训流程的第{i}个步骤。" for i in range(1, 13)]
SECOND = [f"第二节第{i}句讲述考核办法的第{i}条规定。" for i in range(1, 13)]


def _manual() -> DocumentRecord:
    record = chunk_sections("manual", "员工手册", ["员工手册"], [
        Section(["员工手册", "培训"], [Block("".join(FIRST))]),
        Section(["员工手册", "考核"], [Block("".join(SECOND))]),
    ], {}, ChunkingConfig(40, 10))
    record.content_hash = hashlib.sha256(b"manual").hexdigest()
    return record


async def test_top_hit_gets_its_own_sections_neighbours(store):  # noqa: F811
    manual = _manual()
    sections = {tuple(c.heading_path) for c in manual.chunks}
    assert len(sections) == 2 and len(manual.chunks) >= 6
    await store.ingest_documents([manual, make_doc("law", ["第一条 劳动者享有平等就业和选择职业的权利。"])])
    backend = PgBackend(store)
    query = "培训流程的第6个步骤"
    hits, _ = await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5,
                                                    parent_context_tokens=60))
    top = next(h for h in hits if h.channel == "pg.keyword")
    assert "第6个步骤" in top.text
    assert top.text in top.context_text and top.context_text != top.text
    # only the hit's section, in reading order, each sentence once
    assert "考核" not in top.context_text
    got = [s for s in top.context_text.replace("\n", "").split("。") if s]
    first = FIRST.index(got[0] + "。")
    assert [s + "。" for s in got] == FIRST[first:first + len(got)]
    # ... and the store query behind it: the section's chunks around the hit, in ordinal order
    ordinal, chunks = (await store.section_chunks([top.chunk_id], 3))[top.chunk_id]
    same = [c.ordinal for c in manual.chunks if c.heading_path == manual.chunks[ordinal].heading_path]
    assert [c.ordinal for c in chunks] == [o for o in same if abs(o - ordinal) <= 3]

    # not asked: no parent context
    hits, _ = await backend.retrieve(RetrievalQuery(query=query, keywords=query_keywords(query), embedding=[], top_k=5))
    assert not any(h.context_text for h in hits)

    # a law article is alone in its section: no parent context, the chunk is packed as it is
    hits, _ = await backend.retrieve(RetrievalQuery(query="平等就业", keywords=query_keywords("平等就业"), embedding=[],
                                                    top_k=5, parent_context_tokens=512))
    law = [h for h in hits if h.document_id == "law"]
    assert law and not any(h.context_text for h in law)
    assert await store.section_chunks(["no-such-chunk", "\x00bad"], 3) == {}
