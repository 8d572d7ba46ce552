"""The shared LLM client against a real HTTP server on loopback that answers
like an OpenAI-compatible endpoint under load: 429 and 503 first, then 200;
a permanent 500; a server that never answers."""
from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from services.common.llm import LlmClient, LlmConfig, LlmError

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]
MESSAGES = [{"role": "user", "content": "hi"}]


async def serve(handler):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/v1"


def reply(text: str) -> web.Response:
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": text}}]})


async def test_429_and_503_are_retried_with_backoff_then_succeed():
    statuses = [429, 503]
    seen = []

    async def handler(request):
        seen.append(asyncio.get_running_loop().time())
        if statuses:
            return web.Response(status=statuses.pop(0))
        return reply("好")

    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=10, max_retries=2, backoff=0.1))
    try:
        assert await client.complete(MESSAGES, 8) == "好"
    finally:
        await client.close()
        await runner.cleanup()
    assert len(seen) == 3
    assert seen[1] - seen[0] >= 0.1 and seen[2] - seen[1] >= 0.2  # doubled backoff


async def test_retries_are_bounded_then_degrade_with_a_reason():
    calls = 0

    async def handler(request):
        nonlocal calls
        calls += 1
        return web.Response(status=500)

    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=10, max_retries=2, backoff=0.05))
    try:
        with pytest.raises(LlmError) as err:
            await client.complete(MESSAGES, 8)
    finally:
        await client.close()
        await runner.cleanup()
    assert err.value.reason == "server_error" and calls == 3


async def test_client_errors_are_not_retried():
    calls = 0

    async def handler(request):
        nonlocal calls
        calls += 1
        return web.Response(status=400)

    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=10, max_retries=3, backoff=0.05))
    try:
        with pytest.raises(LlmError) as err:
            await client.complete(MESSAGES, 8)
    finally:
        await client.close()
        await runner.cleanup()
    assert err.value.reason == "http_400" and calls == 1


async def test_a_call_that_does_not_answer_times_out():
    release = asyncio.Event()

    async def handler(request):
        await release.wait()  # no answer until the test is over
        return reply("late")

    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=0.3))
    try:
        with pytest.raises(LlmError) as err:
            # The guard only turns a hang into a failure; the client's own
            # timeout is what the test is about.
            await asyncio.wait_for(client.complete(MESSAGES, 8), 60)
    finally:
        release.set()
        await client.close()
        await runner.cleanup()
    assert err.value.reason == "timeout"


async def test_disabled_client_says_so():
    with pytest.raises(LlmError) as err:
        await LlmClient(LlmConfig()).complete(MESSAGES, 8)
    assert err.value.reason == "disabled"


@pytest.mark.parametrize("body", [b"{not json", b'{"choices": []}', b'{"choices": [{"message": null}]}',
                                  b'[1, 2]', b'{"choices": [{"message": {"content": 7}}]}'])
async def test_a_malformed_answer_is_an_llm_error_not_a_crash(body):
    # Regression (issue 16, fault matrix "LLM answers malformed JSON"): the
    # parse error escaped as ValueError/KeyError, so the expander's Rewrite
    # answered INTERNAL instead of degrading.
    async def handler(request):
        return web.Response(body=body, content_type="application/json")

    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=5, max_retries=2, backoff=0.05))
    try:
        with pytest.raises(LlmError) as err:
            await client.complete(MESSAGES, 8)
    finally:
        await client.close()
        await runner.cleanup()
    assert err.value.reason == "malformed"



async def test_a_stream_counts_once_with_its_whole_time_and_its_first_token():
    from services.common.llm import LLM_CALLS, LLM_FIRST_TOKEN_SECONDS, LLM_SECONDS

    async def handler(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(0.2)  # the model reads the prompt
        for piece in ("婚假", "为13天。"):
            await response.write(f'data: {{"choices": [{{"delta": {{"content": "{piece}"}}}}]}}\n\n'.encode())
            await asyncio.sleep(0.1)
        await response.write(b"data: [DONE]\n\n")
        return response

    def sample(metric, name, **labels):
        return next(s.value for m in metric.collect() for s in m.samples if s.name == name and s.labels == labels)

    purpose = "stream-test"
    runner, url = await serve(handler)
    client = LlmClient(LlmConfig(base_url=url, timeout=10))
    try:
        assert "".join([p async for p in client.stream(MESSAGES, 8, purpose=purpose)]) == "婚假为13天。"
    finally:
        await client.close()
        await runner.cleanup()
    assert sample(LLM_CALLS, "graphmesh_llm_calls_total", purpose=purpose, outcome="ok") == 1
    assert not any(s.labels.get("outcome") == "stream_done" for m in LLM_CALLS.collect() for s in m.samples)
    first = sample(LLM_FIRST_TOKEN_SECONDS, "graphmesh_llm_first_token_seconds_sum", purpose=purpose)
    whole = sample(LLM_SECONDS, "graphmesh_llm_seconds_sum", purpose=purpose)
    assert 0.2 <= first < whole and whole >= 0.3  # the first token after the prompt; the call until its last token
