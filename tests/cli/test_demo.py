"""The demo's corpus split: the laws the example questions ask about are
loaded first, everything else after, nothing lost or reordered; every
example names laws the corpus holds, so the first answers have their
articles; the background ingest records when it ended."""
from __future__ import annotations

import gzip
import json

import pytest

from services.cli import demo

pytestmark = pytest.mark.unit


def line(law: str, article: str) -> bytes:
    return json.dumps({"id": f"{law}-{article}", "law": law, "article": article, "text": "……"}, ensure_ascii=False).encode()


def test_the_examples_laws_come_first_and_every_other_line_after_in_order():
    lines = [line("专利法", "第一条"), line("刑法", "第一条"), b"not json", line("专利法", "第二条"), b"[1]", line("民法典", "第一条")]
    first, rest = demo.split_corpus(lines, {"专利法", "刑法"})
    assert first == [lines[0], lines[1], lines[3]]
    assert rest == [b"not json", b"[1]", lines[5]]


def test_every_example_names_laws_of_the_corpus():
    examples = [json.loads(x) for x in demo.QUESTIONS.read_text(encoding="utf-8").splitlines() if x.strip()]
    laws = {law for example in examples for law in example["laws"]}
    corpus = demo.DATA_DIR / "law-zh" / "corpus.jsonl.gz"
    if not corpus.is_file():
        pytest.skip(f"{corpus} not fetched (graphmesh datasets fetch law-zh)")
    with gzip.open(corpus, "rt", encoding="utf-8") as f:
        held = {json.loads(x)["law"] for x in f if x.strip()}
    assert examples and all(example["laws"] for example in examples)
    assert laws <= held, laws - held


def test_the_sentences_still_pending_are_read_from_the_gateways_metrics(monkeypatch):
    import http.server
    import socket
    import threading

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            body = b"# TYPE graphmesh_sentence_backfill_pending gauge\ngraphmesh_sentence_backfill_pending 1234.0\n"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("GRAPHMESH_GATEWAY_METRICS_PORT", str(server.server_address[1]))
        assert demo._sentences_pending() == 1234
    finally:
        server.shutdown()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("GRAPHMESH_GATEWAY_METRICS_PORT", str(s.getsockname()[1]))
    assert demo._sentences_pending() is None


def test_the_background_ingest_records_when_it_ended_also_on_failure(monkeypatch, tmp_path):
    import time

    monkeypatch.setattr(demo, "_ingest", lambda path, progress: ({"stored": 3}, None))
    before = time.perf_counter()
    loader = demo.BackgroundIngest(tmp_path / "rest.jsonl")
    loader.start()
    loader.join(5)
    assert loader.totals == {"stored": 3} and loader.error is None and loader.finished >= before

    def fail(path, progress):
        raise ConnectionError("gateway gone")

    monkeypatch.setattr(demo, "_ingest", fail)
    loader = demo.BackgroundIngest(tmp_path / "rest.jsonl")
    loader.start()
    loader.join(5)
    assert isinstance(loader.error, ConnectionError) and loader.finished >= before


def test_the_demo_ingests_into_the_stack_it_started_on_its_own_ports(monkeypatch, tmp_path):
    """A trial's `make demo` with GRAPHMESH_GATEWAY_PORT=43051 started its stack there, then ingested into
    127.0.0.1:50051 (another stack's port, or nothing) and failed with a traceback."""
    from services.cli import client, stack

    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.delenv("GRAPHMESH_GATEWAY_ADDR", raising=False)
    monkeypatch.setattr(demo, "cmd_datasets", lambda args: 0)

    def up(detach: bool) -> int:  # what `graphmesh up` records for a stack on moved ports
        stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:43051"})
        return 0

    dialled = []

    def ingest(path, progress=True):
        dialled.append(client.gateway_address())
        raise RuntimeError("stop here")

    monkeypatch.setattr(stack, "up", up)
    monkeypatch.setattr(stack, "down", lambda: 0)
    monkeypatch.setattr(demo, "_ingest", ingest)
    monkeypatch.setattr(demo.gzip, "open", lambda *a, **k: __import__("io").BytesIO(line("刑法", "第一条") + b"\n"))
    with pytest.raises(RuntimeError, match="stop here"):
        demo.run_demo()
    assert dialled == ["127.0.0.1:43051"]
