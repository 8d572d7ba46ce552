"""Entity skeletons and controlled aliases (Guizhou design, the Guizhou indicator GraphRAG design (docs/references.md)
section 5: each indicator is parsed into object, property, conditions and a
value type; controlled aliases are derived from the canonical name).

Generic, not domain-specific: conditions are bracketed qualifiers, the value
type comes from a small table of name suffixes, and the property is the last
jieba word of the name with the object the words before it. Where the data
allows nothing (a one-word name), object is the whole name and property is
empty.

Pure functions; no I/O.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

import jieba

# Bracketed qualifiers: （…） (…) 【…】 […] 〔…〕
_BRACKETS = re.compile(r"[（(【\[〔]([^（）()【】\[\]〔〕]*)[）)】\]〕]")
# Separators people drop or type differently: dashes, middle dots, spaces, slashes.
_SEPARATORS = re.compile(r"[\s\-—–－‐·・•/、,，_]+")

# Value type by name suffix, longest first (Guizhou: 率/比重 ratio, 数 count,
# 额/金额 amount, 面积 area, 量 quantity, 指数 index).
_VALUE_TYPES = (
    ("比重", "ratio"), ("比例", "ratio"), ("占比", "ratio"), ("率", "ratio"),
    ("指数", "index"), ("金额", "amount"), ("收入", "amount"), ("支出", "amount"), ("额", "amount"),
    ("面积", "area"), ("人数", "count"), ("个数", "count"), ("次数", "count"), ("数", "count"),
    ("产量", "quantity"), ("量", "quantity"),
)


def name_key(text: str) -> str:
    """Comparison form of a name: NFKC, lower case, whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).lower().split())


def loose_key(text: str) -> str:
    """``name_key`` with separators (dashes, dots, slashes, commas) removed."""
    return _SEPARATORS.sub("", unicodedata.normalize("NFKC", text).lower())


@dataclass(frozen=True, slots=True)
class Skeleton:
    """Parsed name.

    Attributes:
        object: what the entity is about (e.g. "头孢克洛" of "头孢克洛胶囊").
        property: the measured or distinguishing part ("胶囊"); "" when none.
        conditions: bracketed qualifiers, in order.
        value_type: "ratio", "count", "amount", "area", "quantity", "index" or "".
    """

    object: str
    property: str
    conditions: tuple[str, ...] = field(default_factory=tuple)
    value_type: str = ""


@lru_cache(maxsize=65536)
def parse(name: str) -> Skeleton:
    """Skeleton of ``name`` (see module doc)."""
    text = unicodedata.normalize("NFKC", name).strip()
    conditions = tuple(c.strip() for c in _BRACKETS.findall(text) if c.strip())
    base = _BRACKETS.sub("", text).strip() or text
    value_type = next((t for suffix, t in _VALUE_TYPES if base.endswith(suffix)), "")
    words = [w for w in jieba.lcut(base) if w.strip() and not _SEPARATORS.fullmatch(w)]
    if len(words) >= 2 and len(words[-1]) >= 1 and len("".join(words[:-1])) >= 1:
        return Skeleton(object="".join(words[:-1]), property=words[-1], conditions=conditions, value_type=value_type)
    return Skeleton(object=base, property="", conditions=conditions, value_type=value_type)


def controlled_aliases(name: str) -> list[str]:
    """Aliases derived from the canonical name only (never invented): the name
    without bracketed qualifiers and the name without separators
    ("18—三体综合征" -> "18三体综合征"). Qualifiers themselves are conditions,
    not names, so they never become aliases. Excludes the name itself; order
    is stable; each has at least 2 characters."""
    text = unicodedata.normalize("NFKC", name).strip()
    out: list[str] = []
    base = _BRACKETS.sub("", text).strip()
    if base and base != text:
        out.append(base)
    for candidate in (text, base):
        squeezed = _SEPARATORS.sub("", candidate)
        if squeezed and squeezed != candidate:
            out.append(squeezed)
    seen = {name_key(name)}
    result = []
    for a in out:
        k = name_key(a)
        if len(k) >= 2 and k not in seen:
            seen.add(k)
            result.append(a)
    return result


def skeleton_similarity(a: Skeleton, b: Skeleton) -> float:
    """Semantic skeleton match in [0, 1]: 0.5 for the same object, 0.3 for
    the same property, 0.2 for the same value type (only when set)."""
    score = 0.0
    if a.object and name_key(a.object) == name_key(b.object):
        score += 0.5
    if a.property and name_key(a.property) == name_key(b.property):
        score += 0.3
    if a.value_type and a.value_type == b.value_type:
        score += 0.2
    return score
