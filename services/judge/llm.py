"""One LLM judgement round over an OpenAI-compatible endpoint (the reference's
``_llmJudgeOnce``): a single chat call asks for every requested metric at
once and returns {metric: score in [0, 1]}. ``scoring.median_of_rounds``
runs it three times and takes the median.

The prompt and the reply parsing are pure (``build_messages``,
``parse_scores``); ``OpenAIJudge`` adds the network call through the
``openai`` client.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

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


class OpenAIJudge:
    """Callable LLM round over an OpenAI-compatible chat endpoint.

    Args:
        base_url / api_key / model: the endpoint (vLLM, Ollama, DeepSeek, ...).
        timeout: seconds per call. temperature: sampling temperature (> 0 so
            that three rounds are three independent judgements).
    """

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float = 60.0, temperature: float = 0.3) -> None:
        from openai import OpenAI

        self._client = OpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=0)
        self._model = model
        self._temperature = temperature

    def __call__(self, inputs: JudgeInputs, names: list[str]) -> dict[str, float]:
        """One round: {metric: score}. Raises on a transport error or an
        unreadable reply (the round then counts as failed)."""
        reply = self._client.chat.completions.create(
            model=self._model, messages=build_messages(inputs, names), temperature=self._temperature, max_tokens=400,
        )
        return parse_scores(reply.choices[0].message.content or "", names)
