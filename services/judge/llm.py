"""One LLM judgement round over an OpenAI-compatible endpoint (the reference's
``_llmJudgeOnce``): a single chat call asks for every requested metric at
once and returns {metric: score in [0, 1]}. The servicer runs it three
times; ``scoring.judge`` takes the median.

The prompt and the reply parsing are pure (``build_messages``,
``parse_scores``); ``judge_round`` adds the call through the shared LLM
client (services.common.llm).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from services.common.llm import LlmClient
from services.judge.scoring import METRICS, JudgeInputs

_DEFINITIONS = {m.name: m.llm_definition for m in METRICS if m.llm}
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

SYSTEM_PROMPT = (
    "你是检索增强问答系统的严格评审。按给出的指标逐项打分，每项是 0 到 1 之间的小数，1 最好。"
    "只输出一个 JSON 对象，键为指标名，值为分数，不要输出其他内容。"
)


def build_messages(inputs: JudgeInputs, names: list[str], max_context_chars: int = 6000) -> list[dict[str, str]]:
    """Chat messages asking for ``names`` scored on ``inputs``; contexts are
    numbered [n] and cut to ``max_context_chars`` characters in total."""
    contexts, used = [], 0
    for number, text in enumerate(inputs.contexts, start=1):
        room = max_context_chars - used
        if room <= 0:
            break
        contexts.append(f"[{number}] {text[:room]}")
        used += min(len(text), room)
    metrics = "\n".join(f"- {n}: {_DEFINITIONS.get(n, n)}" for n in names)
    parts = [f"问题：{inputs.question}", "资料：\n" + ("\n".join(contexts) or "（无）")]
    if inputs.reference_answer.strip():
        parts.append(f"参考答案：{inputs.reference_answer}")
    parts.append(f"待评回答：{inputs.answer or '（无）'}")
    parts.append(f"指标：\n{metrics}\n\n输出 JSON，例如 {{\"{names[0]}\": 0.8}}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_scores(reply: str, names: list[str]) -> dict[str, float]:
    """Scores for ``names`` from the first JSON object in ``reply``; values
    that are not numbers are skipped, numbers are clipped to [0, 1].

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
            out[name] = min(1.0, max(0.0, float(value)))
    return out


async def judge_round(llm: LlmClient, inputs: JudgeInputs, names: list[str], timeout: float | None = None) -> dict[str, float]:
    """One LLM round over the shared OpenAI-compatible client (timeouts and
    bounded retries on 429/5xx are the client's): {metric: score}.

    Raises:
        services.common.llm.LlmError: the call failed or timed out.
        ValueError: the reply holds no JSON object.
    """
    reply = await llm.complete(build_messages(inputs, names), max_tokens=400, timeout=timeout, purpose="judge")
    return parse_scores(reply, names)
