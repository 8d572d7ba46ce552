"""What one law article tells the document graph (domains.law_zh.facts),
on real articles of /work/shared/data/law-zh/corpus.jsonl.gz and their
statuses there."""
from __future__ import annotations

import pytest

from domains.law_zh.facts import document_facts, is_current
from services.ingest.chunking import ChunkingConfig, chunk_document

pytestmark = pytest.mark.unit

# 刑法 第六十七条 (id 4777): the corpus's one Criminal Law, status 已被修改.
SURRENDER = "犯罪以后自动投案，如实供述自己的罪行的，是自首。对于自首的犯罪分子，可以从轻或者减轻处罚。"


def article(status: str):
    path = ["中华人民共和国刑法", "第四章 刑罚的具体运用", "第六十七条"]
    return chunk_document("4777", path[0], path, SURRENDER, {"status": status}, ChunkingConfig(512, 64))


@pytest.mark.parametrize("status", ["现行有效", "已被修改", "", "current"])
def test_a_law_in_force_or_amended_since_is_current(status):
    assert is_current(status)
    assert document_facts(article(status)).current


@pytest.mark.parametrize("status", ["已废止", "历史版本", "尚未生效"])
def test_a_repealed_historical_or_pending_version_is_not_current(status):
    assert not is_current(status)
    assert not document_facts(article(status)).current
