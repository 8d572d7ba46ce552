"""Candidate fusion and context packing, without gRPC.

- ``merge``: union of candidate lists by id, keeping every channel's score.
- ``rrf_scores`` / ``weighted_scores``: one score per candidate from its
  channel scores (RRF after Cormack et al. 2009, k=60 as in Haystack's
  DocumentJoiner; weighted = sum of weight x min-max normalised score, dense
  cosines shifted per writing system when documents of two are mixed).
- ``centred_weights``: where the retriever sent pg.centred (dense scores
  centred by writing system), pg.vector's raw cosines are not fused.
- ``cross_script_first``: the other writing system's best candidate goes
  first when it holds up against the question's own language, else into the
  first three; ``other_script_weights``: where every candidate is in the
  other system, pg.translated is fused as the keyword channel.
- ``pack_context``: per-source quotas of a character budget, each text cut at
  the nearest newline or sentence end and marked [TRUNCATED] (MarxSphere
  fuseResults V42, the MarxSphere design (docs/references.md) section 4);
  a candidate with a parent context (``Item.context_text``) is packed with
  it instead of its bare text.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from services.common import names
from services.common.codes import codes_in, squashed
from services.common.money import asks_price, states_price
from services.common.cross_lingual import Translated, word_coverage
from services.common.packed_context import source_label
from services.common.text import TRUNCATION_MARK, truncate_at_boundary

RRF_K = 60

# Source numbers follow graphmesh.common.v1.Source.
SOURCE_DOCUMENT_CHUNK = 1
SOURCE_PG_ENTITY = 2
SOURCE_GRAPH = 3
SOURCE_FULLTEXT = 4
SOURCE_ENTITY_NAME = 5

# MarxSphere fuseResults V42: Cognee 35%, PG 25%, Graphiti 25%, PG full-text
# 10%, entity names 5% of 6,000 characters (the MarxSphere design (docs/references.md) section 4).
DEFAULT_QUOTAS: dict[int, float] = {
    SOURCE_DOCUMENT_CHUNK: 0.35,
    SOURCE_PG_ENTITY: 0.25,
    SOURCE_GRAPH: 0.25,
    SOURCE_FULLTEXT: 0.10,
    SOURCE_ENTITY_NAME: 0.05,
}
DEFAULT_BUDGET_CHARS = 6000
PACKING_ORDER = (SOURCE_DOCUMENT_CHUNK, SOURCE_PG_ENTITY, SOURCE_FULLTEXT, SOURCE_GRAPH, SOURCE_ENTITY_NAME)


@dataclass(slots=True)
class Scored:
    """One channel's view of a candidate."""

    channel: str
    score: float
    rank: int
    evidence: str = ""


@dataclass(slots=True)
class Item:
    """A merged candidate: one id, every channel that found it."""

    id: str
    document_id: str
    title: str
    heading_path: list[str]
    text: str
    source: int
    ordinal: int = 0
    scores: list[Scored] = field(default_factory=list)
    embedding: list[float] = field(default_factory=list)
    fused: float = 0.0
    context_text: str = ""
    script: str = ""

    @property
    def packed_text(self) -> str:
        """What the context packs for this item: its parent context when it
        has one (Candidate.context_text), else its text."""
        return self.context_text or self.text


def merge(lists: list[list[Item]]) -> list[Item]:
    """Union of ``lists`` by id, in first-seen order. A candidate seen in
    several lists keeps all their channel scores (a channel reported twice
    keeps its best score); the first non-empty embedding, parent context and
    writing system are kept, and the source of the list that ranked it best wins."""
    merged: dict[str, Item] = {}
    for items in lists:
        for item in items:
            known = merged.get(item.id)
            if known is None:
                merged[item.id] = Item(
                    item.id, item.document_id, item.title, list(item.heading_path), item.text,
                    item.source, item.ordinal, list(item.scores), list(item.embedding),
                    context_text=item.context_text, script=item.script,
                )
                continue
            known.script = known.script or item.script
            by_channel = {s.channel: s for s in known.scores}
            for s in item.scores:
                if s.channel not in by_channel or s.score > by_channel[s.channel].score:
                    by_channel[s.channel] = s
            if _best_rank(item) < _best_rank(known):
                known.source = item.source
            known.scores = list(by_channel.values())
            if not known.embedding and item.embedding:
                known.embedding = list(item.embedding)
            if not known.context_text and item.context_text:
                known.context_text = item.context_text
    return list(merged.values())


def _best_rank(item: Item) -> int:
    return min((s.rank for s in item.scores), default=10**9)


def rrf_scores(items: list[Item], weights: dict[str, float], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: sum over channels of weight / (k + rank)."""
    return {
        it.id: sum(weights.get(s.channel, 1.0) / (k + s.rank) for s in it.scores if s.rank > 0)
        for it in items
    }


#: Channels whose scores are a bi-encoder's cosines to the question. A bi-encoder (e5-small) scores
#: any passage in the question's language above a relevant one in another (a Chinese question about
#: a station's English rules: 0.83-0.87 to every chunk of its one Chinese file), so where a fusion
#: mixes documents of two writing systems (Item.script) these are shifted per system first
#: (``script_centred``; docs/benchmarks.md, "Dense similarity within each writing system").
DENSE_CHANNELS = frozenset({names.PG_VECTOR, names.PG_HYDE, names.SENTENCE_MAXSIM})
#: Share of the gap between two writing systems' median scores that the lower system is raised by.
#: The whole gap (or the gap between their five best) put first the English passage that answers a
#: Chinese question, but also brought 1.1 (2.6) chunks of the other language into the top five of
#: questions answered in their own; half the median gap keeps most of the gain and next to none of
#: those (bench/script_centring_study.py: four variants compared on the mixed trial sets, this one
#: chosen among them; GraphMesh's constant).
SCRIPT_SHIFT_SHARE = 0.5


def script_centred(items: list[Item], channel: str) -> dict[str, float]:
    """{item id: score} of ``channel`` with each writing system's scores
    raised by SCRIPT_SHIFT_SHARE of the gap between the highest system's
    median score among ``items`` and its own (the question's background
    similarity to each language); unchanged when the channel's items are of
    one system. Items of no known system (script "") keep their score."""
    raw = {it.id: (it.script, s.score) for it in items for s in it.scores if s.channel == channel}
    by_script: dict[str, list[float]] = defaultdict(list)
    for script, score in raw.values():
        if script:
            by_script[script].append(score)
    if len(by_script) < 2:
        return {i: score for i, (_, score) in raw.items()}
    centre = {script: float(np.median(v)) for script, v in by_script.items()}
    top = max(centre.values())
    return {i: score + (SCRIPT_SHIFT_SHARE * (top - centre[script]) if script else 0.0) for i, (script, score) in raw.items()}


def weighted_scores(items: list[Item], weights: dict[str, float]) -> dict[str, float]:
    """Sum over channels of weight x the score min-max normalised within the
    channel (a channel whose scores are all equal contributes 1.0 each);
    the scores of DENSE_CHANNELS shifted per writing system first
    (``script_centred``) when the items mix two and none carries a
    pg.centred score (then the retriever and the gateway have centred the
    dense scores by the systems' centroids already: ``centred_weights``)."""
    mixed = len({it.script for it in items if it.script}) > 1 and not _carries(items, names.PG_CENTRED)
    centred = {c: script_centred(items, c) for c in DENSE_CHANNELS} if mixed else {}

    def score(it: Item, s: Scored) -> float:
        if s.channel == names.PG_TRANSLATED:  # its score is a cosine kept for cross_script_first; its order is its own
            return 1.0 / s.rank if s.rank > 0 else 0.0
        return centred[s.channel].get(it.id, s.score) if s.channel in centred else s.score

    by_channel: dict[str, list[float]] = defaultdict(list)
    for it in items:
        for s in it.scores:
            by_channel[s.channel].append(score(it, s))
    bounds = {c: (min(v), max(v)) for c, v in by_channel.items()}
    fused = {}
    for it in items:
        total = 0.0
        for s in it.scores:
            low, high = bounds[s.channel]
            norm = 1.0 if math.isclose(high, low) else (score(it, s) - low) / (high - low)
            total += weights.get(s.channel, 1.0) * norm
        fused[it.id] = total
    return fused


#: pg.translated candidates (by the channel's own rank) that may go first.
CROSS_SCRIPT_CANDIDATES = 3
#: How much more of the query's words (``word_coverage``) such a candidate must hold than the fused first.
CROSS_SCRIPT_MARGIN = 0.05
#: Fused candidates the words' inverse frequencies are counted over, besides the pg.translated ones.
CROSS_SCRIPT_POOL = 40
#: With the rule on (``FuserSettings.cross_script_cosine_gap``; off by default), the other language's best
#: passage goes first when its cosine to the query is at most this much below the best passage's in the
#: question's own language: e5-small scores a passage in the question's language higher whatever it says
#: (median gap between the two bests on the eight mixed trial sets: -0.097 for questions answered in their
#: own language, -0.034 for those answered in the other). 0.045 put 9 more of 84 such questions' answers
#: first and 4 fewer of 146 answered in their own; a gap chosen leaving one set out gained 3 of 230, and
#: 0.045 gained 2 of 64 on two sets written afterwards: not told from noise, so it stays off
#: (docs/benchmarks.md "The other language's best passage"; GraphMesh's constant).
CROSS_SCRIPT_COSINE_GAP = 0.045
#: Where the other language's best passage is placed at worst when the candidates mix two writing
#: systems: in the first three, the sources an extractive answer quotes (a Chinese question about a
#: fact stated only in an English file had that file's passage in the top ten for 69 of 84 questions,
#: 79 of 84 in the first three with it; no question answered in its own language lost its first
#: passage or its top ten).
CROSS_SCRIPT_POSITION = 3
#: ... but only when its cosine to the query is at most this much below the best passage's in the question's
#: own language: placed whatever its cosine, an English chunk ("Welcome to Qiyue Dental.") sat in the first
#: three of every Chinese question over a clinic's mostly Chinese files, and extractive answers quoted it.
#: Between the medians of that gap for questions answered in their own language (-0.097) and in the other
#: (-0.034); over the fifteen own-document sets, questions answered in their own language with an
#: other-language chunk in the first three 207 -> 95, those answered in the other language with the
#: answer in the first three 82 -> 81 (docs/benchmarks.md "A fourth fresh user's trial"; GraphMesh's constant).
CROSS_SCRIPT_PLACE_GAP = 0.08


def _carries(items: list[Item], channel: str) -> bool:
    return any(s.channel == channel for it in items for s in it.scores)


def centred_weights(items: list[Item], weights: dict[str, float]) -> dict[str, float]:
    """``weights`` with pg.vector weighing 0 when any item carries a
    pg.centred score (the collections searched mix two writing systems);
    ``weights`` unchanged otherwise.

    Why: the two channels read the same cosines, pg.centred with each
    system's centroid removed from the chunk vectors, which lets a passage
    in the other language than the question's compete with those in its own
    (``services.common.script_centring``). Fused beside it, pg.vector's raw
    cosines would bring the bias back. pg.vector's list still comes along:
    its candidates are fused by their other channels, and abstention reads
    its raw cosines (docs/benchmarks.md, "Dense scores centred by writing
    system")."""
    if not _carries(items, names.PG_CENTRED):
        return weights
    return {**weights, names.PG_VECTOR: 0.0}


def other_script_weights(items: list[Item], weights: dict[str, float], translated_script: str) -> dict[str, float]:
    """``weights`` with pg.translated weighing as much as pg.keyword (0.5 by
    default) when every candidate with a known writing system is in
    ``translated_script``, the other system than the question's (a Chinese
    question over English documents only), and the request gave the channel
    no weight of its own; ``weights`` unchanged otherwise.

    Why: there the keyword channel finds no word of the question in any
    passage, and pg.translated, the same BM25 over the question's words
    through the dictionary, is the lexical evidence it stands in for; no
    passage in the question's own language is there for it to push down
    (the reason it weighs 0 where two systems mix: ``cross_script_first``).
    On a marina's English documents written as held-out questions, the
    answer to 4 of 8 Chinese questions came first with it, 2 without, and no
    other question of 534 moved (docs/benchmarks.md, "Keywords for a
    question over documents in the other language only")."""
    if not translated_script or weights.get(names.PG_TRANSLATED, 0.0) > 0.0:
        return weights
    scripts = {it.script for it in items if it.script}
    found = any(s.channel == names.PG_TRANSLATED for it in items for s in it.scores)
    if not found or scripts != {translated_script}:
        return weights
    return {**weights, names.PG_TRANSLATED: weights.get(names.PG_KEYWORD, 1.0)}


def cross_script_first(items: list[Item], fused: dict[str, float], words: list[Translated],
                       cosine_gap: float = -1.0) -> dict[str, float]:
    """``fused`` with the best candidate of channel pg.translated (the other
    writing system's chunks, ranked by translated words and cosine) moved up,
    when the candidates mix the question's writing system and the other:

    - first, when the fused first is in the question's own system and either
      the channel's best cosine to the query is within ``cosine_gap``
      (negative, the default: never; CROSS_SCRIPT_COSINE_GAP is e5-small's)
      of the best pg.vector cosine in the question's system, or one of the
      channel's first CROSS_SCRIPT_CANDIDATES holds more of the query's
      ``words`` than the fused first by more than CROSS_SCRIPT_MARGIN
      (``word_coverage`` over the fused first CROSS_SCRIPT_POOL and those
      candidates; that one goes first);
    - else no lower than CROSS_SCRIPT_POSITION, unless its cosine is more than CROSS_SCRIPT_PLACE_GAP below
      the best pg.vector cosine in the question's system.

    ``fused`` unchanged when the channel found nothing, or every candidate is
    in the other system (an English question over Chinese documents only: the
    fusion has already read those passages as well as the channel can).

    Why: the channel is not fused (weight 0): fused by rank at any weight
    from 0.25, its chunks came first for half the questions answered in their
    own language; compared by cosine within each language, and word by word
    through the dictionary (密码 -> password), the other language's passage
    goes first only where it holds up against the question's own
    (docs/benchmarks.md "Keywords across writing systems", "The other
    language's best passage")."""
    ranks = {it.id: s.rank for it in items for s in it.scores if s.channel == names.PG_TRANSLATED and s.rank > 0}
    translated = sorted((it for it in items if it.id in ranks), key=lambda it: ranks[it.id])
    if not translated or not fused:
        return fused
    other = translated[0].script
    own = [it for it in items if it.script and it.script != other]
    if not own:
        return fused
    ordered = sorted(items, key=lambda it: (-fused.get(it.id, 0.0), _best_rank(it), it.id))
    first = ordered[0]
    if first.script != other:
        best = _other_language_first(ordered, translated[:CROSS_SCRIPT_CANDIDATES], own, ranks, words, cosine_gap)
        if best is not None:
            raised = dict(fused)
            raised[best.id] = max(fused.values()) + 1.0
            return raised
    if _far_below_own(translated[0], own):
        return fused
    return _placed_within(fused, ordered, translated[0], CROSS_SCRIPT_POSITION)


def _far_below_own(item: Item, own: list[Item]) -> bool:
    """Whether ``item``'s pg.translated cosine is more than CROSS_SCRIPT_PLACE_GAP below the best pg.vector
    cosine of the question's own writing system (``own``); False when either is missing."""
    own_best = max((s.score for it in own for s in it.scores if s.channel == names.PG_VECTOR), default=None)
    other = max((s.score for s in item.scores if s.channel == names.PG_TRANSLATED), default=None)
    return own_best is not None and other is not None and other < own_best - CROSS_SCRIPT_PLACE_GAP


def _other_language_first(ordered: list[Item], translated: list[Item], own: list[Item], ranks: dict[str, int],
                          words: list[Translated], cosine_gap: float) -> Item | None:
    """The pg.translated candidate that goes first (``cross_script_first``), or None."""
    own_best = max((s.score for it in own for s in it.scores if s.channel == names.PG_VECTOR), default=None)
    other_best = max((s.score for it in translated for s in it.scores if s.channel == names.PG_TRANSLATED), default=None)
    if cosine_gap >= 0 and own_best is not None and other_best is not None and other_best > own_best - cosine_gap:
        return translated[0]
    if not words:
        return None
    pool = list({it.id: it for it in [*ordered[:CROSS_SCRIPT_POOL], *translated]}.values())
    # headings too, as the keyword channel reads them: an FAQ's question is its passage's heading
    coverage = dict(zip((it.id for it in pool), word_coverage([" ".join([*it.heading_path, it.text]) for it in pool], words)))
    best = max(translated, key=lambda it: (coverage[it.id], -ranks[it.id]))
    return best if coverage[best.id] > coverage[ordered[0].id] + CROSS_SCRIPT_MARGIN else None


def _placed_within(fused: dict[str, float], ordered: list[Item], item: Item, position: int) -> dict[str, float]:
    """``fused`` with ``item`` given the score of the ``position``-th of
    ``ordered`` (1-based; halfway to the one above it when they differ), when
    it is ranked below that; ``fused`` unchanged otherwise."""
    ids = [it.id for it in ordered]
    if len(ids) <= position or item.id in ids[:position]:
        return fused
    at = fused.get(ids[position - 1], 0.0)
    above = fused.get(ids[position - 2], at) if position >= 2 else at
    placed = dict(fused)
    placed[item.id] = (at + above) / 2 if above > at else at
    return placed


def codes_first(items: list[Item], fused: dict[str, float], query: str) -> dict[str, float]:
    """``fused`` raised so that candidates holding more of the codes ``query``
    names (a model GA-37VSD, an error code E102, a part number 1622-0655-00:
    ``services.common.codes``) in their text, title or headings come before
    those holding fewer, the fused order kept within each group; ``fused``
    unchanged when the query names none or every candidate holds as many.

    Why: a code is an exact identifier, and a passage without it is about
    another item however close its words. A trial's "1622-0655-00 是什么配件"
    had the one table row holding the part number first in the keyword and
    full-text channels and fourth fused (its cosine ranked 20th), behind a
    GA-55VSD passage and another part's row. GraphMesh's rule."""
    codes = [squashed(code) for code in codes_in(query)]
    if not codes or not fused:
        return fused
    held = {it.id: sum(code in squashed(" ".join([it.title, *it.heading_path, it.text])) for code in codes) for it in items}
    if len(set(held.values())) <= 1:
        return fused
    span = max(fused.values()) - min(fused.values()) + 1.0
    return {cid: score + span * held.get(cid, 0) for cid, score in fused.items()}


#: How many of the first fused candidates ``price_first`` reorders.
PRICE_POOL = 5


def price_first(items: list[Item], fused: dict[str, float], query: str) -> dict[str, float]:
    """``fused`` with the first PRICE_POOL candidates reordered so that those
    stating a sum of money (``money.states_price``: "120元", or a price
    table's row) come before those that state none, the fused order kept
    within each group, when ``query`` asks what something costs
    (``money.asks_price``: 多少钱, how much does it cost) and the first
    states none; ``fused`` unchanged otherwise. Only the pool's scores are
    permuted, so nothing outside it moves.

    Why: a passage without a price cannot say what something costs, however
    close its words. A trial's 猫咪打疫苗多少钱 had the vaccination schedule
    (猫三联 three times, no price) first and the price list's row fourth, out
    of the extractive answer's reach. GraphMesh's rule."""
    if not fused or not asks_price(query):
        return fused
    by_id = {it.id: it for it in items}
    ordered = sorted((cid for cid in fused if cid in by_id), key=lambda cid: (-fused[cid], _best_rank(by_id[cid]), cid))
    pool = ordered[:PRICE_POOL]
    priced = {cid for cid in pool if states_price(" ".join([*by_id[cid].heading_path, by_id[cid].text]))}
    if not priced or pool[0] in priced:
        return fused
    scores = [fused[cid] - i * 1e-9 for i, cid in enumerate(pool)]  # strictly decreasing: ties would undo the order
    reordered = dict(fused)
    for cid, score in zip([c for c in pool if c in priced] + [c for c in pool if c not in priced], scores):
        reordered[cid] = score
    return reordered


def rank(items: list[Item], fused: dict[str, float], top_k: int, one_per_document: bool = False) -> list[Item]:
    """Sorts by fused score (ties: best channel rank, then id), keeps the best
    chunk per document when asked, and cuts to ``top_k``."""
    for it in items:
        it.fused = fused.get(it.id, 0.0)
    ordered = sorted(items, key=lambda it: (-it.fused, _best_rank(it), it.id))
    if one_per_document:
        seen: set[str] = set()
        unique = []
        for it in ordered:
            if it.document_id not in seen:
                seen.add(it.document_id)
                unique.append(it)
        ordered = unique
    return ordered[:top_k]


@dataclass(slots=True)
class Section:
    """One source's block of packed context."""

    source: int
    quota_chars: int
    used_chars: int = 0
    truncated: bool = False
    candidate_ids: list[str] = field(default_factory=list)


#: How a packed context orders its sources: "rank" (the fused order, each
#: source still within its quota) or "source" (MarxSphere fuseResults V42:
#: all of one source's candidates, then the next source's, in PACKING_ORDER).
PACK_ORDERS = ("rank", "source")


@dataclass(slots=True)
class PackedContext:
    """A packed context: its text, its sections (one per source, in
    PACKING_ORDER) and the candidate ids in citation order ([n] is
    ``cited_ids[n - 1]``)."""

    text: str
    sections: list[Section]
    cited_ids: list[str]


def pack_context(ranked: list[Item], budget_chars: int = DEFAULT_BUDGET_CHARS, quotas: dict[int, float] | None = None,
                 order: str = "rank") -> PackedContext:
    """Packs ranked candidates into a context of at most ``budget_chars``.

    Each source gets ceil(budget x share) characters (the quotas of
    MarxSphere fuseResults V42, the MarxSphere design (docs/references.md)
    section 4); its candidates are taken in rank order as "[n] label\ntext"
    (text: ``Item.packed_text``, the parent context when the candidate has
    one); a text that overflows the quota is cut at a sentence boundary and
    marked [TRUNCATED], and the source takes no more. Sources with no
    candidates leave their share unused. With ``order`` "rank" the packed
    candidates keep the fused order across sources, so [1] is the best
    candidate packed whatever its source (a graph hit ranked first is not
    put behind every document chunk); with "source" they come source by
    source in PACKING_ORDER, sources separated by a blank line. Citation
    numbers n follow the packed order. The line breaks between blocks count
    against the quota of the block they precede, so the text stays within
    ``budget_chars`` when the quotas sum to at most 1; when they sum to more,
    whole blocks are dropped from the end to fit it.

    Raises:
        ValueError: ``order`` is not one of PACK_ORDERS.
    """
    if order not in PACK_ORDERS:
        raise ValueError(f"order must be one of {PACK_ORDERS}, got {order!r}")
    quotas = quotas or DEFAULT_QUOTAS
    sections = {src: Section(src, math.ceil(budget_chars * quotas.get(src, 0.0))) for src in PACKING_ORDER}
    closed: set[int] = set()

    def source_of(item: Item) -> int:
        return item.source if item.source in sections else SOURCE_DOCUMENT_CHUNK

    if order == "source":
        position = {src: i for i, src in enumerate(PACKING_ORDER)}
        ranked = sorted(ranked, key=lambda item: position[source_of(item)])  # stable: rank order within a source
    # (source, candidate id, separator + "[n] label\ntext"); a separator is charged to the quota of
    # the source whose block follows it, so the text stays within the budget
    packed: list[tuple[int, str, str]] = []
    for item in ranked:
        src = source_of(item)
        if src in closed:
            continue
        section = sections[src]
        separator = "" if not packed else "\n\n" if order == "source" and packed[-1][0] != src else "\n"
        header = f"{separator}[{len(packed) + 1}] {source_label(item)}\n"
        room = section.quota_chars - section.used_chars - len(header)
        if room <= len(TRUNCATION_MARK):
            section.truncated = True
            closed.add(src)
            continue
        body, cut = truncate_at_boundary(item.packed_text, room)
        packed.append((src, item.id, header + body))
        section.used_chars += len(header) + len(body)
        if cut:
            section.truncated = True
            closed.add(src)
    # quotas summing over 1 can still overrun the budget: whole blocks are dropped from the end,
    # never a block cut in two (a reader would lose its last source's text or header)
    kept, length = [], 0
    for entry in packed:
        if length + len(entry[2]) > budget_chars:
            for src, _, _ in packed[len(kept):]:
                sections[src].truncated = True
            break
        kept.append(entry)
        length += len(entry[2])
    for section in sections.values():
        mine = [(cid, text) for src, cid, text in kept if src == section.source]
        section.candidate_ids = [cid for cid, _ in mine]
        section.used_chars = sum(len(text) for _, text in mine)
    return PackedContext("".join(text for _, _, text in kept), [sections[s] for s in PACKING_ORDER],
                         [cid for _, cid, _ in kept])


def _similarity_matrix(items: list[Item]) -> np.ndarray:
    """Cosine similarities between items' embeddings; rows of items without
    an embedding (or of another dimension) are zero."""
    dims = Counter(len(it.embedding) for it in items if it.embedding)
    if not dims:
        return np.zeros((len(items), len(items)))
    dim = dims.most_common(1)[0][0]
    matrix = np.zeros((len(items), dim))
    for row, it in enumerate(items):
        if len(it.embedding) == dim:
            matrix[row] = it.embedding
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return matrix @ matrix.T


def mmr(ranked: list[Item], lambda_: float, top_k: int) -> list[Item]:
    """Maximal marginal relevance re-ordering of ``ranked`` (fused order).

    Greedily picks the item maximising
    ``lambda_ * rel - (1 - lambda_) * max cosine(item, picked)``, where rel
    is the fused score divided by the best fused score (so in [0, 1]) and
    cosine uses the stored embeddings (an item without one is similar to
    nothing). Carbonell and Goldstein 1998; MetaSearch's MMR diversity step
    (the MetaSearch design (docs/references.md)). ``lambda_`` = 1 keeps the fused order.

    Returns:
        At most ``top_k`` items.
    Raises:
        ValueError: ``lambda_`` outside [0, 1].
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError("lambda_ must be in [0, 1]")
    if not ranked:
        return []
    best = max(it.fused for it in ranked) or 1.0
    relevance = np.array([it.fused / best for it in ranked])
    similarity = _similarity_matrix(ranked)
    redundancy = np.full(len(ranked), -np.inf)
    available = np.ones(len(ranked), dtype=bool)
    picked: list[int] = []
    while len(picked) < min(top_k, len(ranked)):
        penalty = np.where(np.isinf(redundancy), 0.0, redundancy)
        gain = np.where(available, lambda_ * relevance - (1 - lambda_) * penalty, -np.inf)
        choice = int(np.argmax(gain))  # argmax keeps the earliest on ties
        picked.append(choice)
        available[choice] = False
        redundancy = np.maximum(redundancy, similarity[choice])
    return [ranked[i] for i in picked]
