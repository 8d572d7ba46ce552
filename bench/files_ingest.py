"""Files-in benchmark (not a test): files/s and MB/s of parsing and of
ingesting each format (.txt GB18030, .md, .html, .pdf, .docx), with Chinese
text made by the writers of tests/file_makers.py.

- parse: ``services.ingest.files.parse_file`` + section chunking, in this
  process, every file ``--rounds`` times;
- ingest: the gateway's Ingest RPC with the files (parse, chunk, embed with
  the expander's model, store in PostgreSQL and Neo4j), one call per format
  into its own collection, which is deleted afterwards. The services run in
  this process on port 0 over an embedded PostgreSQL and an embedded Neo4j
  started in a temporary directory (nothing of a running stack is touched);
  the embedding cache is a fresh file, so every chunk is embedded.

    python bench/files_ingest.py [--files 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import save  # noqa: E402

from services.ingest.chunking import ChunkingConfig, chunk_sections  # noqa: E402
from services.ingest.files import parse_file  # noqa: E402
from tests import file_makers as mk  # noqa: E402


def make_files(n: int) -> dict[str, list[tuple[str, bytes]]]:
    """``n`` distinct files of each format, each a few pages of text no
    other file shares (so neither the tokenizer's cache nor the embedding
    cache serves one format from another's)."""
    out: dict[str, list[tuple[str, bytes]]] = {f: [] for f in ("txt", "md", "html", "pdf", "docx")}
    for i in range(n):
        def body(fmt: str) -> list[str]:
            return mk.long_chinese_text(30, f"{fmt}事项{i}")
        text = "\n\n".join(body("文本"))
        out["txt"].append((f"f{i}.txt", (f"{mk.CHAPTER_1}\n{mk.PARAGRAPH_1}\n\n{mk.CHAPTER_2}\n\n{text}\n").encode("gb18030")))
        out["md"].append((f"f{i}.md", (mk.markdown_text() + "\n## 附则\n\n" + "\n\n".join(body("标记"))).encode()))
        out["html"].append((f"f{i}.html", mk.html_text().replace(
            "</body>", "".join(f"<p>{p}</p>" for p in body("网页")) + "</body>").encode()))
        out["pdf"].append((f"f{i}.pdf", mk.pdf_bytes(pages_of_filler=2, title=f"{mk.TITLE}{i}", filler_seed=f"版式{i}")))
        out["docx"].append((f"f{i}.docx", mk.docx_bytes(body("文档"))))
    return out


def parse_figures(files: list[tuple[str, bytes]], rounds: int) -> dict:
    """Parsing alone (``parse_file``), then chunking alone (sections ->
    chunks with their jieba keyword terms), each timed over ``rounds``."""
    size = sum(len(d) for _, d in files)
    started = time.perf_counter()
    for _ in range(rounds):
        parsed = [(name, parse_file(name, "", data)) for name, data in files]
    parse_wall = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(rounds):
        chunks = sum(len(chunk_sections(n, p.title, [p.title], p.sections, {}, ChunkingConfig()).chunks) for n, p in parsed)
    chunk_wall = time.perf_counter() - started
    return {"files": len(files), "mb": round(size / 1e6, 3), "chunks_per_file": round(chunks / len(files), 1),
            "parse_files_per_s": round(rounds * len(files) / parse_wall, 1),
            "parse_mb_per_s": round(rounds * size / 1e6 / parse_wall, 2),
            "chunk_files_per_s": round(rounds * len(files) / chunk_wall, 1)}


async def ingest_figures(by_format: dict[str, list[tuple[str, bytes]]]) -> dict[str, dict]:
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.common.settings import MeshAddresses
    from services.common.server import create_server
    from services.expander.config import ExpanderSettings
    from services.expander.server import build as build_expander
    from services.fuser.server import build as build_fuser
    from services.gateway.config import GatewaySettings
    from services.gateway.server import build as build_gateway
    from services.retriever_graph.config import RetrieverGraphSettings
    from services.retriever_graph.embedded import start_embedded_neo4j, stop_process
    from services.retriever_graph.server import build as build_graph
    from services.retriever_pg.config import RetrieverPgSettings
    from services.retriever_pg.embedded import start_embedded_postgres, stop_embedded_postgres
    from services.retriever_pg.server import build as build_pg

    home = Path(tempfile.mkdtemp(prefix="graphmesh-bench-files-"))
    dsn = await asyncio.to_thread(start_embedded_postgres, home / "pg")
    neo4j, uri = await asyncio.to_thread(start_embedded_neo4j, home / "neo4j", 0, home / "neo4j.log")
    servers, addresses = [], {}
    results: dict[str, dict] = {}
    try:
        for name, builder in (
            ("retriever_pg", lambda: build_pg(RetrieverPgSettings(port=0, dsn=dsn))),
            ("retriever_graph", lambda: build_graph(RetrieverGraphSettings(port=0, neo4j={"uri": uri}))),
            ("expander", lambda: build_expander(ExpanderSettings(port=0, embedding={"cache": str(home / "emb.sqlite")}),
                                                MeshAddresses(retriever_graph_addr=addresses["retriever_graph"]))),
            ("fuser", build_fuser),
        ):
            service, _ = await builder()
            server, port, _ = await create_server(service, "127.0.0.1", 0)
            servers.append((server, service))
            addresses[name] = f"127.0.0.1:{port}"
        gateway, _ = await build_gateway(GatewaySettings(port=0, rest={"port": -1}),
                                         MeshAddresses(**{f"{n}_addr": a for n, a in addresses.items()}))
        server, port, _ = await create_server(gateway, "127.0.0.1", 0)
        servers.append((server, gateway))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)]) as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            # loads the embedding model before timing (another id, another text)
            await stub.Ingest(gateway_pb2.IngestRequest(collection="warm", files=[gateway_pb2.IngestFile(
                name="warm.md", content="# 预热\n\n加载嵌入模型的预热文本。".encode())]), timeout=600)
            for fmt, files in by_format.items():
                request = gateway_pb2.IngestRequest(collection=f"bench-{fmt}", files=[
                    gateway_pb2.IngestFile(name=n, content=d) for n, d in files])
                started = time.perf_counter()
                reply = await stub.Ingest(request, timeout=1800)
                wall = time.perf_counter() - started
                size = sum(len(d) for _, d in files)
                results[fmt] = {"ingest_files_per_s": round(len(files) / wall, 2), "ingest_mb_per_s": round(size / 1e6 / wall, 3),
                                "stored": reply.stored, "failed": len(reply.failures), "chunks": reply.chunks,
                                "stages_s": {t.stage: round(t.duration_ms / 1000, 2) for t in reply.timings}}
                await stub.DeleteCollection(gateway_pb2.DeleteCollectionRequest(name=f"collections/bench-{fmt}"), timeout=600)
    finally:
        for server, service in reversed(servers):
            await server.stop(1)
            if service.on_stop is not None:
                await service.on_stop()
        stop_process(neo4j.pid)
        await asyncio.to_thread(stop_embedded_postgres, home / "pg")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20, help="files per format")
    parser.add_argument("--rounds", type=int, default=3, help="parse rounds")
    parser.add_argument("--no-ingest", action="store_true", help="parse only")
    args = parser.parse_args()
    by_format = make_files(args.files)
    from services.common.text import document_terms

    document_terms("预热分词词典")  # jieba loads its dictionary once; not part of any figure
    for files in by_format.values():  # nor does importing each parser's library
        parse_file(files[0][0], "", files[0][1])
    figures = {fmt: parse_figures(files, args.rounds) for fmt, files in by_format.items()}
    if not args.no_ingest:
        for fmt, ingest in asyncio.run(ingest_figures(by_format)).items():
            figures[fmt].update(ingest)
    import os

    save("files_ingest", {"files_per_format": args.files, "rounds": args.rounds, "load_average_1_5_15": os.getloadavg(),
                          "formats": figures})


if __name__ == "__main__":
    main()
