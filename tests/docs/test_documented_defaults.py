"""The defaults the documentation promises are the ones the code uses: each
number is read out of its sentence or table row (in README.md or docs/*.md:
docs/configuration.md, docs/answers.md, docs/entities.md, docs/usage.md) and
compared with the settings or constant it documents. Changing one without the
other fails."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.expander import normalize
from services.gateway.search import deep_rules as deep
from services.gateway.config import GatewaySettings
from services.llm.server import LocalLlmSettings
from services.retriever_graph.config import RetrieverGraphSettings
from services.common.settings import DEFAULT_PORTS, ServiceSettings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = "\n".join(path.read_text(encoding="utf-8")
                 for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])


def documented(pattern: str) -> tuple[str, ...]:
    """The groups of the documentation's one match of ``pattern`` (whitespace
    in the pattern matches any run of whitespace, line breaks included)."""
    matches = re.findall(pattern.replace(" ", r"\s+"), DOCS)
    assert len(matches) == 1, f"the docs should state this once: {pattern!r} (found {len(matches)})"
    found = matches[0]
    return found if isinstance(found, tuple) else (found,)


def test_deep_search_growth_threshold_and_iterations():
    growth, iterations = documented(r"stops when new/known chunk ids < ([\d.]+) or after (\d+) iterations")
    assert float(growth) == deep.DEFAULT_GROWTH_THRESHOLD == 0.1
    assert int(iterations) == deep.DEFAULT_MAX_ITERATIONS == 3


def test_deep_search_sub_queries():
    (sub_queries,) = documented(r"Repeat run with the defaults \(\d+ iterations, (\d+) sub-queries")
    assert int(sub_queries) == deep.DEFAULT_SUB_QUERIES


def test_minimum_evidence_score_in_prose_and_table():
    (prose,) = documented(r"`GRAPHMESH_GATEWAY_MIN_EVIDENCE_SCORE` \(([\d.]+)\)")
    (table,) = documented(r"\| `GRAPHMESH_GATEWAY_MIN_EVIDENCE_SCORE`, [^|]+\| ([\d.]+),")
    assert float(prose) == float(table) == GatewaySettings().min_evidence_score


def test_llm_retries():
    (retries,) = documented(r"`\.\.\._LLM_MAX_RETRIES`, default (\d+)")
    assert int(retries) == GatewaySettings().llm.max_retries


def test_local_llm_server_table_row():
    model, port, threads, ctx = documented(r"\| `GRAPHMESH_LLM_MODEL`, [^|]+\| ([\w.]+), (\d+), (\d+), (\d+) \|")
    s = LocalLlmSettings()
    assert (model, int(port), int(threads), int(ctx)) == (s.model, s.port, s.threads, s.ctx)


def test_normalization_gate_and_route_confidence():
    keep, rewrite = documented(r"score < ([\d.]+); rewrite on exact alias, score >= ([\d.]+)")
    assert (float(keep), float(rewrite)) == (normalize.KEEP_BELOW, normalize.REWRITE_AT)
    (route,) = documented(r"\(below ([\d.]+) not hard-routed\)")
    assert float(route) == normalize.ROUTE_MIN_CONFIDENCE


def test_graph_expansion_weights():
    parent, same_object, same_property, same_category = documented(
        r"default parent/child ([\d.]+), same object ([\d.]+), same property ([\d.]+), same category ([\d.]+)\)")
    weights = RetrieverGraphSettings().expansion_weights
    assert [float(x) for x in (parent, same_object, same_property, same_category)] == [
        weights["parent"], weights["same_object"], weights["same_property"], weights["same_category"]]


@pytest.mark.parametrize("service", sorted(DEFAULT_PORTS))
def test_service_ports(service):
    low, high = documented(r"\| (\d+)\.\.(\d+), \+1000 \|")
    assert int(low) <= DEFAULT_PORTS[service] <= int(high)


def test_abstention_threshold_in_prose_and_table():
    (prose,) = documented(r"`GRAPHMESH_GATEWAY_ABSTENTION_{1,2}THRESHOLD` \(([\d.]+), fitted\)")
    (table,) = documented(r"\| `GRAPHMESH_GATEWAY_ABSTENTION_{1,2}ENABLED`, [^|]+\| true, ([\d.]+) \|")
    assert float(prose) == float(table) == GatewaySettings().abstention.threshold
    assert GatewaySettings().abstention.enabled


def test_chunk_size_and_overlap_in_prose_and_table():
    tokens, overlap = documented(r"\*\*Chunking\*\* \(MetaSearch\): (\d+) tokens with (\d+) of overlap")
    table = documented(r"\| `GRAPHMESH_GATEWAY_(?:INGEST__)?CHUNK_TOKENS`, `\.\.\._CHUNK_OVERLAP` \| (\d+), (\d+) \|")
    s = GatewaySettings()
    assert (int(tokens), int(overlap)) == tuple(map(int, table)) == (s.ingest.chunk_tokens, s.ingest.chunk_overlap) == (512, 64)


def test_circuit_breaker_and_deadline_margin():
    failures, rate, cool_down, enabled = documented(
        r"\| `GRAPHMESH_GATEWAY_BREAKER_{1,2}FAILURES`, [^|]+\| (\d+), ([\d.]+), ([\d.]+), (true|false) \|")
    s = GatewaySettings()
    assert (int(failures), float(rate), float(cool_down), enabled == "true") == (
        s.breaker.failures, s.breaker.failure_rate, s.breaker.cool_down, s.breaker.enabled)
    (margin,) = documented(r"\| `GRAPHMESH_GATEWAY_(?:DEADLINE_MARGIN|DEADLINES__MARGIN)` \| ([\d.]+) \|")
    assert float(margin) == s.deadlines.margin


def test_service_resource_bounds():
    rpcs, streams, chars = documented(
        r"\| `GRAPHMESH_<SERVICE>_MAX_CONCURRENT_RPCS`, [^|]+\| (\d+), (\d+), (\d+) \|")
    s = ServiceSettings()
    assert (int(rpcs), int(streams), int(chars)) == (s.max_concurrent_rpcs, s.max_concurrent_streams, s.max_query_chars)
