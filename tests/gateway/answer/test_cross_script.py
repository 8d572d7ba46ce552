"""The extractive answer across scripts (services/gateway/answer/cross_script.py):
an English question over Chinese sources quotes the piece closest in meaning,
not the source's first sentence; within one script, or without the expander,
words alone decide and nothing is embedded."""
from __future__ import annotations

import grpc
import pytest

from graphmesh.expander.v1 import expander_pb2
from services.gateway.answer import extractive
from services.gateway.answer.cross_script import cross_script, other_script_sources, piece_similarity, similarity_weight
from services.gateway.downstream.guard import Deadline
from tests.fakes import downstream_error

pytestmark = pytest.mark.unit

QUESTION = "How many sick days per year are paid at full salary?"
SOURCE = "第十二条 员工因病需要休息的，凭医院证明请病假。每年前5天病假工资全额发放。病假期间不影响年终评优。"


class MeaningExpander:
    """Embeds the question and the sick-pay sentence alike, everything else apart."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[expander_pb2.EmbedRequest] = []

    async def embed(self, request, timeout):
        self.calls.append(request)
        if self.fail:
            raise downstream_error("expander", grpc.StatusCode.UNAVAILABLE)
        close = lambda text: text == QUESTION or "全额发放" in text  # noqa: E731
        return expander_pb2.EmbedResponse(vectors=[expander_pb2.Vector(values=[1.0, 0.0] if close(t) else [0.0, 1.0])
                                                   for t in request.texts], dimension=2)


def test_a_question_is_cross_script_when_its_sources_are_in_the_other_script():
    assert cross_script(QUESTION, [SOURCE])
    assert cross_script("令牌多久过期？", ["Tokens expire after 12 hours and must be refreshed."])
    assert not cross_script("病假工资怎么发？", [SOURCE]) and not cross_script(QUESTION, ["Sick days are paid in full."])
    assert not cross_script(QUESTION, [])


@pytest.mark.asyncio(loop_scope="session")
async def test_an_english_question_over_a_chinese_source_quotes_the_piece_closest_in_meaning():
    expander = MeaningExpander()
    similarity = await piece_similarity(expander, QUESTION, [SOURCE], Deadline(5), 1.0, batch=2)
    assert similarity and max(similarity, key=similarity.get) == "每年前5天病假工资全额发放。"
    assert [r.kind for r in expander.calls] == [expander_pb2.EMBED_KIND_QUERY] + [expander_pb2.EMBED_KIND_PASSAGE] * 2
    answer = extractive.extractive_answer([SOURCE], QUESTION, max_sentences_per_source=1, similarity=similarity)
    assert answer.splitlines()[1] == "每年前5天病假工资全额发放。 [1]"
    words_only = extractive.extractive_answer([SOURCE], QUESTION, max_sentences_per_source=1)
    assert "全额发放" not in words_only  # no shared word: the first sentence


@pytest.mark.asyncio(loop_scope="session")
async def test_with_a_weight_of_zero_or_without_a_working_expander_words_alone_decide():
    same = MeaningExpander()
    weight = similarity_weight("病假工资怎么发？", [SOURCE], 0.0)
    assert weight == 0.0 and await piece_similarity(same, "病假工资怎么发？", [SOURCE], Deadline(5), 1.0, 8, weight) is None
    assert not same.calls  # nothing embedded
    assert await piece_similarity(None, QUESTION, [SOURCE], Deadline(5), 1.0, batch=8) is None
    failing = MeaningExpander(fail=True)
    assert await piece_similarity(failing, QUESTION, [SOURCE], Deadline(5), 1.0, batch=8) is None and failing.calls


def test_across_scripts_the_similarity_weighs_one_within_one_script_the_gateways_weight():
    assert similarity_weight(QUESTION, [SOURCE], 0.3) == 1.0
    assert similarity_weight("病假工资怎么发？", [SOURCE], 0.3) == 0.3


@pytest.mark.asyncio(loop_scope="session")
async def test_within_one_script_the_weighted_similarity_quotes_the_piece_closest_in_meaning():
    # a trial's "脐橙开春施啥肥" got the summer rows: 开春 is no word of the 春梢肥 row, 施 and 肥 are in every row
    question = "病假工资怎么发？"
    source = "第十二条 病假工资的计算基数为上月工资。因病休息的前五天照发全薪。"

    class Close(MeaningExpander):
        async def embed(self, request, timeout):
            self.calls.append(request)
            near = lambda t: t == question or "照发全薪" in t  # noqa: E731
            return expander_pb2.EmbedResponse(vectors=[expander_pb2.Vector(values=[1.0, 0.0] if near(t) else [0.0, 1.0])
                                                       for t in request.texts], dimension=2)

    weight = similarity_weight(question, [source], 1.0)
    similarity = await piece_similarity(Close(), question, [source], Deadline(5), 1.0, 8, weight)
    quoted = extractive.extractive_answer([source], question, max_sentences_per_source=1, similarity=similarity,
                                          similarity_weight=weight).splitlines()[1]
    assert quoted == "因病休息的前五天照发全薪。 [1]"
    words_only = extractive.extractive_answer([source], question, max_sentences_per_source=1).splitlines()[1]
    assert words_only == "第十二条 病假工资的计算基数为上月工资。 [1]"


ENGLISH_SOURCE = "Sick leave must be reported before 9 am. The first five sick days each year are paid at full salary."
CHINESE_SOURCE = "第二十条 年假每年10天，须提前一周在人事系统中提交申请，由部门经理审批；未休完的年假不折算工资，也不结转到下一年度。"


class SickPayExpander(MeaningExpander):
    """Embeds a Chinese question about sick pay and the English full-salary sentence alike."""

    async def embed(self, request, timeout):
        self.calls.append(request)
        close = lambda text: text == "病假工资怎么发？" or "full salary" in text  # noqa: E731
        return expander_pb2.EmbedResponse(vectors=[expander_pb2.Vector(values=[1.0, 0.0] if close(t) else [0.0, 1.0])
                                                   for t in request.texts], dimension=2)


@pytest.mark.asyncio(loop_scope="session")
async def test_in_sources_of_both_scripts_every_piece_is_read_by_similarity_too():
    # a Chinese question whose first source is an English file, the next a Chinese one: the three together do not
    # read as English, yet the English source shares no word with the question
    question, texts = "病假工资怎么发？", [ENGLISH_SOURCE, CHINESE_SOURCE]
    assert not cross_script(question, texts) and other_script_sources(question, texts) == [0]
    expander = SickPayExpander()
    similarity = await piece_similarity(expander, question, texts, Deadline(5), 1.0, batch=8)
    assert set(similarity) == set(extractive.pieces_to_embed(texts))  # the Chinese source's pieces too
    assert {"Sick leave must be reported before 9 am.", "The first five sick days each year are paid at full salary."} <= set(similarity)
    answer = extractive.extractive_answer(texts, question, max_sentences_per_source=1, similarity=similarity)
    assert answer.splitlines()[1] == "The first five sick days each year are paid at full salary. [1]"
    assert "Sick leave must be reported" in extractive.extractive_answer(texts, question, max_sentences_per_source=1)


def test_within_one_script_the_similarity_orders_pieces_but_words_decide_whether_a_later_source_is_quoted():
    # with the similarity deciding too, three sources were quoted in 347 answers of 1,260 against 194
    question = "病假工资怎么发？"
    first = "第十二条 病假工资的计算基数为上月工资。因病休息的前五天照发全薪。"
    later = "第三十条 年终奖按绩效等级发放。"
    similarity = {"第十二条 病假工资的计算基数为上月工资。": 0.2, "因病休息的前五天照发全薪。": 0.9,
                  "第三十条 年终奖按绩效等级发放。": 0.8}
    padded = extractive.extractive_answer([first, later], question, similarity=similarity, similarity_weight=2.0)
    kept = extractive.extractive_answer([first, later], question, similarity=similarity, similarity_weight=2.0,
                                        similarity_ranks_only=True)
    assert "[2]" in padded and "[2]" not in kept
    assert kept.splitlines()[1].startswith("第十二条 病假工资的计算基数为上月工资。")  # both pieces of [1], in reading order
