"""The local LLM: llama.cpp's OpenAI-compatible HTTP server through the PyPI
package ``xllamacpp`` (prebuilt CPU wheel, optional extra ``llm``), serving a
GGUF assembled by ``services.llm.models``.

Run as a process (``python -m services.llm.server --model qwen0.5b --port N``,
what ``graphmesh up --llm`` and the test fixture do): it prints
``READY llm http://127.0.0.1:N/v1`` once the model is loaded and serves until
SIGTERM/SIGINT. Settings (environment prefix GRAPHMESH_LLM_): model, port,
threads, ctx (context tokens), parallel (slots).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from pydantic_settings import SettingsConfigDict

from services.common.settings import GraphMeshSettings

DEFAULT_PORT = 50060


class LocalLlmSettings(GraphMeshSettings):
    """Attributes:
    model: a name from services.llm.models.MODELS, or a path to a .gguf file.
    host / port: where the HTTP server listens (port 50060 by default).
    threads: CPU threads for generation and prompt processing.
    ctx: context window in tokens (shared by the slots).
    parallel: concurrent request slots.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_LLM_")

    model: str = "qwen1.5b"  # services.llm.models.DEFAULT_MODEL
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    threads: int = 2
    ctx: int = 4096
    parallel: int = 1


def resolve_model(model: str) -> Path:
    """Path of the GGUF for a model name (assembled and verified on first use)
    or an explicit .gguf path.

    Raises:
        services.llm.models.ModelUnavailable: cannot assemble or verify.
        FileNotFoundError: an explicit path that does not exist.
    """
    from services.llm.models import MODELS, fetch_model

    if model in MODELS:
        return fetch_model(model, log=lambda m: print(m, file=sys.stderr, flush=True))
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(path)
    return path


def serve(settings: LocalLlmSettings, stop: threading.Event) -> None:
    """Loads the model and serves until ``stop`` is set.

    Raises:
        ImportError: xllamacpp is not installed (pip install -e '.[llm]').
    """
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(resolve_model(settings.model))
    params.hostnames = [settings.host]
    params.port = settings.port
    params.n_ctx = settings.ctx
    params.n_parallel = settings.parallel
    params.cpuparams.n_threads = settings.threads
    params.cpuparams_batch.n_threads = settings.threads
    params.sampling.seed = 42
    params.endpoint_slots = True  # GET /slots: whether a request is still generating
    params.endpoint_metrics = True
    server = xllamacpp.Server(params)
    print(f"READY llm http://{settings.host}:{settings.port}/v1", flush=True)
    try:
        stop.wait()
    finally:
        del server


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (flags override GRAPHMESH_LLM_* settings)."""
    parser = argparse.ArgumentParser(prog="python -m services.llm.server")
    parser.add_argument("--model")
    parser.add_argument("--port", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--ctx", type=int)
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None}
    settings = LocalLlmSettings(**overrides)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve(settings, stop)
    return 0


def start_process(settings: LocalLlmSettings, log_path: Path, timeout: float = 300.0, cwd: Path | None = None) -> subprocess.Popen:
    """Starts the server as a child process (own session) and waits until it
    answers GET /health.

    Raises:
        RuntimeError: it exited or did not become healthy in ``timeout`` s
            (the message carries the log tail).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.update({f"GRAPHMESH_LLM_{k.upper()}": str(v) for k, v in settings.model_dump().items()})
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.llm.server"], cwd=cwd or Path(__file__).resolve().parents[2], env=env,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    url = f"http://{settings.host}:{settings.port}/health"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"local LLM exited ({proc.returncode}):\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return proc
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.terminate()
            raise RuntimeError(f"local LLM not healthy after {timeout:.0f}s:\n{_tail(log_path)}")
        time.sleep(0.5)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


if __name__ == "__main__":
    sys.exit(main())
