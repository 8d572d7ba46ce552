"""Knowledge-graph load benchmark (not a test): writes an entity library and
its triples into Neo4j through KnowledgeGraphStore (batched UNWIND) and
prints entities/s and triples/s; the figures are also saved as JSON.

    python bench/kg_load.py                                  # medkg-zh, fresh embedded Neo4j
    python bench/kg_load.py --neo4j-uri bolt://127.0.0.1:7691 --limit-triples 200000

Without --neo4j-uri an embedded Neo4j (-Xmx1g, 256 MB page cache) is started
in a temporary directory and stopped at the end. With a URI the target
database is NOT wiped; loading is idempotent (MERGE).
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import tempfile
import time
from pathlib import Path

from services.common.records import EntityRecord
from services.retriever_graph.kg_store import KnowledgeGraphStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "medkg-zh"


def read_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
                if limit and len(rows) >= limit:
                    break
    return rows


def entity_row(r: dict) -> EntityRecord:
    known = {"name", "category", "definition", "aliases", "parents", "attributes"}
    attributes = {k: str(v) for k, v in (r.get("attributes") or {}).items()}
    attributes.update({k: str(v) for k, v in r.items() if k not in known and isinstance(v, str) and v})
    return EntityRecord(r["name"], r.get("category") or "", r.get("definition") or "", list(r.get("aliases") or []),
                     list(r.get("parents") or []), attributes)


async def run(uri: str, entities: Path, triples: Path, limit_triples: int | None, chunk: int) -> dict:
    store = KnowledgeGraphStore.connect(uri)
    try:
        await store.migrate()
        ents = [entity_row(r) for r in read_jsonl(entities)]
        started = time.perf_counter()
        for i in range(0, len(ents), 10_000):
            await store.ingest_entities(ents[i : i + 10_000])
        ent_s = time.perf_counter() - started
        rows = [(t["subject"], t["predicate"], t["object"]) for t in read_jsonl(triples, limit_triples)]
        # As `graphmesh ingest triples` sends them: grouped by predicate, so
        # each call carries few relation types (one statement per type).
        rows.sort(key=lambda t: t[1])
        started = time.perf_counter()
        stored = 0
        failures = 0
        for i in range(0, len(rows), chunk):
            n, f = await store.ingest_triples(rows[i : i + chunk])
            stored += n
            failures += len(f)
            print(f"  triples {i + len(rows[i:i + chunk]):,}/{len(rows):,}  {time.perf_counter() - started:.0f} s", flush=True)
        tri_s = time.perf_counter() - started
        return {
            "entities": len(ents), "entity_seconds": round(ent_s, 1), "entities_per_s": round(len(ents) / ent_s, 1),
            "triples": len(rows), "triples_stored": stored, "triple_failures": failures,
            "triple_seconds": round(tri_s, 1), "triples_per_s": round(stored / tri_s, 1),
        }
    finally:
        await store.driver.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=Path, default=DATA / "entities.jsonl.gz")
    ap.add_argument("--triples", type=Path, default=DATA / "triples.jsonl.gz")
    ap.add_argument("--neo4j-uri", default="")
    ap.add_argument("--limit-triples", type=int, default=None)
    ap.add_argument("--chunk", type=int, default=50_000, help="triples per ingest call (as the gateway sends them)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/kg_load.json"))
    args = ap.parse_args()
    proc = None
    uri = args.neo4j_uri
    if not uri:
        from services.retriever_graph.embedded import start_embedded_neo4j, stop_process

        home = Path(tempfile.mkdtemp(prefix="kgload-"))
        proc, uri = start_embedded_neo4j(home / "data", 0, home / "neo4j.log")
    try:
        result = asyncio.run(run(uri, args.entities, args.triples, args.limit_triples, args.chunk))
    finally:
        if proc is not None:
            stop_process(proc.pid)
    result["neo4j"] = "embedded 5.26, -Xmx1g, 256 MB page cache" if proc else uri
    print(json.dumps(result, ensure_ascii=False, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
