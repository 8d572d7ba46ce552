"""Library-constrained normalisation and routing of entity queries (Guizhou
design, the Guizhou indicator GraphRAG design (docs/references.md) sections 6 and 7).

``LibraryIndex`` is a read-only index of the authorised library: canonical
names, aliases (given and controlled), optional synonym dictionaries, pinyin
keys, one-deletion keys and category names. ``normalize`` proposes library
names by five kinds of signal and applies a rewrite only through the
reference's safety gate::

    if confidence == "low" or score < 0.82: keep the original
    if exact_alias or score >= 0.94 or likely_missing_char: rewrite
    otherwise keep the original

A rewrite target is always a name of the library. Pure logic, no I/O except
``load_synonyms`` reading a dictionary file.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from pypinyin import Style, lazy_pinyin
from rapidfuzz import fuzz, process

from services.common.entity_skeleton import controlled_aliases, name_key

# Gate thresholds (the Guizhou indicator GraphRAG design (docs/references.md) section 6).
KEEP_BELOW = 0.82
REWRITE_AT = 0.94
# Two different names within this margin of the best fuzzy score make the
# match ambiguous: confidence "low".
AMBIGUITY_MARGIN = 0.02
# Scores given to each signal (a rewrite needs >= REWRITE_AT or a rule).
SCORES = {
    "exact": 1.0, "alias": 0.98, "synonym": 0.96, "controlled_alias": 0.97, "pinyin": 0.95,
    "shape": 0.95, "missing_char": 0.9, "pinyin_prefix": 0.84,
}

# Visually confusable characters (形近字): each group's members are swapped
# for one another. A small general-purpose table; extend with a file if needed.
SHAPE_GROUPS = (
    "己已巳", "未末", "戊戌戍", "拨拔", "侯候", "祟崇", "茶荼", "汩汨", "刺剌", "赢嬴羸", "壁璧", "辩辨辫瓣",
    "玲铃伶龄岭", "睛晴情请清", "历厉", "幕暮慕墓募", "栗粟", "盲肓", "鸟乌", "狠狼很", "候喉", "蓝篮", "籍藉",
    "析折", "胀涨", "斑班", "痉径胫", "炎焱", "瘤榴溜", "脘腕碗", "疹诊", "肢枝", "痔峙", "疸胆", "苔胎",
)
_SHAPE: dict[str, str] = {}
for _group in SHAPE_GROUPS:
    for _ch in _group:
        _SHAPE[_ch] = _SHAPE.get(_ch, "") + _group.replace(_ch, "")

# Query shapes for routing.
_LIST_SPLIT = re.compile(r"[、，,；;/|]+|\s+和\s*|\s+")
_LABELLED = re.compile(r"^\s*([^\s：:]{1,12})\s*[：:]\s*(.+)$")
_OVERVIEW = re.compile(r"(有哪些|哪些|有什么|都有|包括|包含|列表|清单|概览|总览|分类|类别|所有|全部)")
_CROSS_JOIN = re.compile(r"[和与及、]|以及")
ROUTE_MIN_CONFIDENCE = 0.6


def pinyin_key(text: str) -> str:
    """Toneless pinyin of ``text`` joined without spaces (non-Chinese kept,
    lower-cased)."""
    return "".join(lazy_pinyin(name_key(text), style=Style.NORMAL, errors="default")).lower()


@dataclass(frozen=True, slots=True)
class Match:
    """A library name the query may mean.

    Attributes: name (canonical), matched (the name/alias/synonym that
    matched), method (see SCORES plus "fuzzy"), score in [0, 1].
    """

    name: str
    matched: str
    method: str
    score: float


@dataclass(slots=True)
class Normalized:
    """Outcome of ``normalize``.

    Attributes:
        query: the whitespace-normalised original.
        normalized_query: a library name when rewritten, else ``query``.
        rewritten: whether the gate rewrote.
        reason: why ("exact_alias", "score>=0.94", "missing_char",
            "low_confidence", "score<0.82", "no_match", "kept").
        matches: candidates, best first (also those not applied).
    """

    query: str
    normalized_query: str
    rewritten: bool
    reason: str
    matches: list[Match] = field(default_factory=list)


def load_synonyms(path: Path | str) -> list[list[str]]:
    """Synonym groups from a dictionary file, one group a line. Accepts the
    HIT Tongyici Cilin (extended) format ``Aa01A01= w1 w2 ...`` (only ``=``
    lines, i.e. true synonyms; ``#`` related and ``@`` single-word lines are
    skipped) and plain ``w1 w2 ...`` or ``w1,w2`` lines."""
    groups = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition(" ")
        if re.fullmatch(r"[A-Za-z]{2}\d{2}[A-Za-z]\d{2}[=#@]", head):
            if not head.endswith("="):
                continue
            words = rest.split()
        else:
            words = re.split(r"[\s,，]+", line)
        words = [w for w in words if w]
        if len(words) >= 2:
            groups.append(words)
    return groups


class LibraryIndex:
    """Read-only index of the library (see module doc).

    Args:
        entries: (canonical name, category, aliases) per entity.
        synonym_groups: optional groups of interchangeable words; a group
            word that is not a library name or alias maps to the library
            names/aliases in its group.
    """

    def __init__(self, entries: Iterable[tuple[str, str, list[str]]], synonym_groups: Iterable[list[str]] = ()) -> None:
        self.names: dict[str, str] = {}                       # key -> canonical
        self.aliases: dict[str, set[str]] = defaultdict(set)  # key -> canonicals
        self.controlled: dict[str, set[str]] = defaultdict(set)
        self.categories: dict[str, str] = {}                  # key -> category
        self.category_of: dict[str, str] = {}
        for name, category, aliases in entries:
            key = name_key(name)
            if not key:
                continue
            self.names[key] = name
            self.category_of[name] = category
            if category:
                self.categories[name_key(category)] = category
            for a in aliases:
                if name_key(a) and name_key(a) != key:
                    self.aliases[name_key(a)].add(name)
            for a in controlled_aliases(name):
                self.controlled[name_key(a)].add(name)
        self.synonyms: dict[str, set[tuple[str, str]]] = defaultdict(set)  # key -> (canonical, matched)
        for group in synonym_groups:
            targets = []
            for w in group:
                for canonical in self._exact_targets(name_key(w)):
                    targets.append((canonical, w))
            if targets:
                for w in group:
                    k = name_key(w)
                    if k not in self.names and k not in self.aliases:
                        self.synonyms[k].update(targets)
        self.pinyin: dict[str, set[str]] = defaultdict(set)
        self.deletions: dict[str, set[str]] = defaultdict(set)
        for key, name in self.names.items():
            self.pinyin[pinyin_key(key)].add(name)
            if len(key) >= 3:
                for i in range(len(key)):
                    self.deletions[key[:i] + key[i + 1 :]].add(name)
        self._pinyin_sorted = sorted(self.pinyin)
        self._keys = list(self.names)

    def __len__(self) -> int:
        return len(self.names) + len(self.aliases)

    def _exact_targets(self, key: str) -> list[str]:
        if key in self.names:
            return [self.names[key]]
        return sorted(self.aliases.get(key, ()))

    def lookup(self, text: str) -> list[Match]:
        """Exact name, alias, controlled alias or synonym matches of ``text``."""
        key = name_key(text)
        if not key:
            return []
        if key in self.names:
            return [Match(self.names[key], text, "exact", SCORES["exact"])]
        out = [Match(n, text, "alias", SCORES["alias"]) for n in sorted(self.aliases.get(key, ()))]
        out += [Match(n, text, "controlled_alias", SCORES["controlled_alias"]) for n in sorted(self.controlled.get(key, ()))]
        out += [Match(n, f"{text}->{m}", "synonym", SCORES["synonym"]) for n, m in sorted(self.synonyms.get(key, ()))]
        return out

    def candidates(self, text: str, fuzzy_limit: int = 5) -> list[Match]:
        """Every signal for ``text``, best first, one Match per name (its
        best). One-character text only ever matches exactly."""
        key = name_key(text)
        found: dict[str, Match] = {}

        def add(m: Match) -> None:
            if m.name not in found or found[m.name].score < m.score:
                found[m.name] = m

        for m in self.lookup(text):
            add(m)
        if len(key) <= 1:
            return sorted(found.values(), key=lambda m: -m.score)
        py = pinyin_key(key)
        for n in self.pinyin.get(py, ()):
            add(Match(n, text, "pinyin", SCORES["pinyin"]))
        for i, ch in enumerate(key):
            for alt in _SHAPE.get(ch, ""):
                variant = key[:i] + alt + key[i + 1 :]
                if variant in self.names:
                    add(Match(self.names[variant], variant, "shape", SCORES["shape"]))
        if len(key) >= 2:
            for n in self.deletions.get(key, ()):
                add(Match(n, text, "missing_char", SCORES["missing_char"]))
        if len(py) >= 4:
            import bisect

            i = bisect.bisect_left(self._pinyin_sorted, py)
            taken = 0
            while i < len(self._pinyin_sorted) and self._pinyin_sorted[i].startswith(py) and taken < 5:
                for n in self.pinyin[self._pinyin_sorted[i]]:
                    if n not in found:
                        add(Match(n, text, "pinyin_prefix", SCORES["pinyin_prefix"]))
                taken += 1
                i += 1
        for choice, score, _ in process.extract(key, self._keys, scorer=fuzz.ratio, limit=fuzzy_limit, score_cutoff=50):
            add(Match(self.names[choice], choice, "fuzzy", round(score / 100.0, 4)))
        return sorted(found.values(), key=lambda m: (-m.score, m.name))


def gate(query: str, matches: list[Match]) -> Normalized:
    """The reference safety gate over ``matches`` (best first)."""
    q = " ".join(query.split())
    if not matches:
        return Normalized(q, q, False, "no_match", matches)
    best = matches[0]
    if best.method == "exact":
        return Normalized(q, best.name, best.name != q, "exact", matches)
    rivals = [m for m in matches[1:] if m.name != best.name and best.score - m.score <= AMBIGUITY_MARGIN]
    confidence = "low" if rivals else "high"
    if confidence == "low" or best.score < KEEP_BELOW:
        return Normalized(q, q, False, "low_confidence" if confidence == "low" else f"score<{KEEP_BELOW}", matches)
    if best.method in ("alias", "synonym", "controlled_alias"):
        return Normalized(q, best.name, True, "exact_alias", matches)
    if best.score >= REWRITE_AT:
        return Normalized(q, best.name, True, f"score>={REWRITE_AT}", matches)
    if best.method == "missing_char":
        return Normalized(q, best.name, True, "missing_char", matches)
    return Normalized(q, q, False, "kept", matches)


def normalize(query: str, index: LibraryIndex) -> Normalized:
    """Candidates for ``query`` from ``index`` behind the safety gate."""
    return gate(query, index.candidates(query))


@dataclass(slots=True)
class Route:
    """Route of an entity query.

    Attributes:
        route: "local", "global", "cross_category", "attribute" or "none".
        confidence: in [0, 1]; callers apply the route only from
            ROUTE_MIN_CONFIDENCE (low confidence is not hard-routed).
        categories: category names the query names.
        attribute_values / attribute_label: the listed values and their label.
    """

    route: str
    confidence: float
    categories: list[str] = field(default_factory=list)
    attribute_values: list[str] = field(default_factory=list)
    attribute_label: str = ""


def split_attributes(query: str) -> tuple[str, list[str]]:
    """(label, values) of a listed query such as "症状：发热、头痛、咳嗽";
    label "" when none; values deduplicated in order."""
    q = " ".join(query.split())
    label = ""
    m = _LABELLED.match(q)
    if m:
        label, q = m.group(1), m.group(2)
    values: list[str] = []
    # "、" is the list separator of Chinese enumerations; when present it is
    # the only one, so values that hold commas or slashes ("面部中1/3凹陷")
    # stay whole. Values are kept verbatim (a trailing "等" included): the
    # store also tries them without it.
    parts = q.split("、") if "、" in q else _LIST_SPLIT.split(q)
    for part in parts:
        part = part.strip(" 。.!！?？")
        if part and part not in values:
            values.append(part)
    return label, values


def route(query: str, index: LibraryIndex, normalized: Normalized) -> Route:
    """Local (one entity), global (a category overview), cross-category
    (several categories) or attribute (a list of values), with a confidence."""
    key = name_key(query)
    named = [c for k, c in index.categories.items() if len(k) >= 2 and k in key]
    # keep the longest category names that are not part of another named one
    named = [c for c in named if not any(c != o and name_key(c) in name_key(o) for o in named)]
    overview = bool(_OVERVIEW.search(query))
    label, values = split_attributes(query)
    if normalized.matches and normalized.matches[0].method == "exact" and name_key(normalized.matches[0].name) == key:
        return Route("local", 1.0)
    if len(values) >= 2 and (label or len(values) >= 3):
        return Route("attribute", 0.9 if label else 0.7, attribute_values=values, attribute_label=label)
    if len(named) >= 2 and (overview or _CROSS_JOIN.search(query)):
        return Route("cross_category", 0.85 if overview else 0.65, categories=named)
    if named and overview:
        return Route("global", 0.9, categories=named)
    if normalized.rewritten:
        return Route("local", normalized.matches[0].score if normalized.matches else 0.5)
    if named and name_key(named[0]) == key:
        return Route("global", 0.7, categories=named)
    if named:
        return Route("global", 0.4, categories=named)
    return Route("local" if normalized.matches else "none", 0.5 if normalized.matches else 0.0)
