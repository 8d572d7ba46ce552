"""LLM rewrites of a query: expanded query, HyDE passage, sub-queries.

Prompts and parsers are pure functions (tested directly); ``rewrite`` calls
the shared LLM client and falls back to rules when there is no LLM or it
fails. Sources: MarxSphere's LLM synonym expansion and HyDE (the MarxSphere design (docs/references.md),
sections 1-2) and MetaSearch's sub-query expansion scored against the
original question (the MetaSearch design (docs/references.md)).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from domains.pack import RewritePrompts
from services.common.llm import LlmClient, LlmError
from services.common.text import normalize, strip_citations, truncate_at_boundary

EXPANDED_QUERY = "REWRITE_KIND_EXPANDED_QUERY"
HYDE = "REWRITE_KIND_HYDE"
SUB_QUERIES = "REWRITE_KIND_SUB_QUERIES"

# Token caps per kind (the 0.5B local model writes ~20 tokens/s on 2 cores).
MAX_TOKENS = {EXPANDED_QUERY: 40, HYDE: 80, SUB_QUERIES: 64}
MAX_REWRITE_CHARS = 300

#: The general instructions, for collections whose domain pack brings none
#: (DomainPack.rewrite_prompts).
GENERAL_PROMPTS = RewritePrompts(
    system="你是中文检索助手。只输出要求的内容，不要解释，不要使用 JSON 或代码块。",
    expanded_query="把下面的问题改写成一个更完整的检索查询，补充同义词和相关术语，只输出一行查询。\n问题：{query}",
    hyde="请用资料原文的口吻写一段不超过120字的文字，直接回答下面的问题。只输出这段文字。\n问题：{query}",
)
_NUMBERING = re.compile(r"^\s*(?:[-*•·]|\d+[.、)）]|[（(]\d+[)）]|[一二三四五六七八九十]+[、.])\s*")
_FENCE = re.compile(r"```[a-zA-Z]*")


@dataclass(slots=True)
class RewriteResult:
    """Rewrites (text, cosine to the query or 0, origin "llm"/"rule"),
    whether the LLM produced them, and why not."""

    rewrites: list[tuple[str, float, str]]
    llm_used: bool
    fallback_reason: str


#: Characters of the question put in a rewrite prompt (a 10,000-character case
#: description is cut at a sentence end; the rewrite needs its gist only).
MAX_PROMPT_QUERY_CHARS = 1500


def build_messages(kind: str, query: str, context: str = "", n: int = 3,
                   prompts: RewritePrompts | None = None) -> list[dict[str, str]]:
    """Chat messages asking for one rewrite ``kind`` of ``query`` (cut to
    MAX_PROMPT_QUERY_CHARS characters at a sentence end), with ``prompts``
    (the searched collections' domain pack's, else GENERAL_PROMPTS).

    Raises:
        ValueError: an unknown ``kind``.
    """
    prompts = prompts or GENERAL_PROMPTS
    query, _ = truncate_at_boundary(query, MAX_PROMPT_QUERY_CHARS)
    if kind == EXPANDED_QUERY:
        user = prompts.expanded_query.format(query=query)
    elif kind == HYDE:
        user = prompts.hyde.format(query=query)
    elif kind == SUB_QUERIES:
        known = f"\n已知信息：{context[:300]}" if context.strip() else ""
        user = f"问题：{query}{known}\n为了更全面地回答该问题，请提出{n}个更具体的检索子问题，每行一个。"
    else:
        raise ValueError(kind)
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": user}]


def clean_line(text: str) -> str:
    """Strips fences, list numbering, quotes and labels like "查询：" from one line."""
    text = _FENCE.sub("", text).strip()
    text = _NUMBERING.sub("", text).strip()
    text = re.sub(r"^(?:改写后的)?(?:查询|子问题|问题|答案|回答)\s*[:：]\s*", "", text)
    return text.strip(" \"'“”‘’`").strip()


def parse_single(raw: str) -> str:
    """The first non-empty cleaned line (expanded query) or the whole cleaned
    text joined (HyDE), capped at MAX_REWRITE_CHARS."""
    lines = [clean_line(line) for line in raw.splitlines()]
    return " ".join(line for line in lines if line)[:MAX_REWRITE_CHARS]


def parse_sub_queries(raw: str, query: str, n: int) -> list[str]:
    """Up to ``n`` distinct sub-queries, one per line, numbering and [n]
    marks removed; the query itself (after normalisation) and lines under 4
    characters dropped."""
    out: list[str] = []
    same = normalize(query)
    for line in raw.splitlines():
        text = strip_citations(clean_line(line))[:MAX_REWRITE_CHARS].strip()
        if len(text) < 4 or normalize(text) == same or text in out:
            continue
        out.append(text)
    return out[:n]


def rule_expanded_query(query: str, keywords: list[str]) -> str:
    """The content keywords alone, space-separated (no-LLM fallback): the
    question words and stop words that dilute the query embedding are gone."""
    return " ".join(dict.fromkeys(k for k in keywords if k)).strip()


def rule_sub_queries(query: str, keywords: list[str], n: int) -> list[str]:
    """Keyword pairs as sub-queries (no-LLM fallback), in keyword order."""
    words = [k for k in dict.fromkeys(keywords) if len(k) >= 2]
    pairs = [f"{a} {b}" for i, a in enumerate(words) for b in words[i + 1:]]
    return (pairs or words)[:n]


def cosine_scores(query_vector: np.ndarray, vectors: np.ndarray) -> list[float]:
    """Cosine of each row of ``vectors`` to ``query_vector`` (unit vectors
    are assumed but not required)."""
    if len(vectors) == 0:
        return []
    q = query_vector / (np.linalg.norm(query_vector) or 1.0)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    return [float(x) for x in (vectors @ q) / norms]


async def rewrite(
    llm: LlmClient | None, kind: str, query: str, context: str, n: int, keywords: list[str], timeout: float,
    prompts: RewritePrompts | None = None,
) -> RewriteResult:
    """One rewrite request: the LLM when available (with ``prompts``, the
    domain pack's), else the rule fallback (HyDE has none). Scores are
    filled in by the caller (embedding)."""
    reason = "no LLM configured"
    if llm is not None and llm.enabled:
        try:
            raw = await llm.complete(build_messages(kind, query, context, n, prompts), MAX_TOKENS[kind], timeout,
                                     purpose=kind.removeprefix("REWRITE_KIND_").lower())
            if kind == SUB_QUERIES:
                texts = parse_sub_queries(raw, query, n)
            else:
                texts = [t for t in [parse_single(raw)] if t and t != query]
            if texts:
                return RewriteResult([(t, 0.0, "llm") for t in texts], True, "")
            reason = "LLM returned nothing usable"
        except LlmError as err:
            reason = str(err)
    if kind == EXPANDED_QUERY:
        text = rule_expanded_query(query, keywords)
        return RewriteResult([(text, 0.0, "rule")] if text and text != query else [], False, reason)
    if kind == SUB_QUERIES:
        return RewriteResult([(t, 0.0, "rule") for t in rule_sub_queries(query, keywords, n)], False, reason)
    return RewriteResult([], False, reason)
