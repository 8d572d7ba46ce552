import pytest

from services.ingest.chunking import ChunkingConfig, chunk_document, chunk_sections, content_hash, split_text
from services.ingest.files.model import Block, Section
from services.ingest.sentences import count_tokens, cut_tokens, pack, split_sentences

pytestmark = pytest.mark.unit


def test_tokens_are_cjk_characters_latin_words_and_symbols():
    # 5 Han characters, "GraphMesh", "2024", "RAG", then "，" and "！"; spaces count nothing
    assert count_tokens("检索增强，GraphMesh 2024 的 RAG！") == 5 + 3 + 2
    assert count_tokens("。！？ ,.") == 5
    assert count_tokens("かな한국") == 4


def test_a_diagram_line_counts_its_symbols():
    # Box-drawing and code symbols are tokens to a subword embedder too: a
    # chunk of ASCII art counted by its words alone overran the embedder's
    # 512 positions (docs/benchmarks.md "Chunks of diagrams and code").
    line = "│  ├─ ILIKE keyword: expandKw = query拆词 ∪ entities ──→ top(20) │"
    assert count_tokens(line) == 21
    assert count_tokens("maxTotal = 6000") == 3


def test_sentences_end_on_chinese_punctuation_and_keep_closing_quotes():
    text = "他说：“走吧。”然后离开了！真的吗？是的；好。最后一句"
    assert split_sentences(text) == ["他说：“走吧。”", "然后离开了！", "真的吗？", "是的；", "好。", "最后一句"]
    assert "".join(split_sentences(text)) == text
    assert split_sentences("It works. Yes!\n第二行") == ["It works.", " Yes!", "\n", "第二行"]
    assert split_sentences("等等……然后") == ["等等……", "然后"]
    # a step's number is no sentence: a chunk cut after "8." left it alone at its end (a trial's LOTO steps)
    assert split_sentences("7. 验证。\n8. 解锁恢复：通知操作工后送电。") == ["7. 验证。", "\n", "8. 解锁恢复：通知操作工后送电。"]
    assert split_sentences("See step 8. Then stop.") == ["See step 8.", " Then stop."]


def test_short_record_is_one_chunk():
    text = "第一条 为了保护专利权人的合法权益，制定本法。"
    assert split_text(text, ChunkingConfig()) == [text]


def test_chunks_end_on_sentence_boundaries_with_token_overlap():
    sentences = [f"第{i}句话的内容比较长些。" for i in range(40)]  # 12 tokens each
    assert {count_tokens(s) for s in sentences} == {12}
    pieces = split_text("".join(sentences), ChunkingConfig(100, 30))
    assert len(pieces) > 3
    for piece in pieces:
        assert count_tokens(piece) <= 100
        assert piece.endswith("。")
    # 100 tokens hold 8 sentences; 30 tokens of overlap carry the last 2 into the next chunk
    assert pieces[0] == "".join(sentences[:8])
    assert pieces[1].startswith(sentences[6] + sentences[7])
    assert "".join(sentences[-1:]) in pieces[-1]


def test_long_sentence_is_cut_at_token_boundaries():
    assert [count_tokens(p) for p in split_text("长" * 250, ChunkingConfig(100, 0))] == [100, 100, 50]
    assert cut_tokens("alpha beta gamma", 2) == ["alpha beta ", "gamma"]


def test_pack_always_progresses():
    assert pack(["a。", "b。", "c。"], 1, 0) == [(0, 1), (1, 2), (2, 3)]
    assert pack([], 5, 1) == []


def test_bad_config_rejected():
    with pytest.raises(ValueError):
        ChunkingConfig(10, 10)
    with pytest.raises(ValueError):
        ChunkingConfig(0, 0)


def test_chunk_document_ids_headings_terms_and_hash():
    path = ["中华人民共和国专利法", "第一章 总则", "第七条"]
    rec = chunk_document("7", "中华人民共和国专利法", path, "对发明人的专利申请，任何单位或者个人不得压制。", {}, ChunkingConfig())
    assert [c.id for c in rec.chunks] == ["7#0"]
    assert rec.chunks[0].heading_path[-1] == "第七条"
    assert "专利法" in rec.chunks[0].terms  # heading terms are searchable
    same = chunk_document("7", "中华人民共和国专利法", path, "对发明人的专利申请，任何单位或者个人不得压制。", {}, ChunkingConfig())
    assert rec.content_hash == same.content_hash
    assert content_hash("t", [], "a", {}) != content_hash("t", [], "b", {})


def test_hash_of_default_collection_is_the_one_before_collections():
    # The hash stored for the law corpus before collections: sha256 of
    # [title, headings, text, metadata items] (services/ingest/chunking.py of main).
    import hashlib
    import json

    before = hashlib.sha256(json.dumps(["t", ["h"], "x", [["status", "现行有效"]]], ensure_ascii=False).encode()).hexdigest()
    assert content_hash("t", ["h"], "x", {"status": "现行有效"}) == before
    assert content_hash("t", ["h"], "x", {"status": "现行有效"}, collection="laws") != before


def test_sections_never_share_a_chunk_and_record_pages():
    sections = [
        Section(["第一章 总则"], [Block("本办法适用于全体员工。" * 3, 1), Block("出差应当申请。", 2)]),
        Section(["第一章 总则", "第一节 范围"], [Block("范围很广。", 2)]),
        Section(["第二章 标准"], [Block("住宿 | 500\n餐饮 | 100", 3)]),
    ]
    rec = chunk_sections("doc", "差旅办法", ["差旅办法"], sections, {"dept": "财务"}, ChunkingConfig(), collection="hr",
                         source="办法.pdf")
    assert [c.heading_path for c in rec.chunks] == [
        ["差旅办法", "第一章 总则"], ["差旅办法", "第一章 总则", "第一节 范围"], ["差旅办法", "第二章 标准"]]
    assert [c.metadata for c in rec.chunks] == [{"page": "1-2"}, {"page": "2"}, {"page": "3"}]
    assert rec.chunks[2].text == "住宿 | 500\n餐饮 | 100"
    assert [c.ordinal for c in rec.chunks] == [0, 1, 2]
    assert (rec.collection, rec.source) == ("hr", "办法.pdf")


def test_a_long_section_is_chunked_with_overlap_inside_its_heading():
    body = "".join(f"第{i}条规定的内容需要较长的说明文字。" for i in range(120))
    rec = chunk_sections("d", "T", ["T"], [Section(["附则"], [Block(body)])], {}, ChunkingConfig(64, 16))
    assert len(rec.chunks) > 10
    assert all(c.heading_path == ["T", "附则"] and count_tokens(c.text) <= 64 for c in rec.chunks)
    assert all(c.text.endswith("。") for c in rec.chunks)


def test_a_section_that_only_repeats_the_title_is_no_chunk_of_its_own():
    # a .docx whose title is a Heading 1 with the body's Heading 1s after it: the reader keeps the title as text
    sections = [Section(["项目周报"], [Block("项目周报")]),
                Section(["一、本周进展"], [Block("完成了检索服务的压测。")]),
                Section(["二、下周计划"], [Block("上线重排服务。")])]
    rec = chunk_sections("r", "项目周报", ["项目周报"], sections, {}, ChunkingConfig())
    assert [c.text for c in rec.chunks] == ["完成了检索服务的压测。", "上线重排服务。"]
    assert [c.heading_path for c in rec.chunks] == [["项目周报", "一、本周进展"], ["项目周报", "二、下周计划"]]
    assert [c.ordinal for c in rec.chunks] == [0, 1]
    alone = chunk_sections("t", "项目周报", ["项目周报"], sections[:1], {}, ChunkingConfig())
    assert [c.text for c in alone.chunks] == ["项目周报"]  # a document that is only its title keeps it
    body = chunk_sections("b", "项目周报", ["项目周报"], [Section(["项目周报"], [Block("项目周报"), Block("正文。")])],
                          {}, ChunkingConfig())
    assert [c.text for c in body.chunks] == ["项目周报\n正文。"]  # the title section with a body is kept whole


def test_a_first_heading_that_extends_the_title_stands_once_in_the_heading_path():
    # a PDF titled "IT服务台常见问题解答" whose first heading adds "（FAQ）": one of the two, the longer
    sections = [Section(["IT 服务台常见问题解答（FAQ）"], [Block("工作时间为8:30至20:00。")]),
                Section(["IT 服务台常见问题解答（FAQ）", "一、账号"], [Block("密码每90天修改一次。")])]
    rec = chunk_sections("f", "IT服务台常见问题解答", ["IT服务台常见问题解答"], sections, {}, ChunkingConfig())
    assert [c.heading_path for c in rec.chunks] == [["IT 服务台常见问题解答（FAQ）"], ["IT 服务台常见问题解答（FAQ）", "一、账号"]]
    longer_title = chunk_sections("g", "员工手册（2025年版）", ["员工手册（2025年版）"],
                                  [Section(["员工手册 2025", "第一章"], [Block("总则。")])], {}, ChunkingConfig())
    assert longer_title.chunks[0].heading_path == ["员工手册（2025年版）", "第一章"]
    # a short title and a section that starts with it are two headings
    short = chunk_sections("h", "手册", ["手册"], [Section(["手册使用说明"], [Block("先读目录。")])], {}, ChunkingConfig())
    assert short.chunks[0].heading_path == ["手册", "手册使用说明"]


def test_a_table_cut_across_chunks_repeats_its_header_row_in_each_chunk():
    rows = "\n".join(f"计算器型号{i:03d} | 台 | {20 + i}元" for i in range(60))
    table = Block(f"品名 | 单位 | 协议单价\n{rows}")
    rec = chunk_sections("p", "价格表", ["价格表"], [Section(["二、价格"], [Block("以下为协议价。"), table])], {},
                         ChunkingConfig(96, 12))
    assert len(rec.chunks) > 3
    assert all(c.text.startswith("品名 | 单位 | 协议单价\n") for c in rec.chunks[1:])
    assert rec.chunks[0].text.startswith("以下为协议价。")
    assert [c.text.count("品名 | 单位 | 协议单价") for c in rec.chunks] == [1] * len(rec.chunks)  # once each
    assert all(count_tokens(c.text) <= 96 + count_tokens("品名 | 单位 | 协议单价\n") for c in rec.chunks)
