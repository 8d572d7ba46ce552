"""Collections and metadata filters: validation, the AIP-160 subset, the
reference semantics, and the SQL / Cypher built from them (every value,
keys included, a parameter; no user text in the query)."""
from __future__ import annotations

import pytest

from graphmesh.common.v1 import types_pb2
from services.common import filters as flt
from services.common.errors import InvalidArgument
from services.retriever_graph.filter_cypher import META_PREFIX, meta_properties, scope_cypher
from services.retriever_pg.filter_sql import Params, scope_sql

pytestmark = pytest.mark.unit

EVIL = "x') OR 1=1; DROP TABLE documents; --"


def test_collections_default_dedupe_and_validation():
    assert flt.validate_collections([]) == ["default"]
    assert flt.validate_collections(["hr", " hr ", "laws-2024"]) == ["hr", "laws-2024"]
    with pytest.raises(InvalidArgument) as err:
        flt.validate_collections(["ok", "bad name"])
    assert err.value.field == "collections[1]"
    with pytest.raises(InvalidArgument):
        flt.validate_collection("-leading-dash")
    with pytest.raises(InvalidArgument, match="at most 20"):
        flt.validate_collections([f"c{i}" for i in range(21)])


def test_a_blank_collection_name_is_refused_and_only_an_absent_one_means_default():
    # a trial's DELETE /v1/collections/%20 emptied "default", the law corpus
    assert flt.validate_collection("") == "default"
    for blank in (" ", "\t", "\u3000"):
        with pytest.raises(InvalidArgument, match="blank") as err:
            flt.validate_collection(blank, "name")
        assert err.value.field == "name"
    # an entry of a search's list names a collection too: a trial's ["  "] had searched "default"
    for names, why in ((["hr", " "], "blank"), (["\u3000"], "blank"), (["hr", ""], "empty")):
        with pytest.raises(InvalidArgument, match=why) as err:
            flt.validate_collections(names)
        assert err.value.field == f"collections[{len(names) - 1}]"


def test_collection_names_of_any_script_one_spelling():
    assert flt.validate_collections(["公司文档", "法规库-2024", "ドキュメント_1", "Café"]) == ["公司文档", "法规库-2024", "ドキュメント_1", "Café"]
    # "é" typed as e + combining accent is the same collection as the composed "é"
    assert flt.validate_collection("Cafe\u0301") == "Café"
    assert flt.validate_collection("文" * 63) == "文" * 63
    for bad in ["公司 文档", "公司/文档", "公司.文档", "_私有", "-x", "文档。", "文\n档", "文" * 64, "x\u200bx", "🙂docs"]:
        with pytest.raises(InvalidArgument) as err:
            flt.validate_collection(bad, "collection")
        assert err.value.field == "collection", bad


def test_parse_filter_subset():
    conds = flt.parse_filter('status = "现行有效" AND law IN ("专利法", 商标法) AND year >= 2000 AND year < 2010 '
                             'AND metadata.date <= "2020-12-31"')
    assert conds == [
        flt.Condition("status", "eq", ("现行有效",)),
        flt.Condition("law", "in", ("专利法", "商标法")),
        flt.Condition("year", "range", gte="2000", lt="2010", numeric=True),
        flt.Condition("date", "range", lte="2020-12-31"),
    ]
    assert flt.parse_filter(flt.format_filter(conds)) == conds
    assert flt.parse_filter("  ") == []
    assert flt.parse_filter('title = "a \\"quoted\\" b"')[0].values == ('a "quoted" b',)


@pytest.mark.parametrize("text, message", [
    ('status != "x"', "unsupported operator"),
    ('a = "x" OR b = "y"', "only AND"),
    ('a = ', "expected a value, but the filter ends there"),
    ('a IN "x"', r"expected \( after IN"),
    ('a IN ("x"', r"expected \) closing IN"),
    ("bad key! = 1", "cannot read|expected an operator"),
    ('year > 1 AND year > 2', "two > bounds"),
    ('year > 1 AND year < "b"', "mixes numbers and strings"),
    ('"quoted" = 1', "expected a metadata key"),
])
def test_parse_filter_rejects_what_it_does_not_support(text, message):
    with pytest.raises(InvalidArgument, match=message) as err:
        flt.parse_filter(text)
    assert err.value.field == "filter"


def test_proto_round_trip_and_validation():
    conds = [flt.Condition("status", "eq", ("现行有效",)), flt.Condition("k", "in", ("a", "b")),
             flt.Condition("n", "range", gt="1.5", numeric=True), flt.Condition("d", "range", gte="2020-01-01", lte="2020-12-31")]
    assert flt.from_proto(flt.to_proto(conds)) == conds
    with pytest.raises(InvalidArgument) as err:
        flt.from_proto([types_pb2.MetadataFilter(key="ok", equals="x"), types_pb2.MetadataFilter(key="no key!", equals="x")])
    assert err.value.field == "filters[1].key"
    with pytest.raises(InvalidArgument, match="needs one of"):
        flt.from_proto([types_pb2.MetadataFilter(key="k")])
    with pytest.raises(InvalidArgument, match="not a number"):
        flt.from_proto([types_pb2.MetadataFilter(key="k", range=types_pb2.MetadataRange(gt="abc", numeric=True))])
    with pytest.raises(InvalidArgument, match="at least one bound"):
        flt.from_proto([types_pb2.MetadataFilter(key="k", range=types_pb2.MetadataRange())])
    assert flt.Condition("状态", "eq", ("x",)) == flt.from_proto([types_pb2.MetadataFilter(key="状态", equals="x")])[0]
    # a trial's over-long anyOf value was named filters[0].value, a field the request does not have
    long = "x" * (flt.MAX_VALUE_CHARS + 1)
    for filters, field in (([types_pb2.MetadataFilter(key="k", any_of=types_pb2.StringList(values=["a", long]))], "filters[0].any_of.values[1]"),
                           ([types_pb2.MetadataFilter(key="k", equals="a"), types_pb2.MetadataFilter(key="k", equals=long)], "filters[1].equals")):
        with pytest.raises(InvalidArgument) as err:
            flt.from_proto(filters)
        assert err.value.field == field


def test_matches_is_the_reference_semantics():
    conds = flt.parse_filter('status = "现行有效" AND year >= 2000 AND date < "2021"')
    assert flt.matches({"status": "现行有效", "year": "2005", "date": "2020-05-01"}, conds)
    assert not flt.matches({"status": "已废止", "year": "2005", "date": "2020-05-01"}, conds)
    assert not flt.matches({"status": "现行有效", "year": "1999", "date": "2020-05-01"}, conds)
    assert not flt.matches({"status": "现行有效", "year": "n/a", "date": "2020"}, conds)  # not a number: no match
    assert not flt.matches({"status": "现行有效", "date": "2020"}, conds)  # missing key: no match
    # numeric, not string, order: "10" > "9"
    assert flt.matches({"n": "10"}, flt.parse_filter("n > 9"))
    assert not flt.matches({"n": "10"}, flt.parse_filter('n > "9"'))


def test_sql_binds_every_value_and_key():
    conds = [flt.Condition("status", "eq", (EVIL,)),
             flt.Condition("k.ey-1", "in", (EVIL, "b")), flt.Condition("n", "range", gte="1", lt="9", numeric=True),
             flt.Condition("d", "range", gt=EVIL)]
    params = Params("first")
    sql = scope_sql(["c1", EVIL], conds, params)
    assert EVIL not in sql and "status" not in sql and "k.ey-1" not in sql
    assert sql.startswith("d.collection = ANY($2::text[])")
    assert params.values[0] == "first" and ["c1", EVIL] in params.values and "status" in params.values
    import re

    assert {int(n) for n in re.findall(r"\$(\d+)", sql)} == set(range(2, len(params.values) + 1))  # all bound
    assert scope_sql(None, [], Params()) == "TRUE"
    with pytest.raises(ValueError):
        scope_sql(None, [], Params(), doc="d; DROP")


def test_cypher_binds_every_value_and_key():
    conds = [flt.Condition("status", "eq", (EVIL,)), flt.Condition("law", "in", ("a", EVIL)),
             flt.Condition("n", "range", gte="1", lt="9", numeric=True), flt.Condition("d", "range", gt=EVIL)]
    params: dict = {}
    cypher = scope_cypher(["default"], conds, params)
    assert EVIL not in cypher and "status" not in cypher and "law" not in cypher
    assert cypher.startswith("d.collection IN $s_collections AND d[$s_k0] = $s_v0")
    assert params["s_k0"] == META_PREFIX + "status" and params["s_v1"] == ["a", EVIL]
    assert "toFloatOrNull(d[$s_k2]) >= $s_b2_0" in cypher and params["s_b2_0"] == 1.0
    assert scope_cypher(None, [], {}) == "true"


def test_meta_properties_remove_keys_that_are_gone():
    assert meta_properties({"a": "1"}, {"a": "0", "b": "2"}) == {"meta.a": "1", "meta.b": None}


def test_not_is_refused_saying_so():
    with pytest.raises(InvalidArgument, match="NOT is not supported") as err:
        flt.parse_filter('NOT team = "支付"')
    assert err.value.field == "filter"


@pytest.mark.parametrize("bounds, numeric", [
    ({"gte": "z", "lte": "a"}, False),  # a trial's swapped bounds: 200 with nothing found
    ({"gt": "10", "lt": "9"}, True),
    ({"gt": "5", "lte": "5"}, True),
    ({"gte": "2021", "lt": "2021"}, False),
])
def test_a_range_no_value_lies_in_is_refused_naming_it(bounds, numeric):
    with pytest.raises(InvalidArgument, match="swapped") as err:
        flt.from_proto([types_pb2.MetadataFilter(key="a", range=types_pb2.MetadataRange(numeric=numeric, **bounds))])
    assert err.value.field == "filters[0].range"


def test_a_range_whose_numeric_flag_is_unset_compares_numbers_as_numbers():
    """A trial's REST search for n >= "10" matched n = "5" (code-point order) unless it set numeric: true,
    while the same condition in the list filter syntax compared numbers."""
    def condition_of(**bounds) -> flt.Condition:
        return flt.from_proto([types_pb2.MetadataFilter(key="n", range=types_pb2.MetadataRange(**bounds))])[0]

    assert condition_of(gte="10").numeric and not flt.matches({"n": "5"}, [condition_of(gte="10")])
    assert flt.matches({"n": "5"}, [condition_of(lte="10")])
    assert condition_of(gt="1.5", lt="1e3").numeric
    assert not condition_of(gte="2020-01-01").numeric  # dates stay in code-point order
    assert not condition_of(gte="10", numeric=False).numeric  # a flag set either way is kept
    assert flt.matches({"n": "5"}, [condition_of(gte="10", numeric=False)])
    assert flt.parse_filter("n >= 10") == [condition_of(gte="10")]  # the two syntaxes agree


def test_ranges_with_equal_closed_bounds_or_numbers_in_numeric_order_are_kept():
    assert flt.condition("n", "range", gte="5", lte="5", numeric=True).bounds()
    assert flt.condition("n", "range", gt="9", lt="10", numeric=True).bounds()  # "9" > "10" as text, not as numbers
    assert flt.condition("d", "range", gte="2020", lte="2021").bounds()


def test_a_single_quoted_value_is_a_string_as_a_double_quoted_one_is():
    # a trial's type='changelog' kept its quotes in the value and matched nothing, without a word why
    assert flt.parse_filter("type='changelog'") == flt.parse_filter('type = "changelog"')
    assert flt.parse_filter("t IN ('a b', \"c\")")[0].values == ("a b", "c")
    assert flt.parse_filter("name = O'Brien")[0].values == ("O'Brien",)  # a quote inside a bare word stays in it


def test_the_quotes_a_chinese_input_method_types_quote_a_string():
    """A trial's 年级 = “高一” (typed with a Chinese input method) matched nothing: the quotes were in the value."""
    assert flt.parse_filter("年级 = “高一”") == flt.parse_filter('年级 = "高一"')
    assert flt.parse_filter("年级 IN (‘高一’, 「高二」)")[0].values == ("高一", "高二")
    with pytest.raises(InvalidArgument):
        flt.parse_filter("年级 = “高一")  # an unclosed quote is refused, not read as part of a value
