"""The real gateway (servicer, interceptors, REST transcoder) over the fakes
of tests/fakes.py, served from its own thread and event loop, so that
synchronous clients (hypothesis tests, schemathesis, bench/fuzz_contracts.py)
can call it while their own thread blocks."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from services.common.server import create_server
from services.common.settings import nested_update
from services.gateway.config import GatewaySettings
from services.gateway.server import gateway_service, use_cases
from tests.fakes import FakeExpander, FakeFuser, FakeLlm, FakeReranker, FakeRetriever, candidate

ARTICLE = candidate("1", "第一条 测试。", "pg.keyword", 1.0, 0.9)


@dataclass
class ThreadedGateway:
    """A gateway over fakes on loopback; ``stop()`` ends it."""

    address: str
    rest_url: str
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    _stop: asyncio.Event

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()


def start_threaded_gateway(**overrides) -> ThreadedGateway:
    """Starts the gateway (GatewaySettings ``overrides``; ports 0) in a new
    thread and returns once gRPC and REST listen."""
    ready: dict = {}
    started = threading.Event()

    async def main() -> None:
        settings = GatewaySettings(**nested_update({"port": 0, "rest": {"port": 0}, "deadlines": {"retrieve": 0.5}}, overrides))
        use = use_cases(settings, FakeExpander(), [FakeRetriever("retriever_pg", [ARTICLE]), FakeRetriever("retriever_graph")],
                        FakeReranker(), FakeFuser(), FakeLlm(enabled=True, answer="根据[1]，测试。"))
        service = gateway_service(settings, use)
        server, port, _ = await create_server(service)
        tasks = [asyncio.create_task(task(port)) for task in service.extra_tasks]
        rest_port = await asyncio.wait_for(service.endpoints["rest"], 30)
        stop = asyncio.Event()
        ready.update(address=f"127.0.0.1:{port}", rest_url=f"http://127.0.0.1:{rest_port}", stop=stop,
                     loop=asyncio.get_running_loop())
        started.set()
        await stop.wait()
        for task in tasks:
            task.cancel()
        await server.stop(0)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True, name="threaded-gateway")
    thread.start()
    if not started.wait(60):
        raise RuntimeError("the threaded gateway did not start")
    return ThreadedGateway(ready["address"], ready["rest_url"], ready["loop"], thread, ready["stop"])
