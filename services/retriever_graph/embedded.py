"""Embedded Neo4j 5.26 Community for development and tests.

The Maven project in ``deploy/neo4j-launcher`` wraps Neo4j's embedded
``DatabaseManagementService`` in a tiny ``Launcher`` main class that serves
Bolt on 127.0.0.1 (authentication on with the password given, off without one) and prints
``NEO4J_READY bolt://127.0.0.1:PORT`` once it accepts connections. This module
builds that project when needed, starts it as a detached process and stops it.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

LAUNCHER_DIR = Path("deploy") / "neo4j-launcher"
LAUNCHER_JAR = "neo4j-launcher-0.1.0.jar"
LAUNCHER_MAIN = "io.graphmesh.neo4j.Launcher"
READY_MARK = "NEO4J_READY"
_READY = re.compile(READY_MARK + r" (bolt://\S+)")
DEFAULT_READY_TIMEOUT_S = 180.0


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def build_launcher(repo_root: Path | str | None = None) -> list[str]:
    """Builds the launcher if its jar is missing and returns the command prefix.

    Runs ``mvn -q -B package -DskipTests`` in ``deploy/neo4j-launcher`` when
    ``target/neo4j-launcher-0.1.0.jar`` or ``target/lib`` is absent, or a
    Java source or the pom is newer than the jar.

    Args:
        repo_root: repository root; defaults to the one holding this module.

    Returns:
        ``["java", "-Xmx1g", "-cp", CLASSPATH, MAIN_CLASS]``: append the data
        directory and the Bolt port to get a full command.

    Raises:
        RuntimeError: Maven failed or did not produce the jar.
    """
    root = Path(repo_root) if repo_root is not None else _repo_root()
    project = root / LAUNCHER_DIR
    target = project / "target"
    jar = target / LAUNCHER_JAR
    lib = target / "lib"
    sources = [project / "pom.xml", *project.glob("src/**/*.java")]
    stale = jar.is_file() and any(src.stat().st_mtime > jar.stat().st_mtime for src in sources)
    if not jar.is_file() or not lib.is_dir() or stale:
        proc = subprocess.run(
            ["mvn", "-q", "-B", "package", "-DskipTests"],
            cwd=project,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not jar.is_file():
            tail = (proc.stdout + proc.stderr)[-4000:]
            raise RuntimeError(f"building {project} failed (exit {proc.returncode}):\n{tail}")
    classpath = f"{jar}{os.pathsep}{lib}{os.sep}*"
    return ["java", "-Xmx1g", "-cp", classpath, LAUNCHER_MAIN]


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


def start_embedded_neo4j(
    data_dir: Path,
    bolt_port: int,
    log_path: Path,
    *,
    repo_root: Path | str | None = None,
    timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    password: str = "",
) -> tuple[subprocess.Popen, str]:
    """Starts embedded Neo4j detached and waits until Bolt is ready.

    The process runs in its own session (``start_new_session=True``) so it
    survives the caller and is not hit by the caller's terminal signals;
    stop it with :func:`stop_process`. Its stdout and stderr go to
    ``log_path``.

    Args:
        data_dir: Neo4j home directory (created if missing).
        bolt_port: loopback port for Bolt; 0 lets the server bind a free one.
        log_path: file receiving the process output.
        repo_root: repository root; defaults to the one holding this module.
        timeout_s: how long to wait for the ready line.
        password: the password of user ``neo4j`` (8+ characters), set at
            every start; "" runs without authentication (throwaway stores).

    Returns:
        (the running process, its Bolt URI ``bolt://127.0.0.1:<port bound>``).

    Raises:
        RuntimeError: the process exited early, was not ready in time or
            reported port 0 (the process is stopped); the message holds the log tail.
        KeyboardInterrupt: interrupted while waiting (the process is stopped).
    """
    command = build_launcher(repo_root) + [str(Path(data_dir).resolve()), str(bolt_port)]
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "GRAPHMESH_NEO4J_PASSWORD": password},
        )
    try:
        return _wait_ready(proc, log_path, time.monotonic() + timeout_s, timeout_s)
    except BaseException:
        # Ctrl-C or any error while waiting: the process runs in its own
        # session, so nothing else would stop it and no pid file names it yet.
        if proc.poll() is None:
            stop_process(proc.pid)
        raise


def _wait_ready(proc: subprocess.Popen, log_path: Path, deadline: float, timeout_s: float) -> tuple[subprocess.Popen, str]:
    """Waits for the launcher's ready line (see start_embedded_neo4j)."""
    while True:
        ready = _READY.search(_tail(log_path, limit=1_000_000))
        if ready:
            if ready.group(1).endswith(":0"):
                # The launcher sometimes reports port 0 (no port bound yet);
                # the neo4j driver reads "host:0" as the default 7687, which
                # would reach another Neo4j (and tests wipe theirs). Refuse.
                stop_process(proc.pid)
                raise RuntimeError(f"embedded Neo4j reported {ready.group(1)}, not a bound port; log {log_path}")
            return proc, ready.group(1)
        code = proc.poll()
        if code is not None:
            raise RuntimeError(
                f"embedded Neo4j exited with {code} before it was ready; log {log_path}:\n"
                + _tail(log_path)
            )
        if time.monotonic() > deadline:
            stop_process(proc.pid)
            raise RuntimeError(
                f"embedded Neo4j not ready after {timeout_s:.0f} s; log {log_path}:\n" + _tail(log_path)
            )
        time.sleep(0.5)


def stop_process(pid: int, timeout_s: float = 30.0) -> None:
    """Stops a process started by :func:`start_embedded_neo4j`.

    Sends SIGTERM (Neo4j shuts down cleanly from its shutdown hook), waits up
    to ``timeout_s``, then sends SIGKILL. A process that is already gone is
    ignored.
    """
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return
        except ChildProcessError:
            # Not our child: poll for existence instead.
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
