"""Collections and metadata filters: names, validation, the AIP-160 subset
the lifecycle RPCs and the CLI accept, and conversions to and from
``graphmesh.common.v1.MetadataFilter``.

A collection is a named partition of the stores; every document, chunk,
entity and fact belongs to exactly one ("default" when none is given).
A metadata condition is one of: the value equals a string, is one of a
list, or lies in a range (numeric or code-point order). The stores turn
conditions into SQL / Cypher with keys and values bound as parameters
(``services.retriever_pg.filter_sql``, ``services.retriever_graph.filter_cypher``);
``matches`` is the reference semantics they implement.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from graphmesh.common.v1 import types_pb2
from services.common.errors import InvalidArgument

DEFAULT_COLLECTION = "default"
#: A collection name: a letter or digit of any script (公司文档, docs-2024), then up to 62 letters,
#: digits, "_" or "-"; no spaces, "/", "." or punctuation, so it reads the same in a resource name
#: (collections/{collection}/documents/...), a URL path and a metric label.
COLLECTION_PATTERN = re.compile(r"^[^\W_][\w-]{0,62}$")
#: A metadata key: 1 to 64 word characters of any script, "." or "-".
KEY_PATTERN = re.compile(r"^[\w.\-]{1,64}$")
MAX_COLLECTIONS = 20
MAX_FILTERS = 20
MAX_ANY_OF = 100
MAX_VALUE_CHARS = 1000
#: A number as a range bound or a numeric metadata value (also the pattern
#: the stores test values against before comparing them as numbers).
NUMBER_PATTERN = r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$"
_NUMBER = re.compile(NUMBER_PATTERN)


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition on a metadata key.

    Attributes:
        key: the metadata key (KEY_PATTERN).
        op: "eq" (values[0]), "in" (any of values) or "range" (bounds).
        values: the string(s) of eq / in.
        gt / gte / lt / lte: range bounds, None when open.
        numeric: compare the range as numbers.
    """

    key: str
    op: str
    values: tuple[str, ...] = ()
    gt: str | None = None
    gte: str | None = None
    lt: str | None = None
    lte: str | None = None
    numeric: bool = False

    def bounds(self) -> list[tuple[str, str]]:
        """(operator, bound) of each set range bound: ">", ">=", "<", "<="."""
        return [(op, v) for op, v in ((">", self.gt), (">=", self.gte), ("<", self.lt), ("<=", self.lte)) if v is not None]


def validate_collection(name: str, field: str = "collection") -> str:
    """``name`` stripped and in Unicode NFC (one spelling for "é" typed
    either way), "default" when empty (not given).

    Raises:
        InvalidArgument: not a valid collection name (COLLECTION_PATTERN),
            or blank: spaces only name no collection. A trial's
            ``DELETE /v1/collections/%20`` had emptied "default".
    """
    if name and not name.strip():
        raise InvalidArgument(field, "is blank: name a collection (leave it out for the default one)")
    name = unicodedata.normalize("NFC", name.strip())
    if not name:
        return DEFAULT_COLLECTION
    if not COLLECTION_PATTERN.fullmatch(name):
        raise InvalidArgument(field, f"{name!r} is not a collection name: a letter or digit (any script), "
                                     "then up to 62 letters, digits, _ or -")
    return name


def validate_collections(names: Iterable[str], field: str = "collections") -> list[str]:
    """Distinct valid names in order; ["default"] when none is given.

    Raises:
        InvalidArgument: a name is invalid, empty or blank (an entry of the
            list names a collection: a trial's ``"collections": ["  "]``
            had searched "default"), or there are more than MAX_COLLECTIONS.
    """
    names = list(names)
    for i, name in enumerate(names):
        if not name.strip():
            raise InvalidArgument(f"{field}[{i}]", f"is {'blank' if name else 'empty'}: name a collection "
                                                   f"(leave {field} out for the default one)")
    out = list(dict.fromkeys(validate_collection(n, f"{field}[{i}]") for i, n in enumerate(names)))
    if len(out) > MAX_COLLECTIONS:
        raise InvalidArgument(field, f"at most {MAX_COLLECTIONS} collections")
    return out or [DEFAULT_COLLECTION]


def _check_value(value: str, field: str) -> str:
    if "\x00" in value or len(value) > MAX_VALUE_CHARS:
        raise InvalidArgument(field, f"must be at most {MAX_VALUE_CHARS} characters without NUL")
    return value


def metadata_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a metadata key (a filter could never name it), or None when it can (KEY_PATTERN)."""
    return None if KEY_PATTERN.match(key) else f"{key!r} is not a metadata key: 1 to 64 letters, digits, '_', '.' or '-'"


def _check_key(key: str, field: str) -> str:
    problem = metadata_key_problem(key)
    if problem:
        raise InvalidArgument(field, problem)
    return key


def is_number(text: str) -> bool:
    """Whether ``text`` is a finite decimal number (NUMBER_PATTERN)."""
    return bool(_NUMBER.match(text)) and math.isfinite(float(text))


def condition(key: str, op: str, values: Sequence[str] = (), *, gt: str | None = None, gte: str | None = None,
              lt: str | None = None, lte: str | None = None, numeric: bool = False, field: str = "filters") -> Condition:
    """A validated Condition.

    Raises:
        InvalidArgument: bad key, empty or over-long in-list, a range without
            bounds, a numeric bound that is not a number, a range no value
            lies in (a lower bound above the upper one).
    """
    _check_key(key, f"{field}.key")
    values = tuple(_check_value(v, f"{field}.value") for v in values)
    if op == "eq" and len(values) != 1:
        raise InvalidArgument(field, "equality needs one value")
    if op == "in" and not 1 <= len(values) <= MAX_ANY_OF:
        raise InvalidArgument(f"{field}.any_of", f"must hold 1 to {MAX_ANY_OF} values")
    cond = Condition(key, op, values, gt, gte, lt, lte, numeric)
    if op == "range":
        if not cond.bounds():
            raise InvalidArgument(f"{field}.range", "needs at least one bound")
        for _, bound in cond.bounds():
            _check_value(bound, f"{field}.range")
            if numeric and not is_number(bound):
                raise InvalidArgument(f"{field}.range", f"numeric bound {bound!r} is not a number")
        _check_not_empty(cond, f"{field}.range")
    elif op not in ("eq", "in"):
        raise InvalidArgument(field, f"unknown operator {op!r}")
    return cond


def _check_not_empty(cond: Condition, field: str) -> None:
    """Refuses a range no value can lie in: a lower bound above an upper one,
    or equal bounds with either strict (a caller's swapped bounds otherwise
    matched nothing, silently)."""
    order = (lambda b: float(b)) if cond.numeric else (lambda b: b)  # noqa: E731 (code-point order otherwise)
    for low, low_strict in ((cond.gt, True), (cond.gte, False)):
        for high, high_strict in ((cond.lt, True), (cond.lte, False)):
            if low is None or high is None:
                continue
            if order(low) > order(high) or (order(low) == order(high) and (low_strict or high_strict)):
                raise InvalidArgument(field, f"no value lies between the lower bound {low!r} and the upper bound "
                                             f"{high!r}: are they swapped?")


def from_proto(filters: Sequence[types_pb2.MetadataFilter], field: str = "filters") -> list[Condition]:
    """Conditions of protobuf filters.

    Raises:
        InvalidArgument: more than MAX_FILTERS, or one is invalid (the field
            names it, e.g. "filters[1].key").
    """
    if len(filters) > MAX_FILTERS:
        raise InvalidArgument(field, f"at most {MAX_FILTERS} filters")
    out = []
    for i, f in enumerate(filters):
        where = f"{field}[{i}]"
        kind = f.WhichOneof("condition")
        if kind == "equals":
            out.append(condition(f.key, "eq", [_check_value(f.equals, f"{where}.equals")], field=where))
        elif kind == "any_of":  # each value named by its place, as the request holds it
            values = [_check_value(v, f"{where}.any_of.values[{j}]") for j, v in enumerate(f.any_of.values)]
            out.append(condition(f.key, "in", values, field=where))
        elif kind == "range":
            r = f.range
            bounds = {name: getattr(r, name) if r.HasField(name) else None for name in ("gt", "gte", "lt", "lte")}
            # unset: numbers when every bound is one, as the list filter syntax reads `year >= 2020`
            numeric = r.numeric if r.HasField("numeric") else \
                any(bounds.values()) and all(is_number(b) for b in bounds.values() if b is not None)
            out.append(condition(f.key, "range", **bounds, numeric=bool(numeric), field=where))
        else:
            raise InvalidArgument(where, "needs one of equals, any_of or range")
    return out


def to_proto(conditions: Iterable[Condition]) -> list[types_pb2.MetadataFilter]:
    """Protobuf filters of ``conditions``."""
    out = []
    for c in conditions:
        if c.op == "eq":
            out.append(types_pb2.MetadataFilter(key=c.key, equals=c.values[0]))
        elif c.op == "in":
            out.append(types_pb2.MetadataFilter(key=c.key, any_of=types_pb2.StringList(values=c.values)))
        else:
            rng = types_pb2.MetadataRange(numeric=c.numeric)
            for name in ("gt", "gte", "lt", "lte"):
                if getattr(c, name) is not None:
                    setattr(rng, name, getattr(c, name))
            out.append(types_pb2.MetadataFilter(key=c.key, range=rng))
    return out


def matches(metadata: Mapping[str, str], conditions: Iterable[Condition]) -> bool:
    """Whether ``metadata`` satisfies every condition (the semantics the
    stores implement in SQL and Cypher). A missing key never matches."""
    for c in conditions:
        value = metadata.get(c.key)
        if value is None:
            return False
        if c.op == "eq" and value != c.values[0]:
            return False
        if c.op == "in" and value not in c.values:
            return False
        if c.op == "range":
            if c.numeric:
                if not is_number(value):
                    return False
                have: float | str = float(value)
                bounds = [(op, float(b)) for op, b in c.bounds()]
            else:
                have, bounds = value, c.bounds()
            for op, bound in bounds:
                if not {">": have > bound, ">=": have >= bound, "<": have < bound, "<=": have <= bound}[op]:
                    return False
    return True


# ---------------------------------------------------------------- AIP-160

#: Strings in "double" or 'single' quotes, or in the quotes a Chinese input method types (“高一”, ‘高一’,
#: 「高一」: a trial's filter 年级 = “高一” read the quotes as part of the value and matched nothing).
_TOKEN = re.compile(r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|“[^”]*”|‘[^’]*’|「[^」]*」)"""
                    r"""|(?P<op><=|>=|!=|=|<|>|\(|\)|,)|(?P<word>[^\s"=<>!(),“”‘’「」]+))""")


def _tokens(text: str, field: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InvalidArgument(field, f"cannot read the filter at character {pos + 1}: {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append((kind, value))
    return out


def parse_filter(text: str, field: str = "filter") -> list[Condition]:
    """Conditions of an AIP-160 filter subset: terms joined by AND, each
    ``key = value``, ``key < value`` (also ``<=``, ``>``, ``>=``) or
    ``key IN (v1, v2, ...)``. A value is a "quoted string" or a 'quoted string' (or “”, ‘’, 「」; backslash
    escapes; a trial's type='changelog' kept its quotes as part of the value and matched nothing) or a bare word; a range against a bare number compares as
    numbers, otherwise as strings. Keys may carry a "metadata." prefix.
    Two range terms on one key (year >= 2000 AND year < 2010) make one range.

    Raises:
        InvalidArgument (``field``): anything else (OR, NOT, !=, a bad key).
    """
    toks = _tokens(text, field)
    if not toks:
        return []
    conditions: list[Condition] = []
    ranges: dict[str, dict] = {}
    i = 0

    def take(kinds: tuple[str, ...], what: str) -> tuple[str, str]:
        nonlocal i
        if i >= len(toks) or toks[i][0] not in kinds:
            got = f"got {toks[i][1]!r}" if i < len(toks) else "but the filter ends there"
            raise InvalidArgument(field, f"expected {what}, {got}")
        i += 1
        return toks[i - 1]

    while True:
        _, key = take(("word",), "a metadata key")
        if key.upper() == "NOT" or key == "-":
            raise InvalidArgument(field, "NOT is not supported: name the values a key may take (key IN (a, b)) instead")
        key = key.removeprefix("metadata.")
        _check_key(key, field)
        kind, op = take(("op", "word"), "an operator (=, <, <=, >, >=, IN)")
        if kind == "word" and op.upper() == "IN":
            if i >= len(toks) or toks[i] != ("op", "("):
                raise InvalidArgument(field, "expected ( after IN")
            i += 1
            values = [take(("str", "word"), "a value")[1]]
            while i < len(toks) and toks[i] == ("op", ","):
                i += 1
                values.append(take(("str", "word"), "a value")[1])
            if i >= len(toks) or toks[i] != ("op", ")"):
                raise InvalidArgument(field, "expected ) closing IN")
            i += 1
            conditions.append(condition(key, "in", values, field=field))
        elif kind == "op" and op in ("=", "<", "<=", ">", ">="):
            vkind, value = take(("str", "word"), "a value")
            if op == "=":
                conditions.append(condition(key, "eq", [value], field=field))
            else:
                numeric = vkind == "word" and is_number(value)
                rng = ranges.setdefault(key, {"numeric": numeric})
                if rng["numeric"] != numeric:
                    raise InvalidArgument(field, f"range on {key!r} mixes numbers and strings")
                name = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}[op]
                if name in rng:
                    raise InvalidArgument(field, f"two {op} bounds on {key!r}")
                rng[name] = value
        else:
            raise InvalidArgument(field, f"unsupported operator {op!r}; use =, <, <=, >, >= or IN")
        if i >= len(toks):
            break
        kind, word = take(("word",), "AND")
        if word.upper() != "AND":
            raise InvalidArgument(field, f"only AND joins terms, got {word!r}")
    for key, rng in ranges.items():
        numeric = rng.pop("numeric")
        conditions.append(condition(key, "range", numeric=numeric, field=field, **rng))
    return conditions


def format_filter(conditions: Iterable[Condition]) -> str:
    """The AIP-160 text of ``conditions`` (parse_filter reads it back)."""
    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    terms = []
    for c in conditions:
        if c.op == "eq":
            terms.append(f"{c.key} = {quote(c.values[0])}")
        elif c.op == "in":
            terms.append(f"{c.key} IN ({', '.join(quote(v) for v in c.values)})")
        else:
            terms.extend(f"{c.key} {op} {b if c.numeric else quote(b)}" for op, b in c.bounds())
    return " AND ".join(terms)
