"""Pure rules of answer generation: the grounded prompt over numbered
sources, answer cleaning (citations without a source and leaked
JSON/markdown fences removed and counted) and reading the packed sources
back out of a context. The extractive answer (no LLM) is
``services.gateway.answer.extractive``; the LLM call itself is
``services.gateway.answer.generator``."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from domains.pack import AnswerPrompt
from services.common.packed_context import join_blocks, split_blocks
from services.common.text import CITATION, TRUNCATION_MARK, truncate_at_boundary

#: The general prompt, for collections whose domain pack brings none
#: (DomainPack.answer_prompt). The instruction sits after the question: small
#: local models (Qwen2.5 0.5B) otherwise answer with a bare "[1]".
GENERAL_PROMPT = AnswerPrompt(
    system_zh=("你是严谨的问答助手。只依据给出的编号资料回答，不要使用资料以外的知识；资料没有写到的内容不要回答，"
               "资料不足时直说。每句话后用[n]标注它依据的资料编号，只标注确实写有该内容的资料。不要输出 JSON 或代码块。"),
    instruction_zh="请用一两句完整的中文句子回答，并在每句末用方括号标注所依据资料的编号，例如：……的期限为三年[2]。",
    system_en=("You are a careful assistant. Answer only from the numbered sources given, in English; do not use other "
               "knowledge, and say so when the sources are not enough. End each sentence with [n], the number of the "
               "source that states it. No JSON, no code blocks."),
    instruction_en=("Answer in one or two complete English sentences, each ending with its source number, "
                    "e.g.: The term is three years [2]."),
)
_CJK = re.compile(r"[\u3400-\u9fff]")

_FENCE = re.compile(r"```[a-zA-Z]*\n?|```")


#: Characters of the question put in the prompt: a pasted case description
#: (up to 10,000 characters) is cut at a sentence end so the packed sources
#: keep their room in a small model's context window.
MAX_PROMPT_QUESTION_CHARS = 1500


def build_messages(question: str, context: str, prompt: AnswerPrompt | None = None,
                   worked_example: bool = True) -> list[dict[str, str]]:
    """Chat messages for a grounded answer over the packed ``context``
    (whose items are numbered [n], each headed by its title and headings),
    with ``prompt`` (the searched collections' domain pack's, else
    GENERAL_PROMPT), in the question's language: Chinese when it has CJK
    characters, else English. The prompt's worked example, when it has one
    and ``worked_example`` is on, comes first as a user turn and the
    assistant's answer to it. The
    question is cut to MAX_PROMPT_QUESTION_CHARS characters at a sentence
    end.

    Returns:
        [system, (example user, example assistant,) user] messages."""
    prompt = prompt or GENERAL_PROMPT
    question, _ = truncate_at_boundary(question, MAX_PROMPT_QUESTION_CHARS)
    chinese = bool(_CJK.search(question) or not question.strip())
    system, example = (prompt.system_zh, prompt.example_zh) if chinese else (prompt.system_en, prompt.example_en)

    def turn(sources: str, asked: str) -> dict[str, str]:
        if chinese:
            return {"role": "user", "content": f"资料：\n{sources}\n\n问题：{asked}\n{prompt.instruction_zh}"}
        return {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {asked}\n{prompt.instruction_en}"}

    messages = [{"role": "system", "content": system}]
    if example is not None and worked_example:
        messages += [turn(example.context, example.question), {"role": "assistant", "content": example.answer}]
    return messages + [turn(context, question)]


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


def _blocks(context: str, labels: list[str] | None) -> list[tuple[str, list[str]]]:
    """The blocks of a packed context (``packed_context.split_blocks``): with
    ``labels`` (the sources' header labels in citation order) a header must
    carry its source's label, unless that does not find every source (a
    fuser that writes other headers): then the numbers alone decide."""
    if labels:
        labelled = split_blocks(context, lambda n, label: n <= len(labels) and label == labels[n - 1])
        if len(labelled) == len(labels):
            return labelled
    return split_blocks(context)


def first_sources(context: str, n: int, labels: list[str] | None = None) -> str:
    """The packed ``context`` up to and including its source [n] (the whole
    context when it holds n sources or fewer, or when n < 1). ``labels``: the
    sources' header labels in citation order, when known (``_blocks``)."""
    blocks = _blocks(context, labels)
    if n < 1 or len(blocks) <= n:
        return context
    return join_blocks(blocks[:n]).rstrip()


def packed_texts(context: str, n_sources: int, labels: list[str] | None = None,
                 drop_cut_clause: bool = False) -> list[str] | None:
    """The text of each numbered block "[n] label\ntext" of a packed
    context, as the reader (and the LLM) saw it ([TRUNCATED] removed); None
    when the context does not hold exactly ``n_sources`` blocks numbered 1..n.
    ``labels``: the sources' header labels in citation order, when known
    (``_blocks``). ``drop_cut_clause`` (for quoting): a text the packer cut
    right after a "；" loses that last clause, back to its last full stop or
    line break, since the rest of its sentence was cut off and half a rule
    can read as its opposite ("金卡会员可免费延迟至16:00；" without "节假日期间不
    适用此项优惠。")."""
    blocks = _blocks(context, labels)
    if len(blocks) != n_sources:
        return None
    texts = ["\n".join(lines).strip() for _, lines in blocks]
    return [_without_cut_clause(t) if drop_cut_clause else t.replace(TRUNCATION_MARK, "").strip() for t in texts]


def _without_cut_clause(text: str) -> str:
    if not text.endswith(TRUNCATION_MARK):
        return text.replace(TRUNCATION_MARK, "").strip()
    body = text[: -len(TRUNCATION_MARK)].rstrip()
    if body.endswith(("；", ";")):
        stop = max(body.rfind(ch) for ch in "。！？!?\n")
        if stop > 0:
            body = body[: stop + 1]
    return body.replace(TRUNCATION_MARK, "").strip()
