"""Crash trials beyond document ingest (issue 26 item 2; not a test): kill a
part of the stack with SIGKILL at a random point of a write, bring it back,
retry the write until it succeeds (a client retrying), then check both
stores directly.

    python bench/crash_workloads.py [--workloads entities,triples,delete_documents,delete_collection,import]
                                    [--trials 10] [--seed 26] [--import-batch N] [--home DIR] [--keep]

Workloads (each trial wipes both stores first; targets go round in turn:
the gateway, retriever_pg, retriever_graph, PostgreSQL, Neo4j):

- entities: the first --entities medkg entities (with their aliases and
  parents) into collection "trial", in calls of 500, killed mid-way. Oracle:
  the same calls made cleanly into collection "ref" beforehand; both
  collections' snapshots (bench/store_snapshot.py: entity cards, surfaces
  with vectors, n-gram postings, every node and relationship in Neo4j) must
  be equal, with no duplicated node or relationship.
- triples: the entities stored cleanly in both collections, then the
  triples among them (--triples) into "trial" in calls of 500, killed
  mid-way; same oracle.
- delete_documents: --docs law articles stored, then half of them (drawn)
  deleted by name in calls of 100, killed mid-way; the deletes retried.
  Checked with services/common/store_check.py against the other half (documents,
  chunks, vectors, postings, graph nodes and edges, nothing else).
- delete_collection: the articles split over collections "a" and "b", then
  DeleteCollection("collections/a") killed mid-way and retried. Checked:
  store_check against b's half, and nothing left in either store that names
  collection "a" (rows, nodes).
- import: --docs law articles as one ImportDocuments operation (a
  long-running import, stored by the gateway in batches of its
  ``operations.batch_records``: 200 by default, or --import-batch), the
  target killed at a random point while it runs. The operation must then end by itself: ABORTED
  when the gateway was killed (its restart ends what it left running), else
  finished (per-document failures allowed) or failed with the code of the
  part that was down, never INTERNAL or still running. The same import is
  then run again until it finishes with no failure. Checked: store_check
  against the articles, the collection's snapshot equal to that of one clean
  import (taken before the trials), and no operation left running.

Re-ingest of changed documents is bench/crash_trials.py's "changed" mode.
Figures are printed and saved under bench/results/.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, save  # noqa: E402
from crash_trials import TARGETS, kill, repair, wipe  # noqa: E402
from harness import LAW_CORPUS, PORTS, Stack, read_lines  # noqa: E402

WORKLOADS = ("entities", "triples", "delete_documents", "delete_collection", "import")
MEDKG = SHARED_DATA / "medkg-zh"


def calls(make_calls) -> tuple[list, str]:
    """Runs the gateway calls ``make_calls(stub)`` yields (each a function
    of no argument doing one RPC), in order, stopping at the first error.
    Returns (the replies, the error as "CODE: detail" or "")."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2_grpc

    replies: list = []
    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for call in make_calls(stub):
            try:
                replies.append(call())
            except grpc.RpcError as err:
                return replies, f"{err.code().name}: {(err.details() or '')[:200]}"
    return replies, ""


def ingest_calls(lines: list[str], kind: int, collection: str, batch: int, pack: str = ""):
    from graphmesh.gateway.v1 import gateway_pb2

    def make(stub):
        for start in range(0, len(lines), batch):
            request = gateway_pb2.IngestRequest(jsonl="\n".join(lines[start:start + batch]).encode(), kind=kind,
                                                collection=collection, domain_pack=pack)
            yield lambda request=request: _checked(stub.Ingest(request, timeout=900))
    return make


def _checked(reply):
    if reply.failures:
        raise RuntimeError(f"ingest failures: {reply.failures[0].reason[:200]}")
    return reply


def delete_calls(ids: list[str], collection: str, batch: int = 100):
    from graphmesh.gateway.v1 import gateway_pb2

    def make(stub):
        for start in range(0, len(ids), batch):
            names = [f"collections/{collection}/documents/{i}" for i in ids[start:start + batch]]
            request = gateway_pb2.DeleteDocumentsRequest(parent=f"collections/{collection}", names=names)
            yield lambda request=request: stub.DeleteDocuments(request, timeout=900)
    return make


def delete_collection_call(collection: str):
    from graphmesh.gateway.v1 import gateway_pb2

    def make(stub):
        yield lambda: stub.DeleteCollection(gateway_pb2.DeleteCollectionRequest(name=f"collections/{collection}"),
                                            timeout=900)
    return make


def start_import(lines: list[str], collection: str = "default", pack: str = "law_zh") -> str:
    """Starts one ImportDocuments operation of ``lines``; returns its name."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        request = gateway_pb2.IngestRequest(jsonl="\n".join(lines).encode(), collection=collection, domain_pack=pack)
        return gateway_pb2_grpc.GatewayServiceStub(ch).ImportDocuments(request, timeout=60).name


#: GetOperation answers other than OK, UNAVAILABLE and a 5 s timeout seen while polling
#: ("CODE: detail"); each is a problem of the trial it was seen in.
ODD_ANSWERS: list[str] = []


def get_operation(name: str):
    """The operation ``name`` (google.longrunning.Operation), or None while
    the gateway cannot answer (any other code than UNAVAILABLE or
    DEADLINE_EXCEEDED is kept in ODD_ANSWERS)."""
    import grpc
    from google.longrunning import operations_pb2, operations_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        try:
            return operations_pb2_grpc.OperationsStub(ch).GetOperation(
                operations_pb2.GetOperationRequest(name=name), timeout=5)
        except grpc.RpcError as err:
            if err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                ODD_ANSWERS.append(f"{err.code().name}: {(err.details() or '')[:160]}")
            return None


def running_operations() -> list[str]:
    """Names of the operations the gateway lists as not done."""
    import grpc
    from google.longrunning import operations_pb2, operations_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        reply = operations_pb2_grpc.OperationsStub(ch).ListOperations(
            operations_pb2.ListOperationsRequest(filter="done = false", page_size=1000), timeout=10)
    return [op.name for op in reply.operations]


def wait_operation(name: str, timeout: float):
    """Polls ``name`` every 0.25 s until it is done or ``timeout`` seconds
    have passed; returns (the last operation seen or None, seconds waited)."""
    started, last = time.monotonic(), None
    while time.monotonic() - started < timeout:
        op = get_operation(name)
        last = op if op is not None else last
        if op is not None and op.done:
            break
        time.sleep(0.25)
    return last, time.monotonic() - started


def outcome(op) -> dict:
    """An operation's end, as figures: done, code ("OK" for a response),
    message, metadata progress, response counts and its first failure."""
    from google.rpc import code_pb2

    from graphmesh.gateway.v1 import gateway_pb2

    if op is None:
        return {"done": False, "code": "unreachable"}
    meta = gateway_pb2.IngestOperationMetadata()
    op.metadata.Unpack(meta)
    out = {"done": op.done, "received": meta.received, "total": meta.total}
    if not op.done:
        out["code"] = "running"
    elif op.HasField("error"):
        out.update(code=code_pb2.Code.Name(op.error.code), message=op.error.message[:200])
    else:
        reply = gateway_pb2.IngestResponse()
        op.response.Unpack(reply)
        out.update(code="OK", stored=reply.stored, unchanged=reply.unchanged, failures=len(reply.failures),
                   first_failure=reply.failures[0].reason[:200] if reply.failures else "")
    return out


def import_once(lines: list[str], timeout: float = 900) -> dict:
    """One ImportDocuments operation of ``lines``, waited for; its outcome,
    with "error" set unless it finished with no failure."""
    try:
        name = start_import(lines)
    except Exception as err:  # noqa: BLE001 - reported, the caller retries
        return {"error": f"ImportDocuments: {err!r}"[:200]}
    op, waited = wait_operation(name, timeout)
    out = outcome(op)
    out["seconds"] = round(waited, 1)
    if out["code"] != "OK" or out.get("failures"):
        out["error"] = f"{out['code']}: {out.get('message') or out.get('first_failure') or ''}"[:200]
    return out


#: How long an interrupted import may take to end after the repair: its
#: batch in flight fails or finishes; an orphan is ended at the latest one
#: heartbeat lease (60 s) later.
IMPORT_END_WAIT_S = 150.0


def interrupted_import(stack: Stack, target: str, lines: list[str], delay: float) -> dict:
    """Starts an ImportDocuments operation of ``lines``, kills ``target``
    after ``delay`` seconds, repairs it, waits for the operation to end and
    runs the same import again until it finishes with no failure."""
    ODD_ANSWERS.clear()
    name = start_import(lines)
    started = time.monotonic()
    time.sleep(delay)
    before = outcome(get_operation(name))
    kill(stack, target)
    killed_at = time.monotonic() - started
    repair_started = time.monotonic()
    repair(stack, target)
    repaired = time.monotonic()
    op, waited = wait_operation(name, IMPORT_END_WAIT_S)
    end = outcome(op)
    expected = "ABORTED" if target == "gateway" else None
    if not end["done"]:
        verdict = f"not done {waited:.0f} s after the repair ({end['code']})"
    elif expected and end["code"] != expected:
        verdict = f"ended {end['code']}, expected {expected}"
    elif not expected and end["code"] in ("INTERNAL", "UNKNOWN", "ABORTED"):
        verdict = f"ended {end['code']} although the gateway was not killed: {end.get('message', '')[:120]}"
    else:
        verdict = ""
    tries, again = 0, {"error": "not run"}
    while again.get("error") and tries < 10:
        tries += 1
        again = import_once(lines)
        if again.get("error"):
            time.sleep(2)
    return {"killed_after_s": round(killed_at, 2), "write_still_running": not before["done"],
            "calls_done_before_kill": before.get("received", 0), "progress_before_kill": before,
            "interrupted": f"{end['code']}" + (f": {end.get('message') or end.get('first_failure') or ''}"[:120]
                                                if end["code"] != "OK" or end.get("failures") else ""),
            "operation_end": end, "ended_after_repair_s": round(repaired - repair_started + waited, 1) if end["done"] else None,
            "repair_s": round(repaired - repair_started, 1), "end_problem": verdict,
            "retry_tries": tries, "retry_error": again.get("error", ""), "retry": again,
            "odd_get_operation_answers": ODD_ANSWERS[:10]}


def until_done(make, tries: int = 10) -> tuple[int, str]:
    """Retries ``make``'s calls (all of them, again) until a run has no error."""
    error = "not run"
    for attempt in range(1, tries + 1):
        _, error = calls(make)
        if not error:
            return attempt, ""
        time.sleep(2)
    return tries, error


def medkg(entities: int, triples: int) -> tuple[list[str], list[str]]:
    """The first ``entities`` entity lines, and up to ``triples`` triple lines whose subject is one of them."""
    with gzip.open(MEDKG / "entities.jsonl.gz", "rt", encoding="utf-8") as f:
        entity_lines = [line.rstrip("\n") for _, line in zip(range(entities), f)]
    names = {json.loads(line)["name"] for line in entity_lines}
    triple_lines = []
    with gzip.open(MEDKG / "triples.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if json.loads(line)["subject"] in names:
                triple_lines.append(line.rstrip("\n"))
                if len(triple_lines) >= triples:
                    break
    return entity_lines, triple_lines


def interrupted(stack: Stack, target: str, make, delay: float) -> dict:
    """Runs ``make``'s calls in a thread, kills ``target`` after ``delay``
    seconds, repairs it and retries the calls until they succeed."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(zip(("replies", "error"), calls(make))), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(delay)
    running = thread.is_alive()
    kill(stack, target)
    killed_at = time.monotonic() - started
    thread.join(900)
    repair(stack, target)
    tries, error = until_done(make)
    return {"killed_after_s": round(killed_at, 2), "write_still_running": running,
            "calls_done_before_kill": len(result.get("replies", [])), "interrupted": result.get("error") or "finished",
            "retry_tries": tries, "retry_error": error}


def timed(make) -> float:
    started = time.monotonic()
    _, error = calls(make)
    if error:
        raise RuntimeError(f"a clean write failed: {error}")
    return time.monotonic() - started


def trial(stack: Stack, workload: str, number: int, seed: int, data: dict) -> dict:
    from store_snapshot import leftovers, snapshot

    from graphmesh.gateway.v1 import gateway_pb2
    from services.common.store_check import check_stores, expected_documents

    rng = random.Random(seed)
    target = TARGETS[number % len(TARGETS)]
    asyncio.run(wipe_all(stack))
    entities, triples, docs = data["entities"], data["triples"], data["docs"]
    E, T = gateway_pb2.INGEST_KIND_ENTITIES, gateway_pb2.INGEST_KIND_TRIPLES
    if workload in ("entities", "triples"):
        duration = timed(ingest_calls(entities, E, "ref", 500))
        if workload == "triples":
            timed(ingest_calls(entities, E, "trial", 500))
            duration = timed(ingest_calls(triples, T, "ref", 500))
        make = ingest_calls(entities, E, "trial", 500) if workload == "entities" else ingest_calls(triples, T, "trial", 500)
        row = interrupted(stack, target, make, rng.uniform(0.05, 0.8) * duration)
        trial_state = asyncio.run(snapshot(stack.pg_dsn, stack.neo4j_uri, "trial", stack.neo4j_auth))
        reference = asyncio.run(snapshot(stack.pg_dsn, stack.neo4j_uri, "ref", stack.neo4j_auth))
        problems = trial_state.differences(reference)
        problems += [f"neo4j: {k} {v}" for k, v in trial_state.neo4j.items() if k.startswith(("duplicated", "crossing")) and v]
        size = {"entity_cards": len(reference.pg["entity_cards"]), "nodes": len(reference.neo4j["nodes"]),
                "relationships": len(reference.neo4j["relationships"])}
    elif workload == "delete_documents":
        timed(ingest_calls(docs, 0, "default", 250, "law_zh"))
        ids = [json.loads(line)["id"] for line in docs]
        doomed = set(rng.sample(ids, len(ids) // 2))
        make = delete_calls([str(i) for i in ids if i in doomed], "default")
        row = interrupted(stack, target, make, rng.uniform(0.05, 0.9) * data["delete_s"])
        kept = [line for line in docs if json.loads(line)["id"] not in doomed]
        problems = asyncio.run(check_stores(stack.pg_dsn, stack.neo4j_uri, expected_documents(kept), auth=stack.neo4j_auth))
        size = {"documents": len(docs), "deleted": len(doomed)}
    elif workload == "import":
        row = interrupted_import(stack, target, docs, rng.uniform(0.05, 0.9) * data["import_s"])
        problems = [f"operation: {row['end_problem']}"] if row["end_problem"] else []
        problems += [f"GetOperation answered {a}" for a in row["odd_get_operation_answers"]]
        problems += asyncio.run(check_stores(stack.pg_dsn, stack.neo4j_uri, expected_documents(docs), auth=stack.neo4j_auth))
        trial_state = asyncio.run(snapshot(stack.pg_dsn, stack.neo4j_uri, "default", stack.neo4j_auth))
        problems += trial_state.differences(data["import_snapshot"])
        problems += [f"neo4j: {k} {v}" for k, v in trial_state.neo4j.items() if k.startswith(("duplicated", "crossing")) and v]
        problems += [f"operation still running: {n}" for n in running_operations()]
        size = {"documents": len(docs), "batches": -(-len(docs) // data["import_batch"])}
    else:
        half = len(docs) // 2
        timed(ingest_calls(docs[:half], 0, "a", 250, "law_zh"))
        timed(ingest_calls(docs[half:], 0, "b", 250, "law_zh"))
        row = interrupted(stack, target, delete_collection_call("a"), rng.uniform(0.05, 0.9) * data["delete_s"])
        problems = asyncio.run(check_stores(stack.pg_dsn, stack.neo4j_uri, expected_documents(docs[half:], collection="b"), auth=stack.neo4j_auth))
        problems += [f"left in collection a: {k} {v}" for k, v in
                     asyncio.run(leftovers(stack.pg_dsn, stack.neo4j_uri, "a", stack.neo4j_auth)).items()]
        size = {"documents": len(docs), "deleted": half}
    row.update({"workload": workload, "trial": number, "seed": seed, "target": target, "size": size,
                "problems": problems[:50], "problem_count": len(problems)})
    print(f"{workload:17s} trial {number:2d} {target:16s}: killed after {row['killed_after_s']:5.1f} s "
          f"({row['calls_done_before_kill']} calls done, interrupted: {row['interrupted'][:60]}), "
          f"retries {row['retry_tries']} ({row['retry_error'] or 'ok'}), problems {len(problems)}"
          + (f": {problems[0][:160]}" if problems else ""), flush=True)
    return row


async def wipe_all(stack: Stack) -> None:
    """Both stores empty, entity tables and collections included."""
    import asyncpg

    await wipe(stack)
    conn = await asyncpg.connect(stack.pg_dsn)
    try:
        for table in ("entity_grams", "entity_surfaces", "entity_cards"):
            await conn.execute(f"TRUNCATE {table} CASCADE")
        await conn.execute("DELETE FROM collections WHERE name <> 'default'")
    finally:
        await conn.close()


def main() -> None:
    import logging

    logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)  # the snapshot's optional r.predicate
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "graphmesh" / "bench-crash"))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--trials", type=int, default=10, help="trials per workload")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--entities", type=int, default=2000)
    parser.add_argument("--triples", type=int, default=20000)
    parser.add_argument("--import-batch", type=int, default=0,
                        help="records per batch of the import workload's operation (default: the gateway's, 200)")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    entities, triples = medkg(args.entities, args.triples)
    docs = [line for _, line in zip(range(args.docs), read_lines(LAW_CORPUS))]
    env = {"GRAPHMESH_GATEWAY_OPERATIONS__BATCH_RECORDS": str(args.import_batch)} if args.import_batch else {}
    stack = Stack(Path(args.home), env=env)
    stack.start()
    rows = []
    try:
        asyncio.run(wipe_all(stack))
        timed(ingest_calls(docs, 0, "default", 250, "law_zh"))  # warms every service
        ids = [str(json.loads(line)["id"]) for line in docs]
        delete_s = timed(delete_calls(ids, "default"))
        print(f"{len(entities)} entities, {len(triples)} triples, {len(docs)} documents; "
              f"deleting them all takes {delete_s:.1f} s", flush=True)
        data = {"entities": entities, "triples": triples, "docs": docs, "delete_s": max(delete_s, 1.0)}
        if "import" in args.workloads.split(","):
            from store_snapshot import snapshot

            from services.gateway.config_groups import OperationsSettings

            asyncio.run(wipe_all(stack))
            clean = import_once(docs)
            if clean.get("error"):
                raise RuntimeError(f"a clean import failed: {clean['error']}")
            data["import_s"] = clean["seconds"]
            data["import_batch"] = args.import_batch or OperationsSettings().batch_records
            data["import_snapshot"] = asyncio.run(snapshot(stack.pg_dsn, stack.neo4j_uri, "default", stack.neo4j_auth))
            print(f"a clean import of {len(docs)} documents takes {clean['seconds']:.1f} s "
                  f"({data['import_batch']} per batch)", flush=True)
        for workload in args.workloads.split(","):
            for number in range(args.trials):
                rows.append(trial(stack, workload, number, args.seed * 1000 + number, data))
    finally:
        if not args.keep:
            stack.down()
    by_workload = {w: {"trials": sum(r["workload"] == w for r in rows),
                       "clean": sum(r["workload"] == w and not r["problem_count"] and not r["retry_error"] for r in rows)}
                   for w in args.workloads.split(",")}
    for w, figures in by_workload.items():
        print(f"{w}: {figures['clean']}/{figures['trials']} trials clean")
    save("crash_workloads", {"by_workload": by_workload, "rows": rows})


if __name__ == "__main__":
    main()
