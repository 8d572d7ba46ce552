"""``graphmesh entity`` and ``graphmesh relations``: editing the knowledge
graph over the gateway at GRAPHMESH_GATEWAY_ADDR (``graphmesh entities
QUERY`` searches it).

  graphmesh entity get NAME [--collection C] [--json]
  graphmesh entity update NAME [--category X] [--definition X] [--aliases a,b] [--parents a,b]
                               [--attribute k=v ...] [--collection C]   (only the options given change)
  graphmesh entity delete NAME [--collection C]
  graphmesh entity merge SURVIVOR MERGED... [--collection C]
  graphmesh entity export --out DIR [--collection C]   (DIR/entities.jsonl, DIR/triples.jsonl:
                                                         `graphmesh ingest entities|triples` reads them)
  graphmesh relations add|delete SUBJECT PREDICATE OBJECT [--collection C]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc
from google.protobuf import field_mask_pb2

from graphmesh.common.v1 import entity_pb2
from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.cli.client import _report_rpc_error, gateway_channel, proto_json

TIMEOUT = 600.0
EXPORT_PAGE = 5_000


def add_parsers(sub) -> None:
    """The entity and relations subcommands."""
    ent = sub.add_parser("entity", help="get, update, delete, merge or export library entities")
    ent.add_argument("action", choices=["get", "update", "delete", "merge", "export"])
    ent.add_argument("names", nargs="*", help="entity names (merge: the survivor, then those merged into it)")
    ent.add_argument("--collection", default="default")
    ent.add_argument("--category")
    ent.add_argument("--definition")
    ent.add_argument("--aliases", help="comma-separated; replaces the aliases")
    ent.add_argument("--parents", help="comma-separated; replaces the parents")
    ent.add_argument("--attribute", action="append", default=[], metavar="K=V", help="repeatable; replaces the attributes")
    ent.add_argument("--out", help="export: folder for entities.jsonl and triples.jsonl")
    ent.add_argument("--json", action="store_true")
    rel = sub.add_parser("relations", help="add or delete one knowledge-graph fact")
    rel.add_argument("action", choices=["add", "delete"])
    rel.add_argument("subject")
    rel.add_argument("predicate")
    rel.add_argument("object")
    rel.add_argument("--collection", default="default")


def _name(collection: str, entity: str) -> str:
    return f"collections/{collection}/entities/{entity}"


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _update_request(args: argparse.Namespace) -> gateway_pb2.UpdateEntityRequest | str:
    """The UpdateEntityRequest of the options given, or what is wrong."""
    patch, paths = entity_pb2.Entity(), []
    for field in ("category", "definition"):
        if getattr(args, field) is not None:
            setattr(patch, field, getattr(args, field))
            paths.append(field)
    for field in ("aliases", "parents"):
        if getattr(args, field) is not None:
            getattr(patch, field).extend(_split(getattr(args, field)))
            paths.append(field)
    if args.attribute:
        for pair in args.attribute:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                return f"--attribute takes K=V, got {pair!r}"
            patch.attributes[key.strip()] = value
        paths.append("attributes")
    if not paths:
        return "update needs at least one of --category --definition --aliases --parents --attribute"
    return gateway_pb2.UpdateEntityRequest(name=_name(args.collection, args.names[0]), entity=patch,
                                           update_mask=field_mask_pb2.FieldMask(paths=paths))


def _print(message, as_json: bool = True) -> None:
    print(proto_json(message, indent=2 if as_json else None))


def cmd_entity(args: argparse.Namespace) -> int:
    """entity get | update | delete | merge | export."""
    wanted = {"get": 1, "update": 1, "delete": 1}.get(args.action)
    if wanted and len(args.names) != wanted or args.action == "merge" and len(args.names) < 2:
        print(f"error: entity {args.action} takes {'SURVIVOR MERGED...' if args.action == 'merge' else 'one NAME'}", file=sys.stderr)
        return 2
    if args.action == "export" and not args.out:
        print("error: entity export needs --out DIR", file=sys.stderr)
        return 2
    try:
        with gateway_channel() as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            if args.action == "get":
                _print(stub.GetEntity(gateway_pb2.GetEntityRequest(name=_name(args.collection, args.names[0])), timeout=TIMEOUT).entity)
            elif args.action == "update":
                request = _update_request(args)
                if isinstance(request, str):
                    print(f"error: {request}", file=sys.stderr)
                    return 2
                _print(stub.UpdateEntity(request, timeout=TIMEOUT).entity)
            elif args.action == "delete":
                _print(stub.DeleteEntity(gateway_pb2.DeleteEntityRequest(name=_name(args.collection, args.names[0])), timeout=TIMEOUT))
            elif args.action == "merge":
                _print(stub.MergeEntities(gateway_pb2.MergeEntitiesRequest(
                    name=_name(args.collection, args.names[0]), entities=[_name(args.collection, n) for n in args.names[1:]]),
                    timeout=TIMEOUT))
            else:
                return _export(stub, args.collection, Path(args.out))
    except grpc.RpcError as err:
        return _report_rpc_error(err)
    return 0


def _export(stub: gateway_pb2_grpc.GatewayServiceStub, collection: str, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    entities, triples, token = 0, 0, ""
    with (out / "entities.jsonl").open("w", encoding="utf-8") as ef, (out / "triples.jsonl").open("w", encoding="utf-8") as tf:
        while True:
            page = stub.ExportEntities(gateway_pb2.ExportEntitiesRequest(
                parent=f"collections/{collection}", page_size=EXPORT_PAGE, page_token=token), timeout=TIMEOUT)
            ef.write(page.entities_jsonl)
            tf.write(page.triples_jsonl)
            entities += page.entities_jsonl.count("\n")
            triples += page.triples_jsonl.count("\n")
            token = page.next_page_token
            if not token:
                break
    print(f"{entities} entities -> {out / 'entities.jsonl'}; {triples} triples -> {out / 'triples.jsonl'}")
    return 0


def cmd_relations(args: argparse.Namespace) -> int:
    """relations add | delete SUBJECT PREDICATE OBJECT."""
    fact = entity_pb2.Triple(subject=args.subject, predicate=args.predicate, object=args.object)
    parent = f"collections/{args.collection}"
    try:
        with gateway_channel() as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            if args.action == "add":
                _print(stub.CreateRelation(gateway_pb2.CreateRelationRequest(parent=parent, relation=fact), timeout=TIMEOUT), False)
            else:
                _print(stub.DeleteRelation(gateway_pb2.DeleteRelationRequest(parent=parent, relation=fact), timeout=TIMEOUT), False)
    except grpc.RpcError as err:
        return _report_rpc_error(err)
    return 0
