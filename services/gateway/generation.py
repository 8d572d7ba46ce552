"""Pure rules of answer generation: the grounded prompt over numbered
sources, answer cleaning (citations without a source and leaked
JSON/markdown fences removed and counted) and the extractive answer. The
LLM call itself is ``services.gateway.generator``."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from services.common.text import CITATION, split_sentences, truncate_at_boundary

SYSTEM_PROMPT = "你是严谨的法律问答助手，只依据给出的编号资料回答；资料不足时直说。不要输出 JSON 或代码块。"
# The instruction sits after the question: small local models (Qwen2.5 0.5B)
# otherwise answer with a bare "[1]". The example is neutral on purpose.
ANSWER_INSTRUCTION = "请用一两句完整的中文句子回答，并在句末用方括号标注所依据资料的编号，例如：某某行为应当承担相应责任[2]。"
EXTRACTIVE_LABEL = "（抽取式答案：未使用大模型，以下句子摘自检索到的资料）"

_FENCE = re.compile(r"```[a-zA-Z]*\n?|```")


#: Characters of the question put in the prompt: a pasted case description
#: (up to 10,000 characters) is cut at a sentence end so the packed sources
#: keep their room in a small model's context window.
MAX_PROMPT_QUESTION_CHARS = 1500


def build_messages(question: str, context: str) -> list[dict[str, str]]:
    """Chat messages for a grounded answer over the packed ``context``
    (whose items are numbered [n]); the question is cut to
    MAX_PROMPT_QUESTION_CHARS characters at a sentence end."""
    question, _ = truncate_at_boundary(question, MAX_PROMPT_QUESTION_CHARS)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"资料：\n{context}\n\n问题：{question}\n{ANSWER_INSTRUCTION}"},
    ]


@dataclass(slots=True)
class CleanedAnswer:
    """An answer after post-processing."""

    text: str
    invalid_citations_removed: int
    fences_removed: int


def clean_answer(answer: str, n_sources: int) -> CleanedAnswer:
    """Strips code fences and a JSON wrapper ({"answer": ...}), and removes
    citations [n] with n outside 1..n_sources, counting both."""
    fences = len(_FENCE.findall(answer))
    text = _FENCE.sub("", answer)
    unwrapped = _unwrap_json(text)
    if unwrapped is not None:
        text, fences = unwrapped, fences + 1
    removed = 0

    def keep_or_drop(match: re.Match) -> str:
        nonlocal removed
        if 1 <= int(match.group(1)) <= n_sources:
            return match.group(0)
        removed += 1
        return ""

    text = CITATION.sub(keep_or_drop, text).strip()
    return CleanedAnswer(text, removed, fences)


def _unwrap_json(text: str) -> str | None:
    """The answer string inside a JSON object the model wrapped it in
    ({"answer": ...}, {"回答": ...}, ...), else None."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in ("answer", "回答", "答案", "content", "text"):
            if isinstance(data.get(key), str):
                return data[key]
    return None


def extractive_answer(texts: list[str], max_sources: int = 3, max_chars_per_source: int = 160) -> str:
    """An answer quoted from the first ``max_sources`` packed texts: the
    leading whole sentences of each, up to ``max_chars_per_source``
    characters, each followed by its citation [n]."""
    lines = [EXTRACTIVE_LABEL]
    for number, text in enumerate(texts[:max_sources], start=1):
        quote = ""
        for sentence in split_sentences(text.strip()):
            if quote and len(quote) + len(sentence) > max_chars_per_source:
                break
            quote += sentence
        quote = quote.strip()[:max_chars_per_source]
        if quote:
            lines.append(f"{quote} [{number}]")
    return "\n".join(lines)
