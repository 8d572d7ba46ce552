import pytest

from services.gateway.chunking import ChunkingConfig, chunk_document, content_hash, split_text


def test_short_text_is_one_chunk():
    assert split_text("第一条 为了保护专利权人的合法权益，制定本法。", ChunkingConfig()) == [
        "第一条 为了保护专利权人的合法权益，制定本法。"
    ]


def test_chunks_end_on_sentence_boundaries_with_overlap():
    sentences = [f"第{i}句话的内容比较长一些。" for i in range(40)]
    pieces = split_text("".join(sentences), ChunkingConfig(target_chars=100, overlap_chars=30))
    assert len(pieces) > 3
    for piece in pieces:
        assert len(piece) <= 100
        assert piece.endswith("。")
    # consecutive chunks share the trailing sentence(s)
    assert pieces[1].startswith(pieces[0][-len(sentences[0]) :][:3]) or pieces[0][-14:] in pieces[1]


def test_long_sentence_is_sliced():
    pieces = split_text("长" * 250, ChunkingConfig(target_chars=100, overlap_chars=0))
    assert [len(p) for p in pieces] == [100, 100, 50]


def test_bad_config_rejected():
    with pytest.raises(ValueError):
        ChunkingConfig(target_chars=10, overlap_chars=10)


def test_chunk_document_ids_headings_terms_and_hash():
    rec = chunk_document("7", "中华人民共和国专利法", ["中华人民共和国专利法", "第一章 总则", "第七条"], "对发明人的专利申请，任何单位或者个人不得压制。", {}, ChunkingConfig())
    assert [c.id for c in rec.chunks] == ["7#0"]
    assert rec.chunks[0].heading_path[-1] == "第七条"
    assert "专利法" in rec.chunks[0].terms  # heading terms are searchable
    same = chunk_document("7", "中华人民共和国专利法", ["中华人民共和国专利法", "第一章 总则", "第七条"], "对发明人的专利申请，任何单位或者个人不得压制。", {}, ChunkingConfig())
    assert rec.content_hash == same.content_hash
    assert content_hash("t", [], "a", {}) != content_hash("t", [], "b", {})
