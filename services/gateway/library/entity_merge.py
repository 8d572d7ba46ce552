"""Pure rules of knowledge-graph editing: merging entities into a survivor
(alias union, fields, facts and children re-pointed) and applying an
update mask. No I/O; ``graph_editing`` applies the results to the stores.

Names are compared by ``name_key`` (NFKC, case and separators folded), as
the stores do, so "Beck 抑郁量表" and "beck抑郁量表" are one alias.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from graphmesh.common.v1 import entity_pb2
from services.common.entity_skeleton import name_key
from services.common.errors import InvalidArgument

#: Fields UpdateEntity may change (the update mask's paths).
UPDATABLE = ("category", "definition", "aliases", "parents", "attributes")
Triple = tuple[str, str, str]


def _distinct(values: Iterable[str], leave_out: Iterable[str] = ()) -> list[str]:
    """Non-blank values, first of each name key kept, none with a key in ``leave_out``."""
    seen = {name_key(v) for v in leave_out}
    out = []
    for value in values:
        key = name_key(value)
        if value.strip() and key and key not in seen:
            seen.add(key)
            out.append(value.strip())
    return out


def merge_fields(survivor: entity_pb2.Entity, merged: Sequence[entity_pb2.Entity]) -> entity_pb2.Entity:
    """The survivor after ``merged`` are merged into it: its aliases, then
    each merged entity's name and aliases (no repeats, none equal to the
    survivor's name); its parents, then theirs, a merged entity as parent
    becoming the survivor and the survivor never its own parent; its
    category and definition, or the first merged entity's where it has
    none; attributes of all, the survivor's winning."""
    gone = {m.name for m in merged}
    out = entity_pb2.Entity()
    out.CopyFrom(survivor)
    del out.aliases[:]
    out.aliases.extend(_distinct([*survivor.aliases, *(a for m in merged for a in (m.name, *m.aliases))], [survivor.name]))
    parents = [survivor.name if p in gone else p for p in [*survivor.parents, *(p for m in merged for p in m.parents)]]
    del out.parents[:]
    out.parents.extend(_distinct(parents, [survivor.name]))
    out.category = survivor.category or next((m.category for m in merged if m.category), "")
    out.definition = survivor.definition or next((m.definition for m in merged if m.definition), "")
    attributes: dict[str, str] = {}
    for m in merged:
        attributes.update({k: v for k, v in m.attributes.items() if k not in attributes})
    attributes.update(survivor.attributes)
    out.attributes.clear()
    out.attributes.update(attributes)
    return out


def repoint_triples(triples: Iterable[Triple], survivor: str, merged: Iterable[str],
                    existing: Iterable[Triple] = ()) -> list[Triple]:
    """The facts of the merged entities re-pointed at the survivor, in
    order: a merged name as subject or object becomes ``survivor``; a fact
    that then links the survivor to itself is dropped (it said the two
    were related, which the merge makes moot), and so is one already
    among ``existing`` or earlier in the list. Facts naming no merged
    entity are not returned (they stay as they are)."""
    gone = set(merged)
    seen = set(existing)
    out: list[Triple] = []
    for s, p, o in triples:
        if s not in gone and o not in gone:
            continue
        moved = (survivor if s in gone else s, p, survivor if o in gone else o)
        if moved[0] == survivor and moved[2] == survivor or moved in seen:
            continue
        seen.add(moved)
        out.append(moved)
    return out


def repoint_children(children: Iterable[entity_pb2.Entity], survivor: str,
                     merged: Iterable[str]) -> list[entity_pb2.Entity]:
    """The entities whose parents name a merged entity, with the survivor
    in its place (once, and never as its own parent); the survivor and
    the merged entities themselves are left out (merge_fields covers the
    survivor; the merged go)."""
    gone = set(merged)
    out = []
    for child in children:
        if child.name == survivor or child.name in gone or not gone & set(child.parents):
            continue
        changed = entity_pb2.Entity()
        changed.CopyFrom(child)
        del changed.parents[:]
        changed.parents.extend(_distinct((survivor if p in gone else p for p in child.parents), [child.name]))
        out.append(changed)
    return out


def merge_targets(survivor: str, merged: Sequence[str]) -> list[str]:
    """The merged names, checked: none the survivor, none repeated.

    Raises:
        InvalidArgument ("entities" or "entities[i]").
    """
    if not merged:
        raise InvalidArgument("entities", "name at least one entity to merge into the survivor")
    seen: set[str] = set()
    for i, name in enumerate(merged):
        if name == survivor:
            raise InvalidArgument(f"entities[{i}]", "is the survivor itself: an entity cannot be merged into itself")
        if name in seen:
            raise InvalidArgument(f"entities[{i}]", f"repeats {name!r}")
        seen.add(name)
    return list(merged)


def apply_mask(current: entity_pb2.Entity, patch: entity_pb2.Entity, paths: Sequence[str]) -> entity_pb2.Entity:
    """``current`` with the fields of ``paths`` taken from ``patch`` (AIP-134):
    "*" means every updatable field; no paths, the fields ``patch`` sets
    (non-empty). The name never changes (renaming is a merge).

    Raises:
        InvalidArgument: "update_mask.paths[i]" unknown or not updatable;
            "entity.name" another entity's name.
    """
    if patch.name.strip() and patch.name.strip() != current.name:
        raise InvalidArgument("entity.name", "cannot change (merge the entity into one of the new name instead)")
    fields: list[str] = []
    for i, path in enumerate(paths):
        if path == "*":
            fields.extend(UPDATABLE)
        elif path in UPDATABLE:
            fields.append(path)
        else:
            raise InvalidArgument(f"update_mask.paths[{i}]", f"{path!r} cannot be updated; updatable: {', '.join(UPDATABLE)} or *")
    if not paths:
        fields = [f for f in UPDATABLE if getattr(patch, f)]
    out = entity_pb2.Entity()
    out.CopyFrom(current)
    for f in dict.fromkeys(fields):
        if f in ("category", "definition"):
            setattr(out, f, getattr(patch, f).strip() if f == "category" else getattr(patch, f))
        elif f == "attributes":
            out.attributes.clear()
            out.attributes.update(patch.attributes)
        else:
            del getattr(out, f)[:]
            getattr(out, f).extend(_distinct(getattr(patch, f), [current.name]))
    return out
