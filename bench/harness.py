"""The local stack for the reliability benchmarks (not tests): embedded
PostgreSQL and Neo4j plus the seven services as processes, started the way
`graphmesh up` starts them (services.cli.stack) but on their own ports and
GRAPHMESH_HOME, so they never meet another stack on this machine:

    gRPC 54101..54107 (gateway, expander, retriever_pg, retriever_graph,
    reranker, fuser, judge), metrics 55101..55107, REST 8282, Bolt 37687,
    the fake LLM 54160.

``Stack`` kills, stops and restarts each part on request, and says when it
is healthy again. A small asyncio load driver (``run_load``) sends Search and
Answer requests from the law dev questions, closed loop, loopback only.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "gen" / "python"))

PORTS = {"gateway": 54101, "expander": 54102, "retriever_pg": 54103, "retriever_graph": 54104,
         "reranker": 54105, "fuser": 54106, "judge": 54107}
REST_PORT = 8282
BOLT_PORT = 37687
LLM_PORT = 54160
SHARED_DATA = REPO.parent / "shared" / "data"
if not SHARED_DATA.exists():
    SHARED_DATA = Path("/work/shared/data")
LAW_DEV = SHARED_DATA / "law-zh" / "queries-scenario-dev.jsonl"
#: The law corpus as `graphmesh datasets fetch law-zh` writes it, else the
#: frozen copy under shared/data (the same ids and fields).
LAW_CORPUS = Path.home() / ".cache" / "graphmesh" / "datasets" / "law-zh" / "corpus.jsonl.gz"
if not LAW_CORPUS.exists():
    LAW_CORPUS = SHARED_DATA / "law-zh" / "corpus.jsonl.gz"


def configure_environment(home: Path, extra: dict[str, str] | None = None) -> None:
    """Sets this process's environment for the stack (ports, addresses,
    GRAPHMESH_HOME) before services.cli.stack is used."""
    os.environ["GRAPHMESH_HOME"] = str(home)
    for name, port in PORTS.items():
        prefix = f"GRAPHMESH_{name.upper()}"
        os.environ[f"{prefix}_PORT"] = str(port)
        os.environ[f"{prefix}_ADDR"] = f"127.0.0.1:{port}"
        os.environ[f"{prefix}_METRICS_PORT"] = str(port + 1000)
    os.environ["GRAPHMESH_GATEWAY_REST__PORT"] = str(REST_PORT)
    os.environ["GRAPHMESH_NEO4J_BOLT_PORT"] = str(BOLT_PORT)
    os.environ["GRAPHMESH_LLM_PORT"] = str(LLM_PORT)
    os.environ.pop("GRAPHMESH_RETRIEVER_PG_DSN", None)
    os.environ.pop("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", None)
    os.environ.update(extra or {})


@dataclass
class Stack:
    """One benchmark stack under ``home``.

    Args:
        home: its GRAPHMESH_HOME (pids, logs, pgdata, neo4j).
        fake_llm: start bench/fault_fakes.py's LLM and point gateway and
            expander at it.
        stand_in_reranker: run bench/fault_fakes.py's reranker instead of the
            real one, and enable reranking in the gateway.
        env: further environment for every service.
    """

    home: Path
    fake_llm: bool = False
    stand_in_reranker: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = Path(self.home).resolve()
        self.control = self.home / "faults.json"
        extra = dict(self.env)
        if self.fake_llm:
            url = f"http://127.0.0.1:{LLM_PORT}/v1"
            extra.setdefault("GRAPHMESH_GATEWAY_LLM__BASE_URL", url)
            extra.setdefault("GRAPHMESH_EXPANDER_LLM__BASE_URL", url)
            extra.setdefault("GRAPHMESH_GATEWAY_LLM__TIMEOUT", "10")
        if self.stand_in_reranker:
            extra.setdefault("GRAPHMESH_GATEWAY_RERANK__ENABLED", "true")
        configure_environment(self.home, extra)
        from services.cli import stack

        self._stack = stack
        self.cfg = stack.StackConfig(neo4j_bolt_port=BOLT_PORT, rest_port=REST_PORT)
        self.pids: dict[str, int] = {}
        self.service_env: dict[str, str] = {}
        self.pg_dsn = self.neo4j_uri = ""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Stores, fakes, then every service; returns once all are SERVING.
        When a part fails to start, what did start is stopped again (a failed
        start used to leave the stores and services running)."""
        from bench.fault_fakes import write_control

        self.home.mkdir(parents=True, exist_ok=True)
        write_control(self.control, llm="ok", rerank_delay=0)
        self.pids = self._stack._read_pids()
        try:
            self.pg_dsn, self.neo4j_uri = self._stack.start_stores(self.cfg, self.pids)
            self._stack._write_pids(self.pids)
            self.service_env = self._stack.service_env(self.cfg, self.pg_dsn, self.neo4j_uri)
            if self.fake_llm and not self._alive("llm"):
                self.pids["llm"] = self._spawn_fake("llm", LLM_PORT)
            if self.stand_in_reranker and not self._alive("reranker"):
                self.pids["reranker"] = self._spawn_fake("reranker", PORTS["reranker"])
            self._stack.start_services(self.service_env, self.pids)
        except BaseException:
            self.down()
            raise

    @property
    def neo4j_auth(self) -> tuple[str, str]:
        """(user, password) of the stack's embedded Neo4j."""
        return "neo4j", self._stack.local_secret("neo4j-password").read_text().strip()

    def down(self) -> None:
        """Stops everything this stack started (services, fakes, stores)."""
        self._stack._write_pids(self.pids)
        self._stack.down()

    def _alive(self, name: str) -> bool:
        pid = self.pids.get(name)
        return bool(pid and pid > 0 and self._stack._alive(pid))

    def _spawn_fake(self, kind: str, port: int) -> int:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        log = open(self.home / "logs" / f"fake-{kind}.log", "ab")
        proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fault_fakes.py"), kind, "--port", str(port),
                                 "--control", str(self.control)], cwd=REPO, env=self.service_env or dict(os.environ),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return proc.pid

    # ------------------------------------------------------------ faults

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Sends ``sig`` to the process of ``name`` (a service, "llm", "neo4j")."""
        pid = self.pids.get(name)
        if pid and pid > 0:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            if sig == signal.SIGKILL:
                for _ in range(100):
                    if not self._stack._alive(pid):
                        break
                    time.sleep(0.05)

    def restart_service(self, name: str) -> None:
        """Starts ``name`` again (a service or the stand-in reranker) and
        returns once it is SERVING."""
        if name == "reranker" and self.stand_in_reranker:
            self.pids["reranker"] = self._spawn_fake("reranker", PORTS["reranker"])
        self._stack.start_services(self.service_env, self.pids)

    def stop_postgres(self, sig: int = signal.SIGINT) -> None:
        """Stops PostgreSQL: SIGINT to the postmaster is pg_ctl's fast
        shutdown, SIGKILL a crash. (pg_ctl itself is not forked from here:
        forking a process with gRPC threads crashed it.)"""
        pid = self.process_of("postgres")
        os.kill(pid, sig)
        for _ in range(600):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not stop within 60 s")

    def start_postgres(self) -> None:
        """Starts the embedded PostgreSQL again (in a helper process) and
        checks it came back at the same address."""
        code = ("import sys; from services.retriever_pg.embedded import start_embedded_postgres; "
                "print(start_embedded_postgres(sys.argv[1]))")
        done = subprocess.run([sys.executable, "-c", code, str(self.home / "pgdata")], cwd=REPO, env=dict(os.environ),
                              capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr[-2000:]}")
        dsn = done.stdout.strip().splitlines()[-1]
        if dsn != self.pg_dsn:
            raise RuntimeError(f"PostgreSQL came back at another address: {dsn} (was {self.pg_dsn})")

    def stop_neo4j(self) -> None:
        from services.retriever_graph.embedded import stop_process

        stop_process(self.pids["neo4j"])

    def start_neo4j(self) -> None:
        from services.retriever_graph.embedded import start_embedded_neo4j

        proc, _ = start_embedded_neo4j(self.home / "neo4j", BOLT_PORT, self.home / "logs" / "neo4j.log")
        self.pids["neo4j"] = proc.pid
        self._stack._write_pids(self.pids)

    def set_fault(self, **values) -> None:
        """Writes the fakes' control file (llm mode, rerank_delay)."""
        from bench.fault_fakes import write_control

        write_control(self.control, **values)

    def process_of(self, name: str) -> int:
        """Pid of a service or store process (PostgreSQL: its postmaster)."""
        if name == "postgres":
            return int((self.home / "pgdata" / "postmaster.pid").read_text().split()[0])
        return self.pids[name]

    # ------------------------------------------------------------ data

    def ingest(self, path: Path, limit: int | None = None, batch: int = 500) -> dict:
        """Ingests documents from a JSONL(.gz) file through the gateway's
        Ingest RPC, ``batch`` records per call; returns ``ingest_lines``'s
        counts."""
        return self.ingest_lines(list(itertools.islice(read_lines(path), limit)), batch)

    def ingest_lines(self, lines: list[str], batch: int = 500) -> dict:
        """Ingests JSONL ``lines`` (law_zh pack), ``batch`` per Ingest call;
        returns the summed counts (received, stored, unchanged, failures)
        and, under "stage_ms", the summed milliseconds of each reported
        ingest stage."""
        import grpc

        from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

        totals: dict = {"received": 0, "stored": 0, "unchanged": 0, "failures": 0, "stage_ms": {}}
        with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
            stub = gateway_pb2_grpc.GatewayServiceStub(ch)
            for start in range(0, len(lines), batch):
                payload = "\n".join(lines[start : start + batch]).encode()
                reply = stub.Ingest(gateway_pb2.IngestRequest(jsonl=payload, domain_pack="law_zh"), timeout=900)
                totals["received"] += reply.received
                totals["stored"] += reply.stored
                totals["unchanged"] += reply.unchanged
                totals["failures"] += len(reply.failures)
                for timing in reply.timings:
                    totals["stage_ms"][timing.stage] = totals["stage_ms"].get(timing.stage, 0.0) + timing.duration_ms
        return totals


def read_lines(path: Path):
    """Non-empty lines of a JSONL or JSONL.gz file."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield line.rstrip("\n")


def cited_law_slice(limit: int) -> tuple[list[str], list[str]]:
    """(the first ``limit`` scenario dev questions, JSONL lines of every
    article of the laws their gold articles belong to): a corpus slice small
    enough to load in minutes on which those questions have their answers."""
    questions = [json.loads(line) for line in itertools.islice(read_lines(LAW_DEV), limit)]
    gold = {str(g) for q in questions for g in q["gold"]}
    articles = [json.loads(line) for line in read_lines(LAW_CORPUS)]
    laws = {a["law"] for a in articles if str(a["id"]) in gold}
    lines = [json.dumps(a, ensure_ascii=False) for a in articles if a["law"] in laws]
    return [q["query"] for q in questions], lines


def dev_questions(limit: int = 100) -> list[str]:
    """The first ``limit`` law scenario dev questions."""
    return [json.loads(line)["query"] for line in itertools.islice(read_lines(LAW_DEV), limit)]


# ---------------------------------------------------------------- load


@dataclass
class Sample:
    """One request of the load: monotonic start and end, RPC, status code
    name ("OK" or the error), and the services its response lists as degraded."""

    start: float
    end: float
    rpc: str
    code: str
    degraded: tuple[str, ...] = ()
    detail: str = ""  # the first DEGRADED stage, "stage: detail"


async def run_load(questions: list[str], seconds: float, concurrency: int, stop: asyncio.Event | None = None,
                   deadline: float = 10.0, max_requests: int = 1_000_000,
                   rpcs: tuple[str, ...] = ("Search", "Answer")) -> list[Sample]:
    """Closed-loop load on the gateway (127.0.0.1 only): ``concurrency``
    workers, each sending the next question as the next RPC of ``rpcs`` in
    turn and waiting for the reply, for ``seconds`` (or until ``stop`` is
    set, or ``max_requests`` were sent). Every request has ``deadline``
    seconds. The client reconnects at most 0.5 s after the gateway is back."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    feed = itertools.cycle(questions)
    kinds = itertools.cycle(rpcs)
    samples: list[Sample] = []
    end = time.monotonic() + seconds
    options = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 500),
               ("grpc.min_reconnect_backoff_ms", 200)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{PORTS['gateway']}", options=options) as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)

        async def worker() -> None:
            while time.monotonic() < end and len(samples) < max_requests and not (stop and stop.is_set()):
                rpc, query = next(kinds), next(feed)
                started = time.monotonic()
                try:
                    if rpc == "Search":
                        reply = await stub.Search(gateway_pb2.SearchRequest(query=query, top_k=5), timeout=deadline)
                        search = reply
                    else:
                        reply = await stub.Answer(gateway_pb2.AnswerRequest(query=query, top_k=5), timeout=deadline)
                        search = reply.search
                    detail = next((f"{t.stage}: {t.detail}" for t in search.timings if t.status == 3), "")
                    samples.append(Sample(started, time.monotonic(), rpc, "OK", tuple(search.degraded), detail[:200]))
                except grpc.aio.AioRpcError as err:
                    samples.append(Sample(started, time.monotonic(), rpc, err.code().name))
                    if err.code() == grpc.StatusCode.UNAVAILABLE:
                        await asyncio.sleep(0.05)  # the gateway is down: do not spin

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    """Open file descriptors of ``pid`` (sockets included; 0 when gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0
