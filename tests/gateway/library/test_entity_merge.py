"""The pure rules of knowledge-graph editing: alias union, fields, facts
and children re-pointed at the survivor, self-loops and duplicates, and
the update mask."""
from __future__ import annotations

import pytest

from graphmesh.common.v1 import entity_pb2
from services.common.errors import InvalidArgument
from services.gateway.library import entity_merge as m

pytestmark = pytest.mark.unit


def entity(name, **fields) -> entity_pb2.Entity:
    return entity_pb2.Entity(name=name, **fields)


def test_aliases_are_the_union_with_the_merged_names_and_no_repeats_by_key():
    survivor = entity("Beck抑郁量表", aliases=["BDI", "贝克量表"])
    merged = [entity("贝克抑郁量表", aliases=["bdi", "Beck 抑郁量表", "BDI-II"]), entity("BDI-II", aliases=["贝克量表"])]
    out = m.merge_fields(survivor, merged)
    # "bdi" folds into "BDI"; "Beck 抑郁量表" is the survivor's own name; "BDI-II" only once
    assert list(out.aliases) == ["BDI", "贝克量表", "贝克抑郁量表", "BDI-II"]
    assert out.name == "Beck抑郁量表"


def test_fields_the_survivor_lacks_come_from_the_merged_and_its_own_win():
    survivor = entity("A", category="", definition="own", attributes={"unit": "mg", "x": "1"}, parents=["P"])
    merged = [entity("B", category="cat-B", definition="B's", attributes={"unit": "g", "icd": "J11"}, parents=["Q", "A", "P"])]
    out = m.merge_fields(survivor, merged)
    assert out.category == "cat-B" and out.definition == "own"
    assert dict(out.attributes) == {"unit": "mg", "x": "1", "icd": "J11"}
    assert list(out.parents) == ["P", "Q"]  # the survivor is never its own parent


def test_a_merged_entity_as_parent_becomes_the_survivor_but_not_of_itself():
    out = m.merge_fields(entity("A", parents=["B"]), [entity("B", parents=["C"])])
    assert list(out.parents) == ["C"]


def test_facts_are_repointed_and_self_loops_and_duplicates_dropped():
    triples = [("B", "症状", "发热"), ("A", "症状", "发热"), ("X", "治疗", "B"), ("B", "并发", "A"), ("A", "并发", "B"),
               ("C", "治疗", "B"), ("C", "治疗", "D"), ("X", "治疗", "C")]
    existing = [t for t in triples if "B" not in (t[0], t[2]) and "D" not in (t[0], t[2])]
    moved = m.repoint_triples(triples, "A", ["B", "D"], existing)
    assert moved == [("X", "治疗", "A"), ("C", "治疗", "A")]
    # without existing facts the survivor's own copy is new
    assert m.repoint_triples([("B", "症状", "发热"), ("B", "症状", "发热")], "A", ["B"]) == [("A", "症状", "发热")]


def test_facts_naming_no_merged_entity_are_left_out():
    assert m.repoint_triples([("A", "p", "o"), ("X", "p", "Y")], "A", ["B"]) == []


def test_children_get_the_survivor_as_parent_once():
    children = [entity("c1", parents=["B", "A"]), entity("c2", parents=["B", "Z"]), entity("c3", parents=["Z"]),
                entity("A", parents=["B"]), entity("B2", parents=["B"])]
    out = m.repoint_children(children, "A", ["B", "B2"])
    assert [(c.name, list(c.parents)) for c in out] == [("c1", ["A"]), ("c2", ["A", "Z"])]


def test_merge_targets_refuse_the_survivor_itself_and_repeats():
    with pytest.raises(InvalidArgument) as err:
        m.merge_targets("A", ["B", "A"])
    assert err.value.field == "entities[1]"
    with pytest.raises(InvalidArgument) as err:
        m.merge_targets("A", ["B", "B"])
    assert err.value.field == "entities[1]"
    with pytest.raises(InvalidArgument) as err:
        m.merge_targets("A", [])
    assert err.value.field == "entities"


def test_update_mask_changes_only_the_named_fields():
    current = entity("A", category="c", definition="d", aliases=["x"], parents=["P"], attributes={"k": "v"})
    patch = entity("", category="new", definition="nd", aliases=["y", "A", "y"])
    out = m.apply_mask(current, patch, ["aliases"])
    assert list(out.aliases) == ["y"] and out.category == "c" and out.definition == "d"
    implied = m.apply_mask(current, patch, [])  # no mask: the fields the patch sets
    assert (implied.category, implied.definition, list(implied.aliases), list(implied.parents)) == ("new", "nd", ["y"], ["P"])
    everything = m.apply_mask(current, patch, ["*"])
    assert list(everything.parents) == [] and dict(everything.attributes) == {}


@pytest.mark.parametrize("paths,field", [(["name"], "update_mask.paths[0]"), (["aliases", "relations"], "update_mask.paths[1]")])
def test_update_mask_refuses_paths_it_cannot_update(paths, field):
    with pytest.raises(InvalidArgument) as err:
        m.apply_mask(entity("A"), entity(""), paths)
    assert err.value.field == field


def test_update_cannot_rename():
    with pytest.raises(InvalidArgument) as err:
        m.apply_mask(entity("A"), entity("B"), ["category"])
    assert err.value.field == "entity.name"
