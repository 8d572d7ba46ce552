"""The LLM judge over an OpenAI-compatible endpoint, in one of two modes.

``yes_no`` (the default): one yes-or-no question per metric
(``MetricSpec.llm_question``) after a shared prefix (sources, question,
reference answer, answer); the score is P(是) / (P(是) + P(否)) read from
the first token's log-probabilities. It needs an endpoint that returns
``top_logprobs`` (llama.cpp server, vLLM, OpenAI). The prefix is the same
for every metric, so a server with a prompt cache (llama.cpp) evaluates it
once per answer: measured with qwen1.5b on 2 cores, about 15 s for the
prefix and about 1 s per metric after it. The probability is not sampled,
so one pass replaces the reference's rounds.

``json`` (the reference's ``_llmJudgeOnce``): a single chat call asks for
every metric at once as a JSON object {metric: score in [0, 1]}; the
servicer runs it ``rounds`` times, each with its own sampling seed, and
``scoring.judge`` takes the median. Measured with qwen1.5b it gave one
value to every answer metric of an answer and the same value to an
off-topic or falsified answer (docs/benchmarks.md, "The LLM judge"), so it
is kept for endpoints without log-probabilities.

Prompts and reply parsing are pure (``build_messages``, ``parse_scores``,
``yes_no_messages``); ``judge_round`` and ``judge_yes_no`` add the calls
through the shared LLM client (services.common.llm).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from services.common.llm import LlmClient, yes_probability
from services.judge.scoring import METRICS, JudgeInputs

_DEFINITIONS = {m.name: m.llm_definition for m in METRICS if m.llm}
_QUESTIONS = {m.name: m.llm_question for m in METRICS if m.llm}
#: Metrics the JSON mode asks for in the sense a small model reads their
#: name (how much hallucination), stored as 1 - reply so that 1 is best.
INVERTED = frozenset({"hallucination"})
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
#: Alternatives read per yes/no verdict.
TOP_LOGPROBS = 10

SYSTEM_PROMPT = (
    "你是检索增强问答系统的严格评审。按给出的指标逐项打分，每项是 0 到 1 之间的小数。"
    "只输出一个 JSON 对象，键为指标名，值为分数，不要输出其他内容。"
)
YES_NO_SYSTEM_PROMPT = "你是检索增强问答系统的严格评审。只回答“是”或“否”。"


def _numbered_contexts(inputs: JudgeInputs, max_context_chars: int) -> str:
    contexts, used = [], 0
    for number, text in enumerate(inputs.contexts, start=1):
        room = max_context_chars - used
        if room <= 0:
            break
        contexts.append(f"[{number}] {text[:room]}")
        used += min(len(text), room)
    return "\n".join(contexts) or "（无）"


def build_messages(inputs: JudgeInputs, names: list[str], max_context_chars: int = 6000) -> list[dict[str, str]]:
    """JSON mode: chat messages asking for ``names`` scored on ``inputs``;
    contexts are numbered [n] and cut to ``max_context_chars`` characters
    in total. No example score is shown (a small model copies it)."""
    metrics = "\n".join(f"- {n}: {_DEFINITIONS.get(n, n)}" for n in names)
    parts = [f"问题：{inputs.question}", "资料：\n" + _numbered_contexts(inputs, max_context_chars)]
    if inputs.reference_answer.strip():
        parts.append(f"参考答案：{inputs.reference_answer}")
    parts.append(f"待评回答：{inputs.answer or '（无）'}")
    parts.append(f"指标：\n{metrics}\n\n输出一个 JSON 对象，键为上面的每个指标名，值为你给它的分数。")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_scores(reply: str, names: list[str]) -> dict[str, float]:
    """JSON mode: scores for ``names`` from the first JSON object in
    ``reply``; values that are not numbers are skipped, numbers are clipped
    to [0, 1], metrics in ``INVERTED`` are stored as 1 - value.

    Raises:
        ValueError: when the reply holds no JSON object.
    """
    match = _OBJECT.search(reply or "")
    if not match:
        raise ValueError("the judge reply holds no JSON object")
    data = json.loads(match.group(0))
    if not isinstance(data, Mapping):
        raise ValueError("the judge reply is not a JSON object")
    out = {}
    for name in names:
        value = data.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            clipped = min(1.0, max(0.0, float(value)))
            out[name] = 1.0 - clipped if name in INVERTED else clipped
    return out


async def judge_round(llm: LlmClient, inputs: JudgeInputs, names: list[str], timeout: float | None = None,
                      seed: int | None = None) -> dict[str, float]:
    """JSON mode: one round over the shared OpenAI-compatible client
    (timeouts and bounded retries on 429/5xx are the client's):
    {metric: score}. ``seed`` is sent as the request's sampling seed: a
    llama.cpp server otherwise samples every round of the same prompt alike.

    Raises:
        services.common.llm.LlmError: the call failed or timed out.
        ValueError: the reply holds no JSON object.
    """
    extra = {"seed": seed} if seed is not None else None
    reply = await llm.complete(build_messages(inputs, names), max_tokens=400, timeout=timeout, purpose="judge", extra=extra)
    return parse_scores(reply, names)


def yes_no_messages(inputs: JudgeInputs, name: str, max_context_chars: int = 6000) -> list[dict[str, str]]:
    """Yes-no mode: the messages asking ``name``'s question about
    ``inputs``. Everything before the question is the same for every
    metric of one answer (a server's prompt cache evaluates it once).

    Raises:
        KeyError: ``name`` is not a metric the LLM judges.
    """
    question = _QUESTIONS[name]
    parts = ["资料：\n" + _numbered_contexts(inputs, max_context_chars), f"问题：{inputs.question}"]
    if inputs.reference_answer.strip():
        parts.append(f"参考答案：{inputs.reference_answer}")
    parts.append(f"待评回答：{inputs.answer or '（无）'}")
    parts.append(f"评审问题：{question}只回答“是”或“否”。")
    return [{"role": "system", "content": YES_NO_SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


async def judge_yes_no(llm: LlmClient, inputs: JudgeInputs, names: list[str], timeout: float | None = None) -> dict[str, float]:
    """Yes-no mode: {metric: P(yes)} for ``names``, one call per metric,
    one after another (a local server serves one request at a time and
    reuses the shared prefix). A metric whose reply has neither a yes nor
    a no among its first token's alternatives, or whose call failed, is
    left out while others succeed.

    Raises:
        services.common.llm.LlmError: every call failed (the first error).
        ValueError: no call gave a yes or a no.
    """
    scores: dict[str, float] = {}
    first_error: Exception | None = None
    for name in names:
        try:
            tokens = await llm.top_logprobs(yes_no_messages(inputs, name), top_logprobs=TOP_LOGPROBS, max_tokens=1,
                                            timeout=timeout, purpose="judge")
        except Exception as err:  # noqa: BLE001 - one metric's failure leaves the others
            first_error = first_error or err
            continue
        probability = yes_probability(tokens[0]) if tokens else None
        if probability is not None:
            scores[name] = probability
    if not scores:
        if first_error is not None:
            raise first_error
        raise ValueError("the judge gave neither a yes nor a no for any metric")
    return scores
