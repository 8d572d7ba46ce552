"""The quality gate's shared pieces: the shared data (or a skip / a CI
failure when it is missing), scoring against services.judge.core, the
floors check, and the lines the terminal summary prints (conftest.py)."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from services.cli.evaluate import QueryRow
from services.judge import core as metrics
from tests.quality.floors import FLOORS
from tests.quality.samples import SharedDataMissing, shared_dir

#: Lines printed in the terminal summary (one per dev set measured).
REPORT: list[str] = []
#: As `graphmesh ingest`: large messages, and no keepalive pings, which the
#: servers' default ping policy answers with GOAWAY "too_many_pings" during
#: an Ingest call longer than about 90 s (services.common.clients.channel
#: pings every 30 s).
CHANNEL_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]

#: Seconds each gateway stage may take in the gate. The gate measures
#: quality, not latency: on a loaded CI machine the default caps (fuse 2 s,
#: expand 10 s) would drop services and lower the figures.
PATIENT_SECONDS = 120.0
#: Texts per Embed call during ingestion (default 256). The mesh's channels
#: send a keepalive ping every 30 s (services.common.clients) and the
#: servers' default policy answers the third ping of a call that carries no
#: data with GOAWAY "too_many_pings", so any call longer than about 90 s
#: fails; small calls stay well under that on a loaded machine.
EMBED_BATCH = 32
#: The chunks' sentence vectors embedded inside each Ingest call, not by
#: the gateway's background worker (the default): e5onnx's int8 vectors
#: differ slightly with the batch a text is embedded in (docs/embedding.md),
#: and the worker's batches depend on when it ran between the gate's Ingest
#: calls, so the gate's figures moved from run to run (consult MRR@10 0.172
#: to 0.192 against a floor of 0.17). Inline, each call's batches are fixed.
SENTENCE_VECTORS = {"sentence_vectors_mode": "inline"}


@asynccontextmanager
async def patient_gateway(mesh, **overrides) -> AsyncIterator[str]:
    """A gateway over ``mesh``'s services with default settings except every
    stage cap and the default deadline at PATIENT_SECONDS, EMBED_BATCH
    texts per Embed call and SENTENCE_VECTORS (no REST), and ``overrides`` (GatewaySettings
    fields; a group given whole replaces the patient one); yields its
    address "127.0.0.1:<port>"."""
    from services.common.server import create_server
    from services.common.settings import MeshAddresses
    from services.gateway.config import GatewaySettings
    from services.gateway.server import build

    settings = GatewaySettings(port=0, rest={"port": -1},
                               deadlines={"default": PATIENT_SECONDS, "expand": PATIENT_SECONDS, "retrieve": PATIENT_SECONDS,
                                          "rerank": PATIENT_SECONDS, "fuse": PATIENT_SECONDS},
                               **{"ingest": {"embed_batch": EMBED_BATCH, **SENTENCE_VECTORS}, **overrides})
    addresses = MeshAddresses(**{f"{n}_addr": a for n, a in mesh.addresses.items() if n != "gateway"})
    service, _ = await build(settings, addresses)
    server, port, _ = await create_server(service)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)
        if service.on_stop is not None:
            await service.on_stop()


def require_shared_data() -> None:
    """Returns when ../shared/data is present; otherwise fails the test with
    the reason when CI=true, else skips it."""
    try:
        shared_dir()
    except SharedDataMissing as err:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"quality gate needs the shared data: {err}", pytrace=False)
        pytest.skip(f"quality gate: {err}")


@dataclass
class Figures:
    """Scores of one dev-set sample (means over its queries)."""

    name: str
    n: int
    top1: float
    recall10: float
    mrr10: float
    errors: int
    degraded: int
    degraded_services: dict[str, int]

    def as_dict(self) -> dict[str, float]:
        return {"top1": self.top1, "recall@10": self.recall10, "mrr@10": self.mrr10}


def score(name: str, rows: list[QueryRow]) -> Figures:
    """Figures of ``rows`` (their ``ranked`` lists hold distinct keys, best
    first): top1 / recall@10 = any gold in the top 1 / 10
    (``services.judge.core.hit_at``), mrr@10 (``mrr_at``). A row with an
    error counts as a miss."""
    n = len(rows)

    def mean(values) -> float:
        return round(sum(values) / n, 4) if n else 0.0

    return Figures(
        name, n,
        top1=mean(metrics.hit_at(r.ranked, set(r.gold), 1) for r in rows),
        recall10=mean(metrics.hit_at(r.ranked, set(r.gold), 10) for r in rows),
        mrr10=mean(metrics.mrr_at(r.ranked, set(r.gold), 10) for r in rows),
        errors=sum(1 for r in rows if r.error),
        degraded=sum(1 for r in rows if r.degraded),
        degraded_services=dict(Counter(s for r in rows for s in r.degraded)),
    )


def check_floors(figures: Figures, note: str = "") -> None:
    """Records ``figures`` for the summary and asserts each of them is at or
    above its floor in FLOORS, naming the figure and the floor."""
    floors = FLOORS[figures.name]
    measured = figures.as_dict()
    shown = "  ".join(f"{k} {measured[k]:.4f} (floor {v:g})" for k, v in floors.items())
    REPORT.append(f"{figures.name:8s} n={figures.n}{note}  {shown}  errors {figures.errors}  degraded {figures.degraded}")
    print(REPORT[-1])
    assert figures.errors == 0, f"{figures.name}: {figures.errors} of {figures.n} queries failed"
    # A degraded answer is not a quality figure: say which service dropped out.
    assert figures.degraded == 0, (f"{figures.name}: {figures.degraded} of {figures.n} queries answered without "
                                   f"some service {figures.degraded_services}")
    below = {k: (measured[k], v) for k, v in floors.items() if measured[k] < v}
    assert not below, f"{figures.name}: below the floor: " + ", ".join(
        f"{k} {m:.4f} < {f:g}" for k, (m, f) in below.items())
