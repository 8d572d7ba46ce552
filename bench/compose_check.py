"""The compose stack run for real (`make compose-check`; issue 25, item 1).

Steps, each timed:

1. the local stand-in images (deploy/local-images/build.sh; skipped for a
   tag that is there already) and the GraphMesh image (`docker compose build`,
   legacy builder);
2. `docker compose up --wait` of every service docker-compose.yml starts
   without a profile, except Grafana (no stand-in can be built here), under
   its own project name, with throwaway secrets and free host ports in a
   temporary env file; the compose file itself is used unmodified;
3. ingest of the first --docs law articles through the gateway's Ingest RPC;
4. Search and Answer over gRPC and over REST, --queries dev questions each;
5. one service container (--kill, default retriever-graph) killed (SIGKILL
   to its main process, from the host) under a closed loop of gRPC Searches:
   the restart policy brings it back and the answers go on, degraded while it
   is away, then whole again (`docker kill` is a manual stop to Docker, after
   which "unless-stopped" does not restart);
6. every Prometheus target up (Prometheus HTTP API);
7. every dashboard panel query and template query
   (deploy/grafana/dashboards/*.json) and every alert rule's expression
   without its threshold (deploy/prometheus/rules/*.yml) evaluated on that
   Prometheus after the traffic: the ones that return no series are listed;
   every rule group healthy;
8. one alert forced to fire: --stop (default judge) is stopped until
   GraphMeshTargetDown fires for it;
9. `docker compose down -v` (always, also after a failure).

Prints a figure table and saves the figures under bench/results/. Exit status
1 when a hard check fails (no answers, the killed service not back, a target
down, an unhealthy rule group, the alert not firing); queries without series
are reported, not failed, as some panels need traffic this stack has no way
to make (the reranker without a model, no LLM).

Needs root on the Docker host (the kill signals a container's process),
Docker Compose v2.20+, and the venv
(`make install-test`).

    PYTHONPATH=.:gen/python .venv/bin/python bench/compose_check.py [--docs 200]
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import LAW_CORPUS, REPO, save  # noqa: E402
from harness import dev_questions, read_lines  # noqa: E402

PROJECT = "graphmesh-check"
LEFT_OUT = {"grafana"}  # no Grafana stand-in; its provisioning is not exercised
#: Grafana's template values on the compose stack: the namespace compose sets,
#: every instance, and $__rate_interval for a 15 s scrape interval
#: (max(4 x scrape interval, interval + scrape interval)).
TEMPLATE = {"$namespace": "compose", "$instance": ".*", "$__rate_interval": "1m", "${datasource}": "prometheus"}
COMPARISON = re.compile(r"\s*(?:>=|<=|==|!=|>|<)\s*(?:bool\s+)?[-+0-9.eE]+\s*$")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Compose:
    """`docker compose` on the repository's unmodified docker-compose.yml under
    project PROJECT, with the variables of a temporary env file."""

    def __init__(self, env_file: Path) -> None:
        self.base = ["docker", "compose", "--project-name", PROJECT, "--project-directory", str(REPO),
                     "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yml")]

    def run(self, *args: str, capture: bool = False, check: bool = True, timeout: float | None = None) -> str:
        """Runs one compose command; returns its stdout when ``capture``."""
        done = subprocess.run([*self.base, *args], check=check, text=True, timeout=timeout,
                              stdout=subprocess.PIPE if capture else None,
                              env={**os.environ, "DOCKER_BUILDKIT": "0", "COMPOSE_PROGRESS": "quiet"})
        return done.stdout or ""

    def services(self) -> list[str]:
        """The services compose starts without a profile, less LEFT_OUT."""
        config = json.loads(self.run("config", "--format", "json", capture=True))
        return sorted(n for n, s in config["services"].items() if not s.get("profiles") and n not in LEFT_OUT)

    def container(self, service: str) -> str:
        """The container id of ``service`` (also when it is stopped)."""
        return self.run("ps", "-a", "-q", service, capture=True).split()[0]


def inspect(container: str) -> dict:
    """docker inspect of one container."""
    return json.loads(subprocess.run(["docker", "inspect", container], check=True, text=True,
                                     stdout=subprocess.PIPE).stdout)[0]


class Prometheus:
    """The Prometheus HTTP API on 127.0.0.1:``port``."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/api/v1/"

    def get(self, path: str, **params: str) -> dict:
        """GET api/v1/``path``; returns ``data``; raises RuntimeError on an error status."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def series(self, expr: str) -> int:
        """Number of series an instant query of ``expr`` returns now."""
        return len(self.get("query", query=expr)["result"])


def fill(expr: str) -> str:
    """``expr`` with Grafana's template variables set for the compose stack."""
    for name, value in TEMPLATE.items():
        expr = expr.replace(name, value)
    return expr


def label_values_query(definition: str) -> str:
    """PromQL for a ``label_values(SELECTOR, LABEL)`` template query: the
    series of SELECTOR grouped by LABEL (one per value)."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", definition.strip())
    if not m:
        raise ValueError(f"not a label_values query: {definition}")
    return f"count by ({m.group(2)}) ({m.group(1)})"


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title / variable, PromQL) of every panel target
    and template query of deploy/grafana/dashboards/*.json."""
    out = []
    for path in sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        panels = list(board.get("panels", []))
        while panels:
            p = panels.pop(0)
            panels.extend(p.get("panels", []))  # collapsed rows hold their panels
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((path.name, f"{p.get('title', '?')} [{t.get('legendFormat', t.get('refId', ''))}]", fill(t["expr"])))
        for v in board.get("templating", {}).get("list", []):
            if v.get("type") == "query" and v.get("query"):
                out.append((path.name, f"variable {v['name']}", fill(label_values_query(v["query"]["query"]))))
    return out


def alert_queries() -> list[tuple[str, str, str]]:
    """(rule file, alert, expression without its final threshold comparison)
    of deploy/prometheus/rules/*.yml: the part that returns series whenever
    the metrics are there, firing or not."""
    out = []
    for path in sorted((REPO / "deploy" / "prometheus" / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    out.append((path.name, rule["alert"], COMPARISON.sub("", rule["expr"])))
    return out


# ------------------------------------------------------------------- traffic


def ingest(port: int, docs: int, batch: int = 100) -> dict:
    """The first ``docs`` law articles through gRPC Ingest, ``batch`` a call."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    lines = list(itertools.islice(read_lines(LAW_CORPUS), docs))
    totals = {"received": 0, "stored": 0, "unchanged": 0, "failures": 0}
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for start in range(0, len(lines), batch):
            reply = stub.Ingest(gateway_pb2.IngestRequest(jsonl="\n".join(lines[start:start + batch]).encode(),
                                                          domain_pack="law_zh"), timeout=900)
            totals["received"] += reply.received
            totals["stored"] += reply.stored
            totals["unchanged"] += reply.unchanged
            totals["failures"] += len(reply.failures)
    return totals


def ask(grpc_port: int, rest_port: int, questions: list[str]) -> dict:
    """Search and Answer over gRPC and REST for each question: per kind,
    answered calls, calls with results, degraded calls, errors, mean ms."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    stats = {k: {"calls": 0, "with_results": 0, "degraded": 0, "errors": 0, "ms": 0.0}
             for k in ("grpc Search", "grpc Answer", "REST search", "REST answer")}

    def record(kind: str, started: float, results: int, degraded: list, error: str = "") -> None:
        s = stats[kind]
        s["calls"] += 1
        s["ms"] += (time.monotonic() - started) * 1000
        s["with_results"] += results > 0
        s["degraded"] += bool(degraded)
        if error:
            s["errors"] += 1
            print(f"  {kind}: {error[:200]}")

    def rest(route: str, body: dict) -> dict:
        req = urllib.request.Request(f"http://127.0.0.1:{rest_port}/v1/{route}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for q in questions:
            for kind in stats:
                t0 = time.monotonic()
                try:
                    if kind == "grpc Search":
                        r = stub.Search(gateway_pb2.SearchRequest(query=q, top_k=5), timeout=60)
                        record(kind, t0, len(r.results), list(r.degraded))
                    elif kind == "grpc Answer":
                        r = stub.Answer(gateway_pb2.AnswerRequest(query=q, top_k=5), timeout=60)
                        record(kind, t0, len(r.search.results) if r.answer else 0, list(r.search.degraded))
                    elif kind == "REST search":
                        r = rest("query:search", {"query": q, "topK": 5})
                        record(kind, t0, len(r.get("results", [])), r.get("degraded", []))
                    else:
                        r = rest("query:answer", {"query": q, "topK": 5})
                        search = r.get("search", {})
                        record(kind, t0, len(search.get("results", [])) if r.get("answer") else 0, search.get("degraded", []))
                except (grpc.RpcError, urllib.error.URLError, OSError, ValueError) as err:
                    record(kind, t0, 0, [], f"{type(err).__name__}: {err}")
    for s in stats.values():
        s["ms"] = round(s["ms"] / max(1, s["calls"]), 1)
    return stats


def kill_and_recover(compose: Compose, service: str, grpc_port: int, questions: list[str],
                     before: float, after: float, limit: float) -> dict:
    """A closed loop of gRPC Searches (one at a time, 10 s deadline) while
    ``service``'s container's main process is SIGKILLed after ``before`` s; the loop ends
    ``after`` s after the container is healthy again (or after ``limit`` s).
    Returns per phase (before / away / back) the calls, whole answers,
    degraded answers and errors, and the restart figures."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    samples: list[tuple[float, str, tuple[str, ...]]] = []  # (monotonic end, code, degraded)
    stop = threading.Event()

    def loop() -> None:
        feed = itertools.cycle(questions)
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            while not stop.is_set():
                try:
                    r = stub.Search(gateway_pb2.SearchRequest(query=next(feed), top_k=5), timeout=10)
                    samples.append((time.monotonic(), "OK", tuple(r.degraded)))
                except grpc.RpcError as err:
                    samples.append((time.monotonic(), err.code().name, ()))
                    time.sleep(0.1)

    container = compose.container(service)
    restarts0 = inspect(container)["RestartCount"]
    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    time.sleep(before)
    killed = time.monotonic()
    # SIGKILL to the container's main process from the host: a crash, to
    # Docker. `docker kill` would not do: Docker counts it as a manual stop,
    # and "unless-stopped" then leaves the container down.
    os.kill(inspect(container)["State"]["Pid"], signal.SIGKILL)
    running_again = healthy = None
    while time.monotonic() - killed < limit:
        state = inspect(container)
        if running_again is None and state["RestartCount"] > restarts0 and state["State"]["Running"]:
            running_again = time.monotonic()
        if running_again is not None and state["State"].get("Health", {}).get("Status") == "healthy":
            healthy = time.monotonic()
            break
        time.sleep(0.5)
    time.sleep(after)
    stop.set()
    worker.join(timeout=15)
    end = healthy or time.monotonic()

    def phase(lo: float, hi: float) -> dict:
        part = [s for s in samples if lo <= s[0] < hi]
        return {"calls": len(part),
                "whole": sum(1 for _, c, d in part if c == "OK" and not d),
                "degraded": sum(1 for _, c, d in part if c == "OK" and d),
                "errors": sum(1 for _, c, _ in part if c != "OK"),
                "degraded_by": sorted({x for _, c, d in part for x in d})}

    after_kill = [s for s in samples if s[0] >= killed]
    last_degraded = max((t for t, c, d in after_kill if c != "OK" or d), default=None)
    return {"service": service, "restart_policy": inspect(container)["HostConfig"]["RestartPolicy"]["Name"],
            "restart_count": inspect(container)["RestartCount"] - restarts0,
            "running_again_s": round(running_again - killed, 1) if running_again else None,
            "healthy_again_s": round(healthy - killed, 1) if healthy else None,
            "last_degraded_or_failed_s": round(last_degraded - killed, 1) if last_degraded else None,
            "before": phase(0, killed), "away": phase(killed, end), "back": phase(end, float("inf"))}


def wait_for_alert(prom: Prometheus, alert: str, labels: dict[str, str], limit: float) -> dict:
    """Polls Prometheus's alerts until ``alert`` with ``labels`` is firing;
    returns the seconds it was pending and firing after, or None."""
    t0 = time.monotonic()
    pending = None
    while time.monotonic() - t0 < limit:
        for a in prom.get("alerts")["alerts"]:
            if a["labels"].get("alertname") == alert and all(a["labels"].get(k) == v for k, v in labels.items()):
                if a["state"] == "pending" and pending is None:
                    pending = time.monotonic() - t0
                if a["state"] == "firing":
                    return {"pending_after_s": round(pending, 1) if pending is not None else None,
                            "firing_after_s": round(time.monotonic() - t0, 1), "labels": a["labels"]}
        time.sleep(5)
    return {"pending_after_s": round(pending, 1) if pending is not None else None, "firing_after_s": None}


# ---------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200, help="law articles to ingest")
    parser.add_argument("--queries", type=int, default=5, help="dev questions per kind of call")
    parser.add_argument("--kill", default="retriever-graph", help="the compose service whose container is killed")
    parser.add_argument("--stop", default="judge", help="the compose service stopped to fire GraphMeshTargetDown")
    parser.add_argument("--skip-images", action="store_true", help="use the images as they are (no build)")
    parser.add_argument("--keep", action="store_true", help="leave the stack up (no `down -v`)")
    args = parser.parse_args()

    figures: dict = {"timings_s": {}, "failures": []}
    t = figures["timings_s"]
    fail = figures["failures"]

    def timed(name: str, fn, *a, **kw):
        t0 = time.monotonic()
        try:
            return fn(*a, **kw)
        finally:
            t[name] = round(time.monotonic() - t0, 1)
            print(f"== {name}: {t[name]} s", flush=True)

    grpc_port, rest_port, prom_port = free_port(), free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="graphmesh-compose-check-"))
    env_file = tmp / "check.env"
    env_file.write_text("\n".join([
        f"POSTGRES_PASSWORD={secrets.token_hex(16)}", f"NEO4J_PASSWORD={secrets.token_hex(16)}",
        f"GRAFANA_ADMIN_PASSWORD={secrets.token_hex(16)}", f"GRAPHMESH_MESH_TOKEN={secrets.token_hex(32)}",
        f"GATEWAY_GRPC_PORT={grpc_port}", f"GATEWAY_REST_PORT={rest_port}", f"PROMETHEUS_PORT={prom_port}",
        f"GRAFANA_PORT={free_port()}", ""]))
    env_file.chmod(0o600)
    compose = Compose(env_file)
    try:
        if not args.skip_images:
            timed("stand-in images", subprocess.run, ["bash", str(REPO / "deploy/local-images/build.sh")], check=True)
            timed("graphmesh image", compose.run, "build", "gateway")
        images = {l.strip() for l in compose.run("config", "--images", capture=True).split()}
        figures["images"] = sorted(images)
        services = compose.services()
        figures["services"] = services
        print("services:", " ".join(services), "| left out:", " ".join(sorted(LEFT_OUT)))
        try:
            timed("compose up --wait", compose.run, "up", "-d", "--wait", "--wait-timeout", "900", *services)
        except subprocess.CalledProcessError:
            compose.run("ps", "-a", check=False)
            for service in services:
                state = inspect(compose.container(service))
                if state["State"].get("Health", {}).get("Status") != "healthy":
                    print(f"--- {service}: {state['State'].get('Health', {}).get('Log', [])[-1:]}")
                    subprocess.run(["docker", "logs", "--tail", "20", state["Id"]], check=False)
            raise

        figures["ingest"] = timed("ingest", ingest, grpc_port, args.docs)
        figures["ingest"]["docs_per_s"] = round(figures["ingest"]["received"] / max(t["ingest"], 0.1), 1)
        if figures["ingest"]["stored"] + figures["ingest"]["unchanged"] < args.docs:
            fail.append(f"ingest stored {figures['ingest']}")
        questions = dev_questions(max(args.queries, 20))
        figures["calls"] = timed("search and answer", ask, grpc_port, rest_port, questions[:args.queries])
        for kind, s in figures["calls"].items():
            if s["errors"] or s["with_results"] < s["calls"] or s["degraded"]:
                fail.append(f"{kind}: {s}")

        figures["kill"] = k = timed("kill and recover", kill_and_recover, compose, args.kill, grpc_port, questions,
                                    before=10, after=15, limit=240)
        if k["healthy_again_s"] is None or k["back"]["whole"] == 0 or k["back"]["degraded"] or k["back"]["errors"]:
            fail.append(f"{args.kill} did not come back whole: {k}")
        if k["away"]["whole"] + k["away"]["degraded"] == 0:
            fail.append(f"no answers while {args.kill} was away: {k['away']}")

        prom = Prometheus(prom_port)
        time.sleep(35)  # two more scrapes (15 s) and one rule evaluation (30 s) after the traffic
        targets = prom.get("targets")["activeTargets"]
        figures["targets"] = {"total": len(targets), "up": sum(x["health"] == "up" for x in targets),
                              "not_up": [f"{x['labels'].get('job')}/{x['labels'].get('instance')}: {x['health']} {x.get('lastError', '')}"
                                         for x in targets if x["health"] != "up"]}
        if figures["targets"]["not_up"] or not targets:
            fail.append(f"targets not up: {figures['targets']['not_up']}")

        def evaluate(queries: list[tuple[str, str, str]]) -> dict:
            empty, errors, counts = [], [], []
            for source, name, expr in queries:
                try:
                    n = prom.series(expr)
                except (RuntimeError, urllib.error.HTTPError) as err:
                    errors.append(f"{source}: {name}: {err}")
                    continue
                counts.append(n)
                if n == 0:
                    empty.append(f"{source}: {name}: {expr}")
            return {"queries": len(queries), "with_series": sum(1 for n in counts if n), "empty": empty, "errors": errors}

        figures["panels"] = timed("dashboard queries", evaluate, dashboard_queries())
        figures["alerts"] = timed("alert expressions", evaluate, alert_queries())
        for key in ("panels", "alerts"):
            if figures[key]["errors"]:
                fail.append(f"{key}: queries Prometheus refused: {figures[key]['errors']}")
        groups = prom.get("rules")["groups"]
        bad_rules = [f"{r['name']}: {r.get('health')} {r.get('lastError', '')}" for g in groups for r in g["rules"] if r.get("health") != "ok"]
        figures["rules"] = {"groups": len(groups), "rules": sum(len(g["rules"]) for g in groups), "unhealthy": bad_rules}
        if bad_rules or not groups:
            fail.append(f"rules unhealthy: {bad_rules}")

        compose.run("stop", args.stop)
        figures["forced_alert"] = a = timed("alert fires", wait_for_alert, prom, "GraphMeshTargetDown", {"service": args.stop}, 420)
        a["alert"], a["stopped"] = "GraphMeshTargetDown", args.stop
        if a["firing_after_s"] is None:
            fail.append(f"GraphMeshTargetDown did not fire for {args.stop}")
    except Exception as err:  # noqa: BLE001 - reported, then the stack is torn down
        fail.append(f"{type(err).__name__}: {err}")
        raise
    finally:
        if not args.keep:
            timed("compose down -v", compose.run, "down", "-v", "--remove-orphans", check=False)
        env_file.unlink(missing_ok=True)
        tmp.rmdir()
        report(figures)
        save("compose_check", figures)
    return 1 if fail else 0


def report(f: dict) -> None:
    """The figure table, Markdown."""
    rows = [("step", "figure")]
    rows += [(f"time: {k}", f"{v} s") for k, v in f["timings_s"].items()]
    if "ingest" in f:
        i = f["ingest"]
        rows.append(("ingest", f"{i['received']} received, {i['stored']} stored, {i['unchanged']} unchanged, "
                               f"{i['failures']} failed, {i['docs_per_s']} docs/s"))
    for kind, s in f.get("calls", {}).items():
        rows.append((kind, f"{s['calls']} calls, {s['with_results']} with results, {s['degraded']} degraded, "
                           f"{s['errors']} errors, mean {s['ms']} ms"))
    if "kill" in f:
        k = f["kill"]
        rows.append((f"SIGKILL {k['service']}", f"restart policy {k['restart_policy']}, restarts {k['restart_count']}, "
                     f"running again {k['running_again_s']} s, healthy {k['healthy_again_s']} s, "
                     f"last degraded/failed answer {k['last_degraded_or_failed_s']} s after the kill"))
        for ph in ("before", "away", "back"):
            p = k[ph]
            rows.append((f"  Search {ph}", f"{p['calls']} calls: {p['whole']} whole, {p['degraded']} degraded "
                                          f"{p['degraded_by'] or ''}, {p['errors']} errors"))
    if "targets" in f:
        rows.append(("Prometheus targets", f"{f['targets']['up']} of {f['targets']['total']} up"))
    for key, what in (("panels", "dashboard queries"), ("alerts", "alert expressions")):
        if key in f:
            rows.append((what, f"{f[key]['with_series']} of {f[key]['queries']} return series, "
                               f"{len(f[key]['errors'])} refused"))
    if "rules" in f:
        rows.append(("rule groups", f"{f['rules']['groups']} groups, {f['rules']['rules']} rules, "
                                    f"{len(f['rules']['unhealthy'])} unhealthy"))
    if "forced_alert" in f:
        a = f["forced_alert"]
        rows.append((f"{a.get('alert')} ({a.get('stopped')} stopped)",
                     f"pending after {a['pending_after_s']} s, firing after {a['firing_after_s']} s"))
    print()
    for r in rows:
        print(f"| {r[0]} | {r[1]} |")
    for key in ("panels", "alerts"):
        for line in f.get(key, {}).get("empty", []):
            print(f"no series: {line}")
    for line in f.get("targets", {}).get("not_up", []):
        print(f"target not up: {line}")
    for line in f["failures"]:
        print(f"FAILED: {line}")


if __name__ == "__main__":
    sys.exit(main())
