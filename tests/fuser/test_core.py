import pytest
import math

from services.fuser import core
from services.fuser.core import Item, Scored

pytestmark = pytest.mark.unit


def item(id_, channel, rank, score=1.0, doc=None, source=core.SOURCE_DOCUMENT_CHUNK, text="正文。"):
    return Item(id_, doc or id_, "标题", ["标题"], text, source, scores=[Scored(channel, score, rank)])


def test_merge_keeps_every_channel_score_and_dedupes():
    merged = core.merge([[item("a", "pg.vector", 1, 0.9), item("b", "pg.vector", 2, 0.8)], [item("a", "pg.keyword", 3, 12.0)]])
    assert [m.id for m in merged] == ["a", "b"]
    assert {s.channel for s in merged[0].scores} == {"pg.vector", "pg.keyword"}


def test_rrf_on_known_rankings():
    # a: rank 1 in X, rank 3 in Y; b: rank 2 in X only; c: rank 1 in Y only.
    items = core.merge([[item("a", "X", 1), item("b", "X", 2)], [item("c", "Y", 1), item("a", "Y", 3)]])
    scores = core.rrf_scores(items, {}, k=60)
    assert math.isclose(scores["a"], 1 / 61 + 1 / 63)
    assert math.isclose(scores["b"], 1 / 62)
    ranked = core.rank(items, scores, top_k=3)
    assert [r.id for r in ranked] == ["a", "c", "b"]


def test_rrf_channel_weights_change_the_order():
    items = core.merge([[item("x", "X", 1)], [item("y", "Y", 1)]])
    ranked = core.rank(items, core.rrf_scores(items, {"X": 0.5, "Y": 2.0}), top_k=2)
    assert [r.id for r in ranked] == ["y", "x"]


def test_weighted_fusion_min_max_normalises_per_channel():
    items = core.merge([[item("a", "V", 1, 0.9), item("b", "V", 2, 0.5)], [item("b", "K", 1, 30.0), item("c", "K", 2, 10.0)]])
    scores = core.weighted_scores(items, {"V": 1.0, "K": 0.5})
    assert math.isclose(scores["a"], 1.0)
    assert math.isclose(scores["b"], 0.0 + 0.5 * 1.0)
    assert math.isclose(scores["c"], 0.0)


def scripted(id_, script, *scores):
    it = item(id_, scores[0][0], 1, scores[0][1])
    it.scores = [Scored(channel, score, 1) for channel, score in scores]
    it.script = script
    return it


def test_dense_cosines_are_shifted_per_writing_system_when_a_fusion_mixes_two():
    """A Chinese question over a station's English rules and its one Chinese file: e5 gives every
    Chinese chunk 0.85-0.87 and the English answer 0.80. Raised by half the gap between the two
    systems' medians, the English answer, also found by the keyword channel, comes first; the other
    English chunks stay below the Chinese ones."""
    def chunks(script_of):
        return core.merge([[scripted(f"zh{i}", script_of("cjk"), ("pg.vector", 0.87 - 0.005 * i)) for i in range(5)]
                           + [scripted("answer", script_of("latin"), ("pg.vector", 0.80), ("pg.keyword", 4.0))]
                           + [scripted(f"en{i}", script_of("latin"), ("pg.vector", 0.78 - 0.01 * i)) for i in range(4)]])

    weights = {"pg.vector": 1.0, "pg.keyword": 0.5}
    unknown = chunks(lambda script: "")  # no writing system known: the fusion as before
    before = [it.id for it in core.rank(unknown, core.weighted_scores(unknown, weights), top_k=10)]
    assert before[:2] == ["zh0", "zh1"] and before.index("answer") >= 2
    items = chunks(lambda script: script)
    centred = core.script_centred(items, "pg.vector")
    gap = 0.86 - 0.77  # the medians: zh2 and en1
    assert math.isclose(centred["answer"], 0.80 + core.SCRIPT_SHIFT_SHARE * gap) and centred["zh0"] == 0.87
    ranked = [it.id for it in core.rank(items, core.weighted_scores(items, weights), top_k=10)]
    assert ranked == ["answer", "zh0", "zh1", "zh2", "zh3", "zh4", "en0", "en1", "en2", "en3"]
    # one writing system (or an unknown one): the scores as they were
    one = core.merge([[scripted("a", "cjk", ("pg.vector", 0.9)), scripted("b", "", ("pg.vector", 0.5))]])
    assert core.script_centred(one, "pg.vector") == {"a": 0.9, "b": 0.5}
    # unknown systems keep their score when two known ones are shifted; lexical channels are never shifted
    mixed = core.merge([[scripted("z", "cjk", ("pg.vector", 0.9)), scripted("e", "latin", ("pg.vector", 0.7)),
                         scripted("u", "", ("pg.vector", 0.6))]])
    assert core.script_centred(mixed, "pg.vector") == pytest.approx({"z": 0.9, "e": 0.8, "u": 0.6})
    assert core.script_centred(items, "pg.keyword") == {"answer": 4.0}
    # merge keeps the first known writing system of a candidate seen in two lists
    twice = core.merge([[scripted("x", "", ("sentence.maxsim", 0.8))], [scripted("x", "latin", ("pg.vector", 0.8))]])
    assert twice[0].script == "latin"


def test_centred_dense_scores_replace_the_raw_cosines_and_the_shift_when_pg_centred_came():
    """Where the retriever sent pg.centred (the collections mix two writing systems), pg.vector weighs 0
    and no dense channel is shifted again: the centred scores decide. Without it, the weights and the
    shift are as before."""
    weights = {"pg.vector": 1.0, "pg.centred": 1.0, "pg.keyword": 0.5, "sentence.maxsim": 2.0}
    items = core.merge([[scripted("zh", "cjk", ("pg.vector", 0.90), ("pg.centred", 0.10), ("sentence.maxsim", 0.88)),
                         scripted("en", "latin", ("pg.vector", 0.80), ("pg.centred", 0.30), ("sentence.maxsim", 0.85)),
                         scripted("zh2", "cjk", ("pg.vector", 0.85), ("pg.centred", 0.05), ("sentence.maxsim", 0.80))]])
    assert core.centred_weights(items, weights) == {**weights, "pg.vector": 0.0}
    fused = core.weighted_scores(items, core.centred_weights(items, weights))
    # pg.centred min-max (en 1, zh 0.2, zh2 0) + 2 x maxsim min-max unshifted (zh 1, en 0.625, zh2 0)
    assert fused == pytest.approx({"zh": 0.2 + 2.0, "en": 1.0 + 2 * 0.625, "zh2": 0.0})
    assert [it.id for it in core.rank(items, fused, top_k=3)] == ["en", "zh", "zh2"]
    plain = core.merge([[scripted("zh", "cjk", ("pg.vector", 0.90)), scripted("zh2", "cjk", ("pg.vector", 0.86)),
                         scripted("en", "latin", ("pg.vector", 0.80)), scripted("en2", "latin", ("pg.vector", 0.70))]])
    assert core.centred_weights(plain, weights) == weights
    # still shifted per writing system: en raised by half the medians' gap (0.88 - 0.75), above zh2
    assert [it.id for it in core.rank(plain, core.weighted_scores(plain, weights), top_k=4)] == ["zh", "en", "zh2", "en2"]


def test_one_per_document_keeps_best_chunk():
    items = [item("d1#0", "X", 1, doc="d1"), item("d1#1", "X", 2, doc="d1"), item("d2#0", "X", 3, doc="d2")]
    ranked = core.rank(items, core.rrf_scores(items, {}), top_k=10, one_per_document=True)
    assert [r.id for r in ranked] == ["d1#0", "d2#0"]


def test_pack_context_respects_quotas_and_truncates_at_sentence_end():
    long_text = "这是一句很长的话。" * 100  # 900 characters
    ranked = [
        item("a", "pg.vector", 1, source=core.SOURCE_DOCUMENT_CHUNK, text=long_text),
        item("g", "graph.heading", 1, source=core.SOURCE_GRAPH, text="图谱证据。"),
    ]
    packed = core.pack_context(ranked, budget_chars=1000)
    context, sections = packed.text, packed.sections
    by_source = {s.source: s for s in sections}
    chunk_section = by_source[core.SOURCE_DOCUMENT_CHUNK]
    assert chunk_section.quota_chars == 350
    assert chunk_section.truncated and chunk_section.used_chars <= 350
    assert "[TRUNCATED]" in context
    assert context.index("[TRUNCATED]") > 0 and context[context.index("[TRUNCATED]") - 1] == "。"
    assert by_source[core.SOURCE_GRAPH].candidate_ids == ["g"]
    assert "[2] 标题\n图谱证据。" in context  # numbering runs across sections
    assert len(context) <= 1000


def test_a_graph_hit_ranked_first_is_packed_first_and_cited_as_1():
    """The fused order decides the numbering: a charge mapped to its
    article by the graph and ranked first is [1], not packed behind every
    document chunk; each source still stays within its quota."""
    ranked = [
        item("g", "graph.charge", 1, source=core.SOURCE_GRAPH, text="第二百六十四条 盗窃罪。"),
        item("a", "pg.vector", 1, source=core.SOURCE_DOCUMENT_CHUNK, text="第一块。"),
        item("k", "pg.keyword", 1, source=core.SOURCE_FULLTEXT, text="全文命中。"),
        item("b", "pg.vector", 2, source=core.SOURCE_DOCUMENT_CHUNK, text="第二块。"),
    ]
    packed = core.pack_context(ranked, budget_chars=1000)
    assert packed.cited_ids == ["g", "a", "k", "b"]
    assert packed.text.startswith("[1] 标题\n第二百六十四条 盗窃罪。\n[2] 标题\n第一块。\n[3]")
    by_source = {s.source: s for s in packed.sections}
    assert by_source[core.SOURCE_DOCUMENT_CHUNK].candidate_ids == ["a", "b"]
    assert by_source[core.SOURCE_GRAPH].candidate_ids == ["g"]


def test_source_order_packs_source_by_source_as_marxsphere_does():
    ranked = [
        item("g", "graph.charge", 1, source=core.SOURCE_GRAPH, text="图谱证据。"),
        item("a", "pg.vector", 1, source=core.SOURCE_DOCUMENT_CHUNK, text="第一块。"),
        item("k", "pg.keyword", 1, source=core.SOURCE_FULLTEXT, text="全文命中。"),
    ]
    packed = core.pack_context(ranked, budget_chars=1000, order="source")
    assert packed.cited_ids == ["a", "k", "g"]
    assert packed.text == "[1] 标题\n第一块。\n\n[2] 标题\n全文命中。\n\n[3] 标题\n图谱证据。"


def test_a_source_over_its_quota_takes_no_more_while_others_still_pack():
    long_text = "这是一句很长的话。" * 100
    ranked = [
        item("a", "pg.vector", 1, source=core.SOURCE_DOCUMENT_CHUNK, text=long_text),
        item("b", "pg.vector", 2, source=core.SOURCE_DOCUMENT_CHUNK, text="第二块。"),
        item("g", "graph.heading", 1, source=core.SOURCE_GRAPH, text="图谱证据。"),
    ]
    packed = core.pack_context(ranked, budget_chars=1000)
    assert packed.cited_ids == ["a", "g"]  # "a" was cut at its quota, so "b" is not packed
    assert "第二块" not in packed.text and "[2] 标题\n图谱证据。" in packed.text


def test_an_unknown_pack_order_is_refused():
    import pytest

    with pytest.raises(ValueError, match="order"):
        core.pack_context([], order="random")


def test_pack_context_unknown_source_goes_to_document_chunks():
    ranked = [item("a", "x", 1, source=0)]
    packed = core.pack_context(ranked)
    assert packed.sections[0].candidate_ids == ["a"] and packed.cited_ids == ["a"]


def test_mmr_removes_near_duplicate():
    a = Item("a", "d1", "t", [], "x", 1, fused=1.0, embedding=[1.0, 0.0])
    a_dup = Item("a2", "d2", "t", [], "x", 1, fused=0.95, embedding=[0.999, 0.01])
    b = Item("b", "d3", "t", [], "y", 1, fused=0.8, embedding=[0.0, 1.0])
    assert [i.id for i in core.mmr([a, a_dup, b], 0.5, 2)] == ["a", "b"]
    # lambda 1 keeps the fused order, duplicate included
    assert [i.id for i in core.mmr([a, a_dup, b], 1.0, 2)] == ["a", "a2"]


def test_mmr_rejects_bad_lambda():
    import pytest

    with pytest.raises(ValueError):
        core.mmr([], 1.5, 3)


def test_pack_context_packs_the_parent_context_under_the_same_quota():
    parented = item("a", "pg.vector", 1, text="命中句。")
    parented.context_text = "前文一句。\n命中句。\n后文一句很长很长很长很长很长很长。"
    bare = item("b", "pg.vector", 2, text="另一块。")
    context = core.pack_context([parented, bare], budget_chars=1000).text
    assert parented.context_text in context and "另一块。" in context
    # the quota and the sentence-boundary cut apply to the parent text as to any text
    packed = core.pack_context([parented], budget_chars=1000, quotas={core.SOURCE_DOCUMENT_CHUNK: 0.03})
    assert "后文一句" not in packed.text and "前文一句。" in packed.text and packed.sections[0].truncated


def test_merge_keeps_the_first_parent_context():
    plain = item("a", "graph.fulltext", 1)
    parented = item("a", "pg.vector", 2)
    parented.context_text = "父节文本。"
    merged = core.merge([[plain], [parented]])
    assert merged[0].context_text == "父节文本。" and merged[0].packed_text == "父节文本。"
    assert core.merge([[plain]])[0].packed_text == plain.text


def test_packed_blocks_are_numbered_in_order_and_fit_their_quotas_and_the_budget():
    """Random lists in both orders: headers run 1..len(cited_ids) in order,
    each followed by that candidate's text, every section within its quota
    and the text within the budget (default quotas sum to 1)."""
    import random
    import re

    from services.gateway.answer.grounding import packed_texts

    rng = random.Random(3)
    for trial in range(300):
        ranked = [item(f"c{i}", "x", i + 1, source=rng.choice([0, 1, 2, 3, 4, 5, 6]),
                       text="句子。" * rng.randint(0, 300)) for i in range(rng.randint(0, 12))]
        budget = rng.choice([50, 300, 1000, 6000])
        packed = core.pack_context(ranked, budget_chars=budget, order=rng.choice(core.PACK_ORDERS))
        numbers = [int(n) for n in re.findall(r"^\[(\d+)\] 标题$", packed.text, re.M)]
        assert numbers == list(range(1, len(packed.cited_ids) + 1)), trial
        assert len(packed.text) <= budget, trial
        assert all(s.used_chars <= s.quota_chars for s in packed.sections), trial
        texts = {it.id: it.text for it in ranked}
        for cid, body in zip(packed.cited_ids, packed_texts(packed.text, len(packed.cited_ids)) or []):
            assert texts[cid].startswith(body), trial  # a body is its candidate's text, maybe cut


def test_quotas_over_the_budget_drop_whole_blocks_never_half_of_one():
    ranked = [item("a", "x", 1, source=core.SOURCE_DOCUMENT_CHUNK, text="甲" * 500),
              item("b", "x", 2, source=core.SOURCE_PG_ENTITY, text="乙" * 500)]
    packed = core.pack_context(ranked, budget_chars=100, quotas={core.SOURCE_DOCUMENT_CHUNK: 1.0, core.SOURCE_PG_ENTITY: 1.0})
    assert packed.cited_ids == ["a"] and packed.text.startswith("[1] 标题\n") and "[2]" not in packed.text
    assert len(packed.text) <= 100
    by_source = {s.source: s for s in packed.sections}
    assert by_source[core.SOURCE_PG_ENTITY].candidate_ids == [] and by_source[core.SOURCE_PG_ENTITY].truncated


def test_cross_script_first_puts_first_the_other_language_passage_that_holds_more_of_the_question():
    # 公司账号的密码最短要多少位？ over a Chinese travel rule and an English security policy
    words = [("公司", ["company", "companies"], []), ("账号", ["account", "accounts"], ["帐号"]),
             ("密码", ["password", "passwords"], ["口令"])]
    items = core.merge([
        [Item("zh", "zh", "t", [], "公司差旅标准：出差一天补助120元。", core.SOURCE_DOCUMENT_CHUNK,
              scores=[Scored("pg.vector", 0.87, 1)], script="cjk"),
         Item("en", "en", "t", [], "Passwords for company accounts must be at least 14 characters long.",
              core.SOURCE_DOCUMENT_CHUNK, scores=[Scored("pg.vector", 0.80, 2)], script="latin")],
        [Item("en", "en", "t", [], "Passwords for company accounts must be at least 14 characters long.",
              core.SOURCE_DOCUMENT_CHUNK, scores=[Scored("pg.translated", 0.80, 1)], script="latin")],
    ])
    fused = core.weighted_scores(items, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert [it.id for it in core.rank(items, fused, 2)] == ["zh", "en"]
    raised = core.cross_script_first(items, fused, words)
    assert [it.id for it in core.rank(items, raised, 2)] == ["en", "zh"]
    assert fused["en"] < fused["zh"]  # the fused scores given are not changed
    # without the question's words, or when the first passage holds as much, the fused order stands
    assert core.cross_script_first(items, fused, []) == fused
    items[0].text = "公司账号的密码至少 12 位。"
    assert core.cross_script_first(items, fused, words) == fused


def test_cross_script_first_does_not_raise_a_passage_that_holds_only_a_one_character_words_translation():
    # 年假 over a leave policy and an English remote-work note (a fresh user's trial): jieba cuts the question
    # into 年 / 假, whose own forms hold nothing; "year" alone must not put the remote-work note first
    # (and 年假有几天？: 几天 is held by 五天 as by "days")
    words = [("年", ["year", "years"], ["年度"]), ("假", ["vacation", "vacations"], ["假期"])]
    leave = "员工工作满一年不满十年的，年休假五天；满十年不满二十年的，年休假十天。"
    remote = "Employees may work remotely up to two days per week. Equipment up to 300 USD per year is reimbursed."
    items = core.merge([[Item("zh", "zh", "年假制度", ["年假制度", "年假天数"], leave, core.SOURCE_DOCUMENT_CHUNK,
                              scores=[Scored("pg.vector", 0.86, 1), Scored("pg.keyword", 3.1, 1)], script="cjk"),
                         Item("en", "en", "Remote", [], remote, core.SOURCE_DOCUMENT_CHUNK,
                              scores=[Scored("pg.vector", 0.79, 2), Scored("pg.translated", 0.79, 1)], script="latin")]])
    fused = core.weighted_scores(items, {"pg.vector": 1.0, "pg.keyword": 0.5, "pg.translated": 0.0})
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, words), 2)] == ["zh", "en"]
    asked = [*words, ("几天", ["several", "days"], ["几个"])]
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, asked), 2)] == ["zh", "en"]


def test_cross_script_first_leaves_a_first_passage_already_in_the_other_language():
    # an English question over Chinese documents only: every candidate is Chinese, the fusion's order stands
    words = [("travel", ["差旅", "旅行"], ["trip"]), ("spend", ["花费", "费用"], [])]
    items = core.merge([[Item("a", "a", "t", [], "第一季度差旅支出为286万元。", core.SOURCE_DOCUMENT_CHUNK,
                               scores=[Scored("pg.vector", 0.8, 1)], script="cjk"),
                          Item("b", "b", "t", [], "差旅费用花费旅行费用。", core.SOURCE_DOCUMENT_CHUNK,
                               scores=[Scored("pg.vector", 0.7, 2), Scored("pg.translated", 0.7, 1)], script="cjk")]])
    fused = core.weighted_scores(items, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert core.cross_script_first(items, fused, words) == fused  # though b holds both words and a one
    items[0].script = "latin"  # a first passage in the question's own language: b, holding more, goes first
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, words), 2)] == ["b", "a"]


def _mixed(other_cosine: float) -> list[Item]:
    """Four Chinese chunks and one English one found by pg.translated with ``other_cosine``."""
    zh = [Item(f"zh{i}", f"zh{i}", "t", [], f"第{i}条：其他规定。", core.SOURCE_DOCUMENT_CHUNK,
               scores=[Scored("pg.vector", 0.88 - 0.01 * i, i + 1)], script="cjk") for i in range(4)]
    en = Item("en", "en", "t", [], "The late fee is 20 yuan a day.", core.SOURCE_DOCUMENT_CHUNK,
              scores=[Scored("pg.translated", other_cosine, 1)], script="latin")
    return core.merge([zh, [en]])


def test_cross_script_first_turned_on_puts_first_the_other_language_passage_whose_cosine_is_close_to_the_best_in_the_question_language():
    # no word in common (the dictionary's translations are not in the English text): the cosines decide
    words = [("逾期", ["overdue"], [])]
    gap = core.CROSS_SCRIPT_COSINE_GAP
    close = _mixed(0.88 - gap + 0.01)
    fused = core.rrf_scores(close, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert [it.id for it in core.rank(close, core.cross_script_first(close, fused, words, gap), 5)][0] == "en"
    assert [it.id for it in core.rank(close, core.cross_script_first(close, fused, words), 5)][0] == "zh0"  # off by default
    far = _mixed(0.88 - gap - 0.01)
    fused = core.rrf_scores(far, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert [it.id for it in core.rank(far, core.cross_script_first(far, fused, words, gap), 5)][0] == "zh0"


def test_cross_script_first_places_the_other_language_best_passage_in_the_first_three_when_it_does_not_go_first():
    items = _mixed(0.88 - core.CROSS_SCRIPT_PLACE_GAP + 0.01)
    fused = core.rrf_scores(items, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert [it.id for it in core.rank(items, fused, 5)][-1] == "en"  # unfused: last
    placed = core.cross_script_first(items, fused, [])
    assert [it.id for it in core.rank(items, placed, 5)] == ["zh0", "zh1", "en", "zh2", "zh3"]
    assert core.CROSS_SCRIPT_POSITION == 3
    # in a collection of the other writing system alone nothing moves
    for it in items:
        it.script = "latin"
    assert core.cross_script_first(items, fused, []) == fused


def test_cross_script_first_leaves_where_it_is_an_other_language_passage_far_below_the_best_in_the_question_language():
    """A trial's clinic: "Welcome to Qiyue Dental." (cosine 0.80) sat third for every Chinese question whose own
    passages reached 0.89 and more, and extractive answers quoted it."""
    items = _mixed(0.88 - core.CROSS_SCRIPT_PLACE_GAP - 0.01)
    fused = core.rrf_scores(items, {"pg.vector": 1.0, "pg.translated": 0.0})
    assert core.cross_script_first(items, fused, []) == fused
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, []), 5)][-1] == "en"
    assert core.CROSS_SCRIPT_PLACE_GAP == 0.08


def test_over_documents_of_the_other_language_only_pg_translated_weighs_as_the_keyword_channel():
    # 冬天室内暖库每英尺多少钱？ over an English marina's documents: no Chinese passage, no keyword hit; the
    # translated words find the rate card, the cosines rank the storage rules first
    texts = {"rules": "Boats in winter storage must be shrink-wrapped.", "rates": "Indoor heated storage: $9.50 per foot.",
             "fuel": "The fuel dock opens at 7 am."}
    cosines = {"rules": 0.84, "rates": 0.835, "fuel": 0.80}

    def found_by(channel: str, order: list[str]) -> list[Item]:
        return [Item(i, i, "t", [], texts[i], core.SOURCE_DOCUMENT_CHUNK, scores=[Scored(channel, cosines[i], rank)],
                     script="latin") for rank, i in enumerate(order, start=1)]

    items = core.merge([found_by("pg.vector", ["rules", "rates", "fuel"]), found_by("pg.translated", ["rates", "rules", "fuel"])])
    defaults = {"pg.vector": 1.0, "pg.keyword": 0.5, "pg.translated": 0.0}
    weights = core.other_script_weights(items, defaults, "latin")
    assert weights["pg.translated"] == 0.5 and defaults["pg.translated"] == 0.0
    # its contribution follows its own rank (its score is a cosine, kept for the cross-script step)
    assert [it.id for it in core.rank(items, core.weighted_scores(items, weights), 3)] == ["rates", "rules", "fuel"]
    assert [it.id for it in core.rank(items, core.weighted_scores(items, defaults), 3)] == ["rules", "rates", "fuel"]
    # a passage in the question's own language among them, no translation, or a weight the request set: unchanged
    mixed = [*items, Item("zh", "zh", "t", [], "冬季存放规定。", core.SOURCE_DOCUMENT_CHUNK,
                          scores=[Scored("pg.vector", 0.80, 3)], script="cjk")]
    assert core.other_script_weights(mixed, defaults, "latin") == defaults
    assert core.other_script_weights(items, defaults, "") == defaults
    assert core.other_script_weights(items, {**defaults, "pg.translated": 0.2}, "latin")["pg.translated"] == 0.2


def test_cross_script_first_reads_headings_an_faq_answer_under_its_question_stays_first():
    # "Who do I contact if the CI pipeline is broken?" over an English FAQ and a Chinese runbook (a fresh
    # user's trial): the FAQ's question is its heading, its text only the answer
    words = [("contact", ["联系"], []), ("ci", ["持续集成"], []), ("pipeline", ["流水线"], []), ("broken", ["故障", "坏"], [])]
    faq = Item("faq", "faq", "FAQ", ["Deployment FAQ", "Q: Who do I contact if the CI pipeline is broken?"],
               "A: The build infrastructure is owned by the Developer Platform team.", core.SOURCE_DOCUMENT_CHUNK,
               scores=[Scored("pg.vector", 0.88, 1), Scored("pg.keyword", 9.0, 1)], script="latin")
    runbook = Item("rb", "rb", "值班手册", ["值班手册"], "流水线故障时先看告警，再联系值班。", core.SOURCE_DOCUMENT_CHUNK,
                   scores=[Scored("pg.vector", 0.78, 2), Scored("pg.translated", 0.78, 1)], script="cjk")
    items = core.merge([[faq, runbook]])
    fused = core.weighted_scores(items, {"pg.vector": 1.0, "pg.keyword": 0.5, "pg.translated": 0.0})
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, words), 2)] == ["faq", "rb"]
    items[0].heading_path = ["Deployment FAQ"]  # without its question in the heading, the runbook holds more words
    assert [it.id for it in core.rank(items, core.cross_script_first(items, fused, words), 2)] == ["rb", "faq"]


def test_passages_holding_the_codes_the_query_names_come_first_in_fused_order():
    """A trial's "1622-0655-00 是什么配件": the table row holding the part number was fourth fused."""
    row = item("row", "pg.keyword", 1, text="更换空气滤芯 | 每 2000 h | 1622-0655-00")
    other_part = item("other", "pg.vector", 1, text="主机轴承套件备件号为 2906-0980-00。")
    other_model = item("model", "pg.vector", 2, text="GA-55VSD 的润滑油每 6000 h 更换一次。")
    titled = item("titled", "pg.vector", 3, text="E102 | 排气温度过高")
    titled.title = "GA-37VSD 维护手册"
    items = [row, other_part, other_model, titled]
    fused = {"other": 0.9, "model": 0.8, "row": 0.5, "titled": 0.4}
    raised = core.codes_first(items, fused, "1622 0655 00 和 1622-0655-00 是什么配件")
    assert [it.id for it in core.rank(items, raised, 4)] == ["row", "other", "model", "titled"]
    both = core.codes_first(items, fused, "ga37vsd 的 E102 怎么处理")  # a title holds the model's code
    assert [it.id for it in core.rank(items, both, 4)][0] == "titled"
    assert core.codes_first(items, fused, "空气滤芯多久换") is fused  # no code: the fused order stands
    assert core.codes_first(items, fused, "GA-75VSD 换油周期") is fused  # held by none: nothing to tell apart


def test_a_question_asking_a_price_gets_a_passage_stating_one_first_within_the_pool():
    """A trial's 猫咪打疫苗多少钱 had the vaccination schedule (no price) first and the price list's row fourth."""
    schedule = item("schedule", "pg.vector", 1, text="幼猫满8周龄打第一针猫三联疫苗，12周龄打第二针。")
    care = item("care", "pg.vector", 2, text="打完疫苗后请在医院观察30分钟，7天内不要洗澡。")
    prices = item("prices", "pg.keyword", 1, text="项目 | 类别 | 价格（元） | 备注\n猫三联疫苗 | 疫苗 | 120 | 每针")
    free = item("free", "pg.keyword", 2, text="65周岁以上老年人可免费乘坐地铁。")
    deep = item("deep", "pg.keyword", 3, text="绝育手术费800元。")
    items = [schedule, care, prices, free, deep, *(item(f"x{i}", "pg.vector", 3 + i, text="其他说明。") for i in range(2))]
    fused = {"schedule": 0.9, "care": 0.8, "prices": 0.7, "x0": 0.6, "free": 0.5, "x1": 0.4, "deep": 0.3}
    order = [it.id for it in core.rank(items, core.price_first(items, fused, "猫咪打疫苗多少钱"), 7)]
    assert order == ["prices", "free", "schedule", "care", "x0", "x1", "deep"]  # the pool of 5 only: "deep" stays
    assert core.price_first(items, fused, "猫咪几周打疫苗") is fused  # no price asked
    assert core.price_first(items, fused, "计时收费最小按多长时间算") is fused  # a duration asked, not a price
    first_priced = {**fused, "prices": 0.95}
    assert core.price_first(items, first_priced, "猫咪打疫苗多少钱") is first_priced  # the first states one already
