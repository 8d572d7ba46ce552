"""Stand-ins the reliability benchmarks control (not tests, not services):

    python bench/fault_fakes.py llm --port 54160 --control FILE
    python bench/fault_fakes.py reranker --port 54105 --control FILE

``llm``: an OpenAI-compatible chat endpoint on loopback answering a short
grounded answer ("根据[1]……"), streamed or not. Before each request it reads
the JSON control file; ``{"llm": MODE}`` with MODE one of ok, hang (never
answers), 429, 500, malformed (HTTP 200 with a body that is not JSON).

``reranker``: graphmesh.reranker.v1.RerankerService (with health and
reflection, through services.common.server) scoring passages by the
characters they share with the query, sleeping ``{"rerank_delay": S}``
seconds per call first. No cross-encoder ships offline, and the real
reranker answers FAILED_PRECONDITION without one, so the fault matrix
enables reranking against this stand-in.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def read_control(path: str) -> dict:
    """The control file's JSON object ({} when missing or unreadable)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


def write_control(path: str | Path, **values) -> None:
    """Merges ``values`` into the control file (atomically)."""
    current = read_control(str(path))
    current.update(values)
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(current))
    tmp.replace(path)


ANSWER = "根据[1]，应当依照该条规定处理。"


async def run_llm(port: int, control: str) -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        mode = read_control(control).get("llm", "ok")
        body = await request.json()
        if mode == "hang":
            await asyncio.Event().wait()
        if mode == "429":
            return web.Response(status=429, text="rate limited")
        if mode == "500":
            return web.Response(status=500, text="boom")
        if mode == "malformed":
            return web.Response(status=200, body=b'{"choices": [{"message": ', content_type="application/json")
        if not body.get("stream"):
            return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}}]})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in (ANSWER[:4], ANSWER[4:]):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"READY fake-llm http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


def build_reranker(port: int, control: str):
    from graphmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
    from services.common.server import Service
    from services.common.settings import ServiceSettings

    class StandIn(reranker_pb2_grpc.RerankerServiceServicer):
        async def Rerank(self, request, context):
            delay = float(read_control(control).get("rerank_delay", 0) or 0)
            if delay:
                await asyncio.sleep(delay)
            query = set(request.query)
            scores = [reranker_pb2.PassageScore(id=p.id, score=len(query & set(p.text)) / (1 + len(query)))
                      for p in request.passages]
            scores.sort(key=lambda s: -s.score)
            return reranker_pb2.RerankResponse(scores=scores, model="stand-in", device="cpu")

    service = Service(
        name="reranker",
        full_names=[reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name],
        register=lambda server: reranker_pb2_grpc.add_RerankerServiceServicer_to_server(StandIn(), server),
    )
    return service, ServiceSettings(port=port, metrics_port=-1, grace_seconds=0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["llm", "reranker"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", required=True)
    args = parser.parse_args()
    if args.kind == "llm":
        asyncio.run(run_llm(args.port, args.control))
    else:
        from services.common.server import main as serve_main

        async def build():
            return build_reranker(args.port, args.control)

        serve_main("reranker", build)


if __name__ == "__main__":
    main()
