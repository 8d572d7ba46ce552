"""Pure parts of ``graphmesh eval``: dataset reading, totals, artifacts,
context splitting and run comparison."""
from __future__ import annotations

import json

import pytest

from services.cli import evaluate
from services.cli.evaluate import QueryRow

pytestmark = pytest.mark.unit


def row(qid: str, rank: int | None, category: str = "", gold=("g",), latency: float = 10.0) -> QueryRow:
    ranked = ["x"] * 0
    if rank is not None:
        ranked = [f"o{i}" for i in range(1, rank)] + [gold[0]]
    return QueryRow(qid, f"q{qid}", list(gold), ranked, rank, latency, [], category=category)


def test_summarise_known_ranks():
    rows = [row("1", 1, "a"), row("2", 3, "a"), row("3", None, "b"), row("4", 7, "b", latency=30.0)]
    s = evaluate.summarise(rows)
    assert s["top1"] == s["recall@1"] == 0.25
    assert s["recall@3"] == s["recall@5"] == 0.5 and s["recall@10"] == 0.75
    assert s["mrr@10"] == pytest.approx(round((1 + 1 / 3 + 1 / 7) / 4, 4))
    assert s["category_recall@10"] == {"a": {"n": 2, "recall@10": 1.0}, "b": {"n": 2, "recall@10": 0.5}}
    assert s["latency_ms_p50"] == 10.0 and s["n"] == 4 and s["errors"] == 0


def test_summarise_judge_means_skip_not_computed():
    a, b = row("1", 1), row("2", 2)
    a.judge = {"faithfulness": 0.5, "cot_quality": None}
    b.judge = {"faithfulness": 1.0, "cot_quality": None}
    s = evaluate.summarise([a, b])
    assert s["judge"]["faithfulness"] == {"mean": 0.75, "computed": 2}
    assert s["judge"]["cot_quality"] == {"mean": None, "computed": 0}


def test_load_dataset_and_reference(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"query": "问题一", "gold": [1], "reference": "答案"}\n\n{"id": "b", "query": "问题二", "gold": []}\n', encoding="utf-8")
    rows = evaluate.load_dataset(path)
    assert [r["id"] for r in rows] == ["1", "b"]
    assert evaluate.reference_of(rows[0]) == "答案" and evaluate.reference_of(rows[1]) == ""
    assert len(evaluate.load_dataset(path, limit=1)) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"gold": [1]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        evaluate.load_dataset(bad)


def test_split_context_numbered_blocks():
    context = "[1] 专利法 第二条\n发明是新的技术方案。\n第二行\n\n[2] 劳动合同法 第八十二条\n支付二倍工资。"
    assert evaluate.split_context(context) == [
        ("专利法 第二条", "发明是新的技术方案。\n第二行"), ("劳动合同法 第八十二条", "支付二倍工资。")]


def test_artifact_saves_and_hashes(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"query": "q", "gold": ["g"]}\n')
    config = {"top_k": 30, "env": {"GRAPHMESH_GATEWAY_FUSION_METHOD": "rrf"}}
    art = evaluate.build_artifact(dataset, [row("1", 2)], config, 2.0, None)
    assert art["schema"] == evaluate.SCHEMA and len(art["git"]["commit"]) == 40
    assert art["config_hash"] == evaluate.config_hash(dict(config)) != evaluate.config_hash({**config, "top_k": 10})
    assert art["dataset"]["sha256"] == evaluate.file_hash(dataset) and art["rows"][0]["first_gold_rank"] == 2
    saved = evaluate.save_artifact(art, tmp_path / "runs")
    assert saved.parent == tmp_path / "runs" and json.loads(saved.read_text())["totals"]["mrr@10"] == 0.5
    assert evaluate.save_artifact(art, tmp_path / "x.json") == tmp_path / "x.json"


def test_recorded_env_drops_ports_addresses_and_secrets():
    env = {"GRAPHMESH_GATEWAY_PORT": "1", "GRAPHMESH_JUDGE_ADDR": "a", "GRAPHMESH_JUDGE_LLM__API_KEY": "s",
           "GRAPHMESH_HOME": "/x", "GRAPHMESH_GATEWAY_FUSION_METHOD": "weighted", "PATH": "/bin"}
    assert evaluate.recorded_env(env) == {"GRAPHMESH_GATEWAY_FUSION_METHOD": "weighted"}


def test_compare_lists_better_and_worse(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"query": "q", "gold": ["g"]}\n')
    a = evaluate.build_artifact(dataset, [row("1", 1), row("2", 5), row("3", None), row("4", 2)], {"top_k": 30}, 1.0, None)
    b = evaluate.build_artifact(dataset, [row("1", 1), row("2", 1), row("3", 9), row("4", None)], {"top_k": 10}, 1.0, None)
    result = evaluate.compare(a, b)
    assert [e["id"] for e in result["better"]] == ["2", "3"]   # 5->1 moves MRR more than -(none)->9
    assert [(e["id"], e["rank_a"], e["rank_b"]) for e in result["worse"]] == [("4", 2, None)]
    assert result["deltas"]["recall@1"] == {"a": 0.25, "b": 0.5, "delta": 0.25}
    assert any("top_k" in w for w in result["warnings"])
    text = evaluate.format_compare(result, "a.json", "b.json")
    assert "2 queries better" in text and "1 queries worse" in text and "recall@1" in text


def test_summary_ndcg_of_known_ranks():
    # One gold per query: nDCG@10 = 1 / log2(rank + 1); rank 1 -> 1, rank 3 -> 0.5, none -> 0.
    s = evaluate.summarise([row("1", 1), row("2", 3), row("3", None)])
    assert s["ndcg@10"] == pytest.approx(round((1 + 0.5 + 0) / 3, 4))


def test_ranks_count_distinct_documents_not_chunks():
    from graphmesh.common.v1 import types_pb2

    results = [types_pb2.Candidate(id=f"{doc}#{n}", document_id=doc, title="某法")
               for doc, n in (("a", 0), ("a", 1), ("b", 0), ("a", 2), ("gold", 0))]
    keys = evaluate.result_keys(results, {"gold"})
    assert keys == ["a", "b", "gold"]  # three chunks of "a" count once: the gold is rank 3, not 5
    # entity sets label results by title (an entity's name)
    entity = [types_pb2.Candidate(id="e1", title="马铃薯"), types_pb2.Candidate(id="e2", title="薯类")]
    assert evaluate.result_keys(entity, {"薯类"}) == ["e1", "薯类"]


def test_citation_summary_counts_checks_before_and_after_and_the_bigram_rule():
    from graphmesh.gateway.v1 import gateway_pb2

    reply = gateway_pb2.AnswerResponse(search=gateway_pb2.SearchResponse(
        context="[1] 专利法 第四十四条\n专利权在期限届满前终止。\n\n[2] 专利法 第四十二条\n发明专利权的期限为二十年。"))
    reply.citation_checks.add(sentence="发明专利权的期限为二十年。", cited=1, final=2,
                              outcome=gateway_pb2.CITATION_OUTCOME_REATTRIBUTED, support=0.0)
    reply.citation_checks.add(sentence="专利权在期限届满前终止。", cited=1, final=1,
                              outcome=gateway_pb2.CITATION_OUTCOME_SUPPORTED, support=1.0)
    reply.citation_checks.add(sentence="专利权可以无限续展。", cited=2, final=0,
                              outcome=gateway_pb2.CITATION_OUTCOME_UNSUPPORTED, support=0.2)
    # unmarked rule sentences: one given a mark by the check, one removed; neither is a mark of the model's
    reply.citation_checks.add(sentence="发明专利权的期限为二十年。", cited=0, final=2,
                              outcome=gateway_pb2.CITATION_OUTCOME_REATTRIBUTED, support=1.0)
    reply.citation_checks.add(sentence="依照专利法第九十九条处罚。", cited=0, final=0,
                              outcome=gateway_pb2.CITATION_OUTCOME_UNSUPPORTED, support=0.0)
    counts = evaluate.citation_summary(reply)
    assert counts == {"marks": 3, "supported": 1, "reattributed": 1, "removed": 1, "kept": 2,
                      "bigram_before": 1, "bigram_after": 2, "added": 1}


def test_answer_summary_rates_and_precision():
    answered = row("1", 1)
    answered.answer_mode, answered.citations = "extractive", {"marks": 4, "supported": 3, "kept": 4, "bigram_before": 2,
                                                             "bigram_after": 4}
    answered.reference = {"rouge_l": 0.5, "articles": None, "numbers": 1.0}
    abstained = row("2", None)
    abstained.answer_mode = "abstained"
    s = evaluate.summarise([answered, abstained])["answers"]
    assert s["answer_rate"] == 0.5 and s["abstain_rate"] == 0.5
    assert s["citation_precision_before"] == 0.75 and s["citation_precision_after"] == 1.0
    assert s["bigram_precision_before"] == 0.5 and s["bigram_precision_after"] == 1.0
    assert s["reference"] == {"rouge_l": {"mean": 0.5, "computed": 1}, "numbers": {"mean": 1.0, "computed": 1}}


def test_gold_passages_given_as_text_match_the_chunk_that_holds_them():
    from services.cli.evaluate import gold_passages, passage_matches

    assert gold_passages({"gold_text": "信息增长率"}) == ["信息增长率"]
    assert gold_passages({"gold_text": ["a", " "]}) == ["a"] and gold_passages({"gold": ["1"]}) == []
    # a trial's Markdown row copied with its pipes was found in the results but never "quoted"
    assert gold_passages({"gold_text": "| 滿5年未滿10年 | 15日 |"}) == ["滿5年未滿10年 | 15日"]
    gold = "信息增长率 = 新发现的块数 / 已知块数，低于 0.1 时停止迭代。"
    assert passage_matches(gold, "前文。\n信息增长率 = 新发现的块数 / 已知块数，\n低于 0.1 时停止迭代。后文")
    assert passage_matches(gold, "信息增长率 = 新发现的块数 / 已知块数，低于")  # most of it, cut at a chunk end
    assert not passage_matches(gold, "停止迭代。")
    assert passage_matches("办公时间8:30—17:00", "办公时间 8:30―17:00。")  # em dash and horizontal bar alike
    assert passage_matches("缓存不一致时执行 `redis-cli DEL ledger:balance:<id>`，**不要**清全库。",
                           "缓存不一致时执行 redis-cli DEL ledger:balance:<id>，不要清全库。")  # Markdown marks as parsed
    assert not passage_matches(gold, "")


def test_split_context_keeps_a_reference_list_in_its_block_given_the_result_labels():
    context = "[1] Paper\nReferences:\n[1] Jones, 2019\n[2] Smith, 2020\n[2] 劳动合同法 第八十二条\n支付二倍工资。"
    labels = {"Paper", "劳动合同法 第八十二条"}
    assert evaluate.split_context(context, labels) == [
        ("Paper", "References:\n[1] Jones, 2019\n[2] Smith, 2020"), ("劳动合同法 第八十二条", "支付二倍工资。")]
    # by numbers alone the reference opens [2] and swallows the real source [2]
    assert evaluate.split_context(context)[1] == ("Smith, 2020", "[2] 劳动合同法 第八十二条\n支付二倍工资。")
    assert [label for label, _ in evaluate.split_context("[1] A\n甲", {"X"})] == ["A"]  # no label known: numbers decide


def test_ablation_rows_search_the_collections_and_filters_asked_for(monkeypatch, capsys):
    from services.cli import ablation

    calls = []

    async def fake_run_queries(address, dataset, top_k, concurrency, timeout, **kwargs):
        calls.append(kwargs)
        return []

    monkeypatch.setattr(ablation, "run_queries", fake_run_queries)
    monkeypatch.setattr(ablation, "summarise", lambda rows: {"recall@1": 0.5})
    rows = [("full pipeline", (), ()), ("- pg.boost", ("pg.boost",), ())]
    results = ablation.ablation_rows("127.0.0.1:1", [{"query": "q", "gold": [1]}], 10, 1, 1.0, rows,
                                     collections=("mine",), filters=("f",))
    assert len(calls) == 3  # the warm-up pass and one per row
    assert all(c["collections"] == ("mine",) and c["filters"] == ("f",) for c in calls)
    assert calls[2]["disabled_stages"] == ("pg.boost",)
    assert [r["configuration"] for r in results] == ["full pipeline", "- pg.boost"] and results[1]["recall@1"] == 0.5
    progress = capsys.readouterr()
    assert progress.out == "" and progress.err.count("| - pg.boost |") == 1  # progress on stderr, the table once
    assert ablation.ablation_table(results).count("| full pipeline | 0.5 |") == 1


def test_the_judge_sees_chunk_ids_when_the_gold_is_given_as_text():
    from graphmesh.common.v1 import types_pb2
    from graphmesh.gateway.v1 import gateway_pb2
    results = [types_pb2.Candidate(id="手册.docx#4", document_id="手册.docx", title="员工手册", heading_path=["员工手册", "第三章"]),
               types_pb2.Candidate(id="手册.docx#7", document_id="手册.docx", title="员工手册", heading_path=["员工手册", "第五章"])]
    reply = gateway_pb2.AnswerResponse(
        answer="婚假为13天[1]。", citations=[gateway_pb2.Citation(number=1, candidate_id="手册.docx#4", document_id="手册.docx")],
        search=gateway_pb2.SearchResponse(results=results, context="[1] 员工手册 第三章\n婚假为13天。\n\n[2] 员工手册 第五章\n病假。"))
    row = {"query": "结婚能请几天假？"}
    by_chunk = evaluate._judge_request(row, reply, ["手册.docx#4"], ["手册.docx#4", "手册.docx#7"], 10, by_chunk=True)
    assert list(by_chunk.context_ids) == ["手册.docx#4", "手册.docx#7"] and list(by_chunk.gold_ids) == ["手册.docx#4"]
    by_document = evaluate._judge_request(row, reply, ["手册.docx"], ["手册.docx"], 10)
    assert list(by_document.context_ids) == ["手册.docx", "手册.docx"]


def test_a_gold_passage_no_result_holds_counts_zero_in_the_judges_rank_metrics():
    from services.judge import core

    row = {"id": "k07", "query": "When are quiet hours?", "gold_text": "Quiet hours are from 22:00 to 07:00."}
    unretrieved = evaluate.judged_gold(row, [], given_as_text=True)
    assert unretrieved == [f"{evaluate.UNRETRIEVED_GOLD}k07"]
    ranked = ["housing.docx#1", "housing.docx#2"]
    assert core.hit_at(ranked, set(unretrieved), 10) == 0.0 and core.recall_at(ranked, set(unretrieved), 10) == 0.0
    assert core.mrr_at(ranked, set(unretrieved)) == 0.0
    assert evaluate.judged_gold(row, ["housing.docx#3"], given_as_text=True) == ["housing.docx#3"]
    assert evaluate.judged_gold({"query": "q"}, [], given_as_text=False) == []  # no gold at all: not computed


def test_questions_without_gold_are_counted_so_eval_can_say_so():
    rows = [{"query": "a", "gold": ["1"]}, {"query": "b", "gold_text": "答案"}, {"query": "c"}, {"query": "d", "gold": []}]
    assert evaluate.unlabelled(rows) == 2


@pytest.mark.parametrize("content, message", [
    ('{"id": "a", "query": "问题一"}\n{"id": "b", "query": "问题二"}\n{"id": "c", "query": "问题三"\n', "d.jsonl:3: not JSON"),
    ('{"id": "a", "query": "问题一"}\n{"id": "a", "query": "问题二"}\n', "d.jsonl:2: id 'a' is also the id of line 1"),
    ("\n\n", "no question in it"),
])
def test_a_dataset_with_a_bad_line_a_repeated_id_or_no_question_is_refused_naming_the_file_and_line(tmp_path, content, message):
    """A trial's line 5 was reported as "line 1 column 14", a repeated id counted twice, an empty file
    scored 0 with exit 0."""
    path = tmp_path / "d.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        evaluate.load_dataset(path)


def test_a_dataset_saved_with_a_bom_is_read(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "query": "问题一"}\r\n', encoding="utf-8-sig")  # as Notepad saves it
    assert [r["id"] for r in evaluate.load_dataset(path)] == ["a"]


def test_a_gold_passage_written_with_half_width_punctuation_matches_the_documents_full_width_text():
    from services.cli.evaluate import passage_matches

    assert passage_matches("保价费:按声明价值的0.5%收取,最低2元;", "二、保价费：按声明价值的0.5%收取，最低2元；不足部分不赔。")


def test_compare_refuses_an_ablation_artifact_saying_why(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"query": "q", "gold": ["g"]}\n')
    run = evaluate.build_artifact(dataset, [row("1", 1)], {"top_k": 10}, 1.0, None)
    ablation = {"dataset": {"path": str(dataset), "n": 1}, "config": {"top_k": 10, "ablate": True},
                "rows": [{"configuration": "full pipeline", "recall@1": 1.0}]}
    with pytest.raises(ValueError, match="run B is not an `eval` run artifact .an --ablate artifact"):
        evaluate.compare(run, ablation)


def test_every_ablation_row_says_what_its_channel_is():
    """A trial's table read "- pg.adapted (pg.adapted)", and "- pg.vector" matched the full pipeline unexplained."""
    from services.cli.ablation import ablations

    labels = [label for label, _, _ in ablations()]
    assert not [label for label in labels if label.startswith(("- pg.", "+ pg.")) and
                label.split(" ", 1)[1] == f"{label.split()[1]} ({label.split()[1]})"]
    assert any(label.startswith("- pg.vector (dense; weighs 0 where the collections mix") for label in labels)


def test_an_answer_quotes_its_gold_passage_but_a_refusal_showing_it_as_closest_does_not():
    from graphmesh.gateway.v1 import gateway_pb2
    from services.cli.evaluate import quotes_gold

    gold = ["周六、周日及法定节假日不得进行电钻施工。"]
    answered = gateway_pb2.AnswerResponse(answer="（抽取式答案）\n周六、周日及法定节假日不得进行电钻施工。 [1]",
                                          mode=gateway_pb2.ANSWER_MODE_EXTRACTIVE)
    refused = gateway_pb2.AnswerResponse(answer="资料不足。\n[1] 中最接近的一句（未必回答了这个问题）：周六、周日及法定节假日不得进行电钻施工。",
                                         mode=gateway_pb2.ANSWER_MODE_ABSTAINED)
    assert quotes_gold(answered, gold) and not quotes_gold(refused, gold)
    assert quotes_gold(answered, ["周六、周日及法定节假日 不得进行电钻施工。"])  # spacing aside


def test_a_gold_passage_with_another_figure_does_not_match_the_text_that_has_the_right_one():
    # a trial's gold lines with wrong figures (会费300元 for the documents' 200元) were scored as found at rank 1
    from services.cli.evaluate import passage_matches
    text = "第十条 每户每年交会费200元，每年3月31日前交清。入社股金每户2000元。"
    assert passage_matches("每户每年交会费200元，每年3月31日前交清。", text)
    assert not passage_matches("每户每年交会费300元，每年3月31日前交清。", text)
    assert not passage_matches("每户每年交会费200元，每年3月30日前交清。", text)
    assert passage_matches("入社股金每户2000元。另见第十一条。", "……交清。入社股金每户2000元。")  # cut across chunks


def test_a_gold_id_written_bare_is_one_id_and_a_gold_of_another_shape_is_refused(tmp_path):
    # a trial's "gold": "docs/社员管理办法.docx" was split into its characters and scored silently
    from services.cli.evaluate import load_dataset
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "q1", "query": "会费多少", "gold": "docs/社员管理办法.docx"}\n', "utf-8")
    assert load_dataset(path)[0]["gold"] == ["docs/社员管理办法.docx"]
    path.write_text('{"id": "q1", "query": "会费多少", "gold": {"id": "x"}}\n', "utf-8")
    with pytest.raises(ValueError, match=r"q.jsonl:1: \"gold\" must be a list"):
        load_dataset(path)
