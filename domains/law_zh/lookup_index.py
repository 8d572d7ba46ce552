"""law_zh's lookup tables over the document graph, held in memory by the
graph retriever and matched against queries without a database round trip
(``DomainPack.lookup_index``).

Built from what the graph retriever stored (``DocIndex``): every article by
law and number, every defined term with its defining articles, and the
acts every penal article punishes. Three first-stage channels read it
(``DocIndex.hits`` by channel name):

- ``article_hits``: articles a query names by number ("刑法第二百三十四条").
- ``term_hits``: the defining articles of terms the query names, and of
  terms whose definitions share the query's words (a lay word such as 投案
  finds 自首, defined as "犯罪以后自动投案，如实供述自己的罪行的").
- ``offence_hits``: penal articles whose acts match the offences a case
  description names (罪名：诈骗, 构成故意伤害罪). When the graph retriever
  has attached the penal articles' vectors (``dense_documents``,
  ``attach_vectors``) and embeds the channel's ``probes`` (each name as
  "X罪"), a name is matched by meaning as well as by characters: 失火 finds
  第一百一十五条 (its 过失 paragraph), 非国家工作人员受贿 finds 第一百六十三条
  ("利用职务上的便利，索取他人财物或者非法收受他人财物"), names their texts
  do not spell out.

Scores are in [0, 1]; evidence says what matched.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from domains.facts import ArticleEntry, IndexHit, TermEntry
from domains.law_zh import references as lr
from domains.law_zh.lookups import article_mentions, offence_names
from services.common.names import GRAPH_ARTICLE, GRAPH_OFFENCE, GRAPH_TERM


_BIGRAM_CLEAN = re.compile(r"[^\u4e00-\u9fff]")
#: Words with numerals or article markers are references, not content.
_NUMERAL = re.compile(r"[0-9]|^第|[条款项]$|[零〇一二两三四五六七八九十百千万]{2,}|^[十百千]|[十百千]$")
#: Words too common in definitions to tie a lay question to a term.
_DEFINITION_STOP = frozenset("""
    的 是 指 或者 以及 和 与 及 其他 等 有关 依法 规定 本法 行为 活动 单位 个人 组织 人员 国家 进行 按照 依照 对 在 中
    包括 具有 用于 所 为 由 从事 相关 一定 一种 各种 以上 以下 应当 可以 法律 行政法规
""".split())


def _bigrams(text: str) -> set[str]:
    text = _BIGRAM_CLEAN.sub("", text)
    return {text[i:i + 2] for i in range(len(text) - 1)}


def offence_match(name: str, acts: list[str] | list[set[str]]) -> float:
    """How well an offence name matches a penal article's acts (texts, or
    their character-bigram sets), in [0, 1]: over the acts, the best of
    (share of the name's character bigrams the act holds) + 0.3 x (share of
    the act's bigrams the name holds), plus 0.2 for the article's first
    act, divided by 1.5."""
    name_bigrams = _bigrams(name)
    if not name_bigrams:
        return 0.0
    best = 0.0
    for i, act in enumerate(acts):
        act_bigrams = act if isinstance(act, set) else _bigrams(act)
        if not act_bigrams:
            continue
        shared = len(name_bigrams & act_bigrams)
        score = shared / len(name_bigrams) + 0.3 * shared / len(act_bigrams) + (0.2 if i == 0 else 0.0)
        best = max(best, score)
    return min(1.0, best / 1.5)


def _min_max(values: np.ndarray) -> np.ndarray:
    span = float(values.max() - values.min()) if values.size else 0.0
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def offence_scores(name_bigram_scores: np.ndarray, name_cosines: np.ndarray | None,
                   valid: np.ndarray | None = None) -> np.ndarray:
    """Scores in [0, 1] of every penal article for one offence name: its
    ``offence_match`` scores alone, or, given the name's cosines to the
    articles' vectors, the mean of those and the cosines min-max scaled over
    the articles whose vectors are ``valid`` (the closest article 1, the
    farthest 0; an article without a usable vector gets 0 for meaning and
    does not set the scale).

    Measured on the 171 law facts dev questions (``bench/offence_dense_probe.py``,
    e5onnx): the gold article first among 377 penal articles for 109 by
    characters alone, 122 with the mean; in the top 10 for 135 and 149.
    """
    if name_cosines is None:
        return name_bigram_scores
    valid = np.ones(len(name_cosines), dtype=bool) if valid is None else valid
    meaning = np.zeros(len(name_cosines))
    if valid.any():
        meaning[valid] = _min_max(name_cosines[valid])
    return (name_bigram_scores + meaning) / 2.0


class DocIndex:
    """Articles, terms and offences of the document graph, for lookups.

    Args:
        articles: every stored article.
        terms: every defined term.
        offences: (document id, first chunk id, acts) of every penal article
            outside amending acts.
        word_tokens: maps a definition to its content words (the shared
            tokenizer, so definitions and query keywords are cut alike).
        version: the GraphMeta version it was built from.
    """

    def __init__(self, articles: Iterable[ArticleEntry], terms: Iterable[TermEntry],
                 offences: Iterable[tuple[str, str, list[str]]], word_tokens, version: int = 0) -> None:
        self.version = version
        self.by_key: dict[tuple[str, str], list[ArticleEntry]] = defaultdict(list)
        for a in articles:
            self.by_key[(a.law, a.article)].append(a)
        self.laws = sorted({law for law, _ in self.by_key}, key=len, reverse=True)
        self._law_set = set(self.laws)
        self.terms = list(terms)
        # Laws defining each term name (one law counts once, whatever the
        # number of collections holding it).
        laws_of: dict[str, set[str]] = defaultdict(set)
        for t in self.terms:
            t.words = frozenset(w for w in word_tokens(t.definition)
                                if len(w) >= 2 and w not in _DEFINITION_STOP and not _NUMERAL.search(w))
            laws_of[t.name].add(t.law)
        self._term_laws = {name: len(laws) for name, laws in laws_of.items()}
        # Document frequency of definition words, for idf weights.
        df: dict[str, int] = defaultdict(int)
        for t in self.terms:
            for w in t.words:
                df[w] += 1
        n = max(1, len(self.terms))
        self._idf = {w: math.log(1 + n / c) for w, c in df.items()}
        self.offences = [(doc, chunk, acts) for doc, chunk, acts in offences if acts]
        self._act_bigrams = [[_bigrams(a) for a in acts] for _, _, acts in self.offences]
        #: Unit vectors of the penal articles (rows as ``dense_documents``),
        #: once the graph retriever attached them; None until then.
        self.offence_vectors: np.ndarray | None = None
        self._usable_rows: np.ndarray | None = None
        # Definition word -> terms whose definitions hold it (lay matching).
        self._by_word: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(self.terms):
            for w in t.words:
                self._by_word[w].append(i)
        self._total_idf = [sum(self._idf.get(w, 0.0) for w in t.words) for t in self.terms]

    def hits(self, channel: str, query: str, keywords: list[str], limit: int,
             probe_vectors: np.ndarray | None = None) -> list[IndexHit]:
        """The lookup of ``channel`` (graph.article, graph.term or
        graph.offence), best first, at most ``limit``; [] for another
        channel. ``probe_vectors``: query-side vectors of ``probes(channel,
        query)``, one row each, or None (match by characters only)."""
        if channel == GRAPH_ARTICLE:
            return self.article_hits(query, limit)
        if channel == GRAPH_TERM:
            return self.term_hits(query, keywords, limit)
        if channel == GRAPH_OFFENCE:
            return self.offence_hits(query, limit, probe_vectors=probe_vectors)
        return []

    # -- dense matching (vectors from the graph retriever) ---------------------

    @property
    def dense_documents(self) -> list[str]:
        """Document ids whose first chunk's passage-side vector the index
        wants (``attach_vectors``): every penal article, in order."""
        return [doc for doc, _, _ in self.offences]

    @property
    def vectors_attached(self) -> bool:
        """Whether ``attach_vectors`` has run since the table was built."""
        return self.offence_vectors is not None

    def attach_vectors(self, vectors: np.ndarray | None) -> None:
        """Keeps the unit vectors of ``dense_documents`` (one row each, in
        that order; a zero row for a document whose text was not found: it
        is matched by characters only). None drops them (the lookups match
        by characters until the next attach).

        Raises:
            ValueError: the row count differs from ``dense_documents``.
        """
        if vectors is None:
            self.offence_vectors = self._usable_rows = None
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(self.offences):
            raise ValueError(f"{vectors.shape} vectors for {len(self.offences)} penal articles")
        usable = np.isfinite(vectors).all(axis=1) & (np.abs(vectors).sum(axis=1) > 0)
        self.offence_vectors = np.where(usable[:, None], vectors, 0.0).astype(np.float32)
        self._usable_rows = usable

    def probes(self, channel: str, query: str) -> list[str]:
        """Texts of ``query`` to embed query-side for ``channel``: each
        offence name the query names, as "X罪", for graph.offence once
        vectors are attached; [] otherwise."""
        if channel != GRAPH_OFFENCE or self.offence_vectors is None:
            return []
        return [name if name.endswith("罪") else name + "罪" for name in offence_names(query)]

    @property
    def size(self) -> tuple[int, int, int]:
        """(articles, terms, penal articles)."""
        return sum(len(v) for v in self.by_key.values()), len(self.terms), len(self.offences)

    # -- articles ----------------------------------------------------------

    def article_hits(self, query: str, limit: int = 10) -> list[IndexHit]:
        """Articles the query names with their law: "刑法第二百三十四条",
        "《民法典》第1165条", "生态环境法典第一千二百三十七条". The law is a
        bracketed name or the longest stored law key that the text right
        before the number ends with; an article of a list ("第三条、第五条")
        keeps the law of the one before; a number with no law is skipped.
        Current versions score 1.0, others 0.9."""
        query = lr.normalize(query)
        hits: list[IndexHit] = []
        seen: set[str] = set()
        law: str | None = None
        previous_end = 0
        for ref in article_mentions(query):
            named = ref.law if ref.law in self._law_set else self._law_ending(query[max(0, ref.start - 40):ref.start])
            between = query[previous_end:ref.start]
            if named is not None:
                law = named
            elif law is not None and len(between) > 3 and ref.start > previous_end:
                law = None
            previous_end = ref.end
            if law is None:
                continue
            for entry in self.by_key.get((law, ref.article), []):
                if entry.doc_id not in seen:
                    seen.add(entry.doc_id)
                    hits.append(IndexHit(entry.doc_id, entry.first_chunk, 1.0 if entry.current else 0.9,
                                         f"article:{law}第{ref.article}条"))
        return hits[:limit]

    def _law_ending(self, text: str) -> str | None:
        text = text.rstrip(" 的之》")
        return next((k for k in self.laws if text.endswith(k)), None)

    # -- terms ---------------------------------------------------------------

    def term_hits(self, query: str, keywords: list[str], limit: int = 10, lay_limit: int = 5,
                  lay_min: float = 0.35) -> list[IndexHit]:
        """Defining articles of terms in the query.

        A term named in the query (its name, at least two characters, is a
        substring) scores ``min(1, len(name) / 4)`` divided by the number of
        laws defining that name; evidence ``term:<name>``. A term whose
        definition's content words the query's ``keywords`` cover (idf-
        weighted share >= ``lay_min``) scores 0.5 x that share; evidence
        ``lay:<name>(<shared words>)``; at most ``lay_limit`` such terms.
        A current defining article wins over a historical one of the same
        term.
        """
        scored: dict[str, IndexHit] = {}

        def add(term: TermEntry, score: float, evidence: str) -> None:
            definers = sorted(term.definers, key=lambda d: (not d[2], d[0]))
            if not definers:
                return
            doc, chunk, _ = definers[0]
            current = scored.get(doc)
            if current is None or score > current.score:
                scored[doc] = IndexHit(doc, chunk, round(score, 4), evidence)

        normalized = lr.normalize(query)
        for term in self.terms:
            if len(term.name) >= 2 and term.name in normalized:
                add(term, min(1.0, len(term.name) / 4) / self._term_laws[term.name], f"term:{term.name}")
        shared_by_term: dict[int, list[str]] = defaultdict(list)
        for word in {k for k in keywords if len(k) >= 2}:
            for i in self._by_word.get(word, ()):
                shared_by_term[i].append(word)
        lay: list[tuple[float, TermEntry, list[str]]] = []
        for i, shared in shared_by_term.items():
            term, total = self.terms[i], self._total_idf[i]
            if term.name in normalized or not total:
                continue
            share = sum(self._idf.get(w, 0.0) for w in shared) / total
            if share >= lay_min:
                lay.append((share, term, shared))
        lay.sort(key=lambda x: (-x[0], x[1].name))
        for share, term, shared in lay[:lay_limit]:
            add(term, 0.5 * share, f"lay:{term.name}({' '.join(sorted(shared))})")
        return sorted(scored.values(), key=lambda h: (-h.score, h.doc_id))[:limit]

    def lay_terms(self, query: str, keywords: list[str], limit: int = 5, lay_min: float = 0.35) -> list[str]:
        """Names of the terms ``term_hits`` maps a lay question to (terms
        the query does not name whose definitions it covers), best first."""
        return [h.evidence.split(":", 1)[1].split("(", 1)[0]
                for h in self.term_hits(query, keywords, limit=limit * 4, lay_limit=limit, lay_min=lay_min)
                if h.evidence.startswith("lay:")][:limit]

    # -- offences ------------------------------------------------------------

    def offence_hits(self, query: str, limit: int = 10, min_score: float = 0.4,
                     probe_vectors: np.ndarray | None = None) -> list[IndexHit]:
        """Penal articles for the offences a case description names
        (``offence_names``), scored by ``offence_scores`` (best over the
        names; by meaning too when ``probe_vectors``, the vectors of
        ``probes``, and the articles' vectors are both there and agree in
        shape: one row per name, the articles' dimension), at least
        ``min_score``; [] when the query names none."""
        names = offence_names(query)
        if not names or not self.offences:
            return []
        dense = None
        probe_vectors = None if probe_vectors is None else np.asarray(probe_vectors, dtype=np.float32)
        if (probe_vectors is not None and self.offence_vectors is not None and probe_vectors.ndim == 2
                and probe_vectors.shape == (len(names), self.offence_vectors.shape[1])):
            dense = probe_vectors @ self.offence_vectors.T
            # A probe that is not a usable vector (zeros, NaN) is matched by characters.
            probe_ok = np.isfinite(probe_vectors).all(axis=1) & (np.abs(probe_vectors).sum(axis=1) > 0)
        best = np.zeros(len(self.offences))
        best_name = [""] * len(self.offences)
        for n, name in enumerate(names):
            chars = np.array([offence_match(name, acts) for acts in self._act_bigrams])
            cosines = None if dense is None or not probe_ok[n] else dense[n]
            scores = offence_scores(chars, cosines, self._usable_rows)
            for i in np.flatnonzero(scores > best):
                best[i], best_name[i] = scores[i], name
        hits = [IndexHit(doc, chunk, round(float(best[i]), 4), f"offence:{best_name[i]}")
                for i, (doc, chunk, _) in enumerate(self.offences) if best[i] >= min_score]
        hits.sort(key=lambda h: (-h.score, h.doc_id))
        return hits[:limit]
