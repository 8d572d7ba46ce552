"""The LLM judge's prompts and replies (services.judge.llm) with a small fake
of our LlmClient: the JSON mode's parsing and prompt, and the yes-no mode's
shared prefix, yes-probabilities and failures."""
from __future__ import annotations

import math

import pytest

from services.common.llm import LlmError
from services.judge import llm as judge_llm
from services.judge.scoring import METRICS, JudgeInputs

pytestmark = pytest.mark.unit

INPUTS = JudgeInputs(
    question="什么是实用新型？",
    answer="实用新型是指对产品的形状、构造提出的新的技术方案[1]。",
    contexts=["实用新型，是指对产品的形状、构造或者其结合所提出的适于实用的新的技术方案。", "发明，是指新的技术方案。"],
    reference_answer="参考",
)
LLM_METRICS = [m.name for m in METRICS if m.llm]


def test_json_reply_parsing_clips_skips_and_inverts_hallucination():
    reply = '好的：{"cot_quality": 0.7, "x": "y", "faithfulness": 3, "hallucination": 0.2}'
    assert judge_llm.parse_scores(reply, ["cot_quality", "faithfulness", "x", "hallucination"]) == {
        "cot_quality": 0.7, "faithfulness": 1.0, "hallucination": pytest.approx(0.8)}
    with pytest.raises(ValueError):
        judge_llm.parse_scores("no json here", ["cot_quality"])


def test_json_prompt_holds_the_inputs_and_no_example_score():
    content = judge_llm.build_messages(INPUTS, ["cot_quality", "hallucination"])[1]["content"]
    assert "[1] 实用新型" in content and "参考答案：参考" in content and "cot_quality" in content
    assert "0.8" not in content  # a small model copied the example score into every metric
    assert "越低越好" in content  # hallucination is asked as an amount, the way a small model reads the name


def test_every_llm_metric_has_a_yes_no_question_after_one_shared_prefix():
    messages = {name: judge_llm.yes_no_messages(INPUTS, name) for name in LLM_METRICS}
    prefixes = {m[1]["content"].split("评审问题：")[0] for m in messages.values()}
    assert len(prefixes) == 1  # the server's prompt cache evaluates it once per answer
    prefix = prefixes.pop()
    assert "[1] 实用新型" in prefix and "问题：什么是实用新型？" in prefix and "待评回答：实用新型是指" in prefix
    questions = {m[1]["content"].split("评审问题：")[1] for m in messages.values()}
    assert len(questions) == len(LLM_METRICS) and all("？只回答“是”或“否”。" in q for q in questions)
    with pytest.raises(KeyError):
        judge_llm.yes_no_messages(INPUTS, "mrr@k")


class YesNoLlm:
    """Our LlmClient's top_logprobs: P(是) by metric question; a question
    listed in ``fail`` raises, one in ``mute`` answers neither yes nor no."""

    enabled = True

    def __init__(self, p_yes: dict[str, float], fail: set[str] = frozenset(), mute: set[str] = frozenset()) -> None:
        self.by_question = {m.llm_question: m.name for m in METRICS if m.llm}
        self.p_yes, self.fail, self.mute = p_yes, fail, mute
        self.calls: list[str] = []

    async def top_logprobs(self, messages, top_logprobs=10, max_tokens=1, timeout=None, purpose="score"):
        question = messages[1]["content"].split("评审问题：")[1].split("只回答")[0]
        name = self.by_question[question]
        self.calls.append(name)
        if name in self.fail:
            raise LlmError("timeout", "no answer")
        if name in self.mute:
            return [[("嗯", 0.0)]]
        p = self.p_yes[name]
        return [[("是", math.log(p * 0.9)), ("否", math.log((1 - p) * 0.9)), ("好", math.log(0.1))]]


async def test_yes_no_judge_reads_a_yes_probability_per_metric():
    fake = YesNoLlm({"faithfulness": 0.9, "relevancy": 0.2, "hallucination": 0.6})
    scores = await judge_llm.judge_yes_no(fake, INPUTS, ["faithfulness", "relevancy", "hallucination"])
    assert scores == {"faithfulness": pytest.approx(0.9), "relevancy": pytest.approx(0.2), "hallucination": pytest.approx(0.6)}
    assert fake.calls == ["faithfulness", "relevancy", "hallucination"]  # one call each, in order


async def test_yes_no_judge_leaves_out_what_failed_and_raises_when_nothing_scored():
    fake = YesNoLlm({"faithfulness": 0.9, "relevancy": 0.2}, fail={"relevancy"}, mute={"readability"})
    assert await judge_llm.judge_yes_no(fake, INPUTS, ["faithfulness", "relevancy", "readability"]) == {
        "faithfulness": pytest.approx(0.9)}
    with pytest.raises(LlmError):
        await judge_llm.judge_yes_no(YesNoLlm({}, fail={"relevancy"}), INPUTS, ["relevancy"])
    with pytest.raises(ValueError):
        await judge_llm.judge_yes_no(YesNoLlm({}, mute={"readability"}), INPUTS, ["readability"])
