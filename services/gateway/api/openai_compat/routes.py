"""The aiohttp routes /v1/chat/completions and /v1/models and the middleware that gives the edge's refusals OpenAI's error shape (services.gateway.api.openai_compat)."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence

import grpc
from aiohttp import web

from graphmesh.gateway.v1 import gateway_pb2
from services.common.admission import Overloaded
from services.common.filters import DEFAULT_COLLECTION
from services.common.spelling import closest
from services.gateway.api.edge_rules import request_timeout
from services.gateway.api.openai_compat.replies import (StreamState, chunk_body, completion_body, completion_id, error_response,
                                                        models_body, openai_shape, rpc_error, stream_chunks)
from services.gateway.api.openai_compat.requests import (CHAT_PATH, MODELS_PATH, UNSERVED_OPENAI_PATHS, ChatError, ChatRequest, bad,
                                                         chat_request, is_openai_path, parse_model, refused_alone)


@web.middleware
async def openai_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Rewrites the JSON errors of the middlewares inside it (edge rules,
    unknown method, body too large) into OpenAI's shape on the OpenAI
    paths (``is_openai_path``); other paths pass untouched. Put it first
    (outermost) in the app's list."""
    response = await handler(request)
    if not is_openai_path(request.path) or response.status < 400 or not isinstance(response, web.Response):
        return response
    if not (response.content_type or "").startswith("application/json") or response.body is None:
        return response
    try:
        body = json.loads(response.body)
    except (ValueError, TypeError):
        return response
    if not isinstance(body, dict) or "status" not in (body.get("error") or {}):
        return response  # already OpenAI-shaped
    shaped = web.json_response(openai_shape(body, response.status), status=response.status,
                               dumps=lambda o: json.dumps(o, ensure_ascii=False))
    for name in ("Retry-After", "X-Trace-Id", "Access-Control-Allow-Origin", "Vary", "Access-Control-Expose-Headers"):
        if name in response.headers:
            shaped.headers[name] = response.headers[name]
    return shaped


def add_openai_routes(app: web.Application, state: dict, body_timeout: float = 60.0,
                      forwarded: Sequence[str] = ("authorization", "x-api-key"), max_query_chars: int = 10_000) -> None:
    """Adds POST /v1/chat/completions, GET /v1/models and GET /v1/models/{model} to ``app``, and an
    OpenAI-shaped 404 for OpenAI's endpoints GraphMesh does not serve (UNSERVED_OPENAI_PATHS).
    ``state`` is the REST app's: its "stub" (GatewayServiceStub over the
    loopback channel) and "admission" are read at request time; the
    ``forwarded`` request headers travel as the calls' metadata;
    ``max_query_chars``: the gateway's, which earlier turns are cut to fit."""

    def metadata(request: web.Request) -> list[tuple[str, str]]:
        return [(h, request.headers[h]) for h in forwarded if h in request.headers]

    def deadline(request: web.Request) -> float | None:
        timeout, refusal = request_timeout(request.headers)
        if refusal is not None:
            raise ChatError(400, f"{refusal.field}: {refusal.message}", refusal.field, "invalid_value")
        return timeout

    async def known_collections(request: web.Request, timeout: float | None) -> set[str]:
        reply = await state["stub"].ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=timeout,
                                                    metadata=metadata(request))
        return {c.name for c in reply.collections}

    async def chat(request: web.Request) -> web.StreamResponse:
        try:
            try:
                raw = await asyncio.wait_for(request.read(), body_timeout)
            except asyncio.TimeoutError:
                raise ChatError(408, f"request body not received within {body_timeout:g} s", None, "timeout", "timeout")
            try:
                body = json.loads(raw.decode("utf-8-sig")) if raw.strip() else None
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise bad(None, "the request body must be UTF-8 JSON", "invalid_json") from None
            chat_req = chat_request(body, max_query_chars)
            timeout = deadline(request)
            async with state["admission"].slot(timeout) as waited:
                remaining = None if timeout is None else max(timeout - waited, 0.001)
                try:
                    named = set(chat_req.model.collections) - {DEFAULT_COLLECTION}
                    if named:
                        known = await known_collections(request, remaining)
                        missing = sorted(named - known)
                        if missing:
                            close = closest(missing[0], sorted(known - {DEFAULT_COLLECTION}), max_edits=2)
                            hint = f"; did you mean 'graphmesh:{close}'?" if close else ""
                            raise ChatError(404, f"The model {chat_req.model_name!r} does not exist: no collection "
                                                 f"{missing[0]!r}{hint} (GET /v1/models)", "model", "model_not_found")
                    if chat_req.stream:
                        return await _stream_reply(request, chat_req, remaining, metadata(request))
                    reply = chat_req.unasked if chat_req.unasked is not None else await state["stub"].Answer(
                        chat_req.answer, timeout=remaining, metadata=metadata(request))
                    if refused_alone(chat_req, reply):
                        again = await state["stub"].Answer(chat_req.with_earlier, timeout=remaining, metadata=metadata(request))
                        reply = again if again.mode != gateway_pb2.ANSWER_MODE_ABSTAINED else reply
                except grpc.aio.AioRpcError as err:
                    raise rpc_error(err) from None
        except ChatError as err:
            return error_response(err)
        except Overloaded as busy:
            return error_response(_overloaded(busy))
        return web.json_response(completion_body(reply, chat_req.model_name, completion_id(), int(time.time())),
                                 dumps=lambda o: json.dumps(o, ensure_ascii=False))

    async def _stream_reply(request: web.Request, chat_req: ChatRequest, timeout: float | None,
                            md: list[tuple[str, str]]) -> web.StreamResponse:
        def streamed(answer: gateway_pb2.AnswerRequest):
            stream_request = gateway_pb2.AnswerStreamRequest()
            stream_request.ParseFromString(answer.SerializeToString())  # same fields, same numbers
            return state["stub"].AnswerStream(stream_request, timeout=timeout, metadata=md)

        call = streamed(chat_req.answer) if chat_req.unasked is None else None
        cid, created, sent = completion_id(), int(time.time()), StreamState()
        response: web.StreamResponse | None = None

        async def send(chunk: dict) -> None:
            await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())

        async def events():
            nonlocal call
            if call is None:  # nothing asked: the reply alone
                yield gateway_pb2.AnswerStreamResponse(done=chat_req.unasked)
                return
            async for event in call:
                if event.WhichOneof("event") == "done" and refused_alone(chat_req, event.done):
                    call = streamed(chat_req.with_earlier)  # stages send nothing: the reader sees one answer
                    async for again in call:
                        if again.WhichOneof("event") == "done" and again.done.mode == gateway_pb2.ANSWER_MODE_ABSTAINED:
                            break
                        yield again
                    else:
                        return
                yield event

        try:
            async for event in events():
                if response is None:
                    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                           "Cache-Control": "no-cache"})
                    await response.prepare(request)
                    await send(chunk_body(cid, created, chat_req.model_name, {"role": "assistant", "content": ""}))
                for chunk in stream_chunks(event, sent, cid, created, chat_req.model_name):
                    await send(chunk)
        except grpc.aio.AioRpcError as err:
            if response is None:
                raise
            await response.write(f"data: {json.dumps(rpc_error(err).body(), ensure_ascii=False)}\n\n".encode())
        except (asyncio.CancelledError, ConnectionResetError):
            if call is not None:
                call.cancel()
            raise
        if response is None:
            raise ChatError(502, "the answer stream ended without an answer", None, "empty_stream", "server_error")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def listed(request: web.Request) -> dict:
        """models_body of the stored collections. Raises ChatError (the call failed, or overloaded)."""
        try:
            timeout = deadline(request)
            async with state["admission"].slot(timeout) as waited:
                remaining = None if timeout is None else max(timeout - waited, 0.001)
                try:
                    reply = await state["stub"].ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=remaining,
                                                                metadata=metadata(request))
                except grpc.aio.AioRpcError as err:
                    raise rpc_error(err) from None
        except Overloaded as busy:
            raise _overloaded(busy) from None
        return models_body(reply.collections)

    async def models(request: web.Request) -> web.StreamResponse:
        try:
            return web.json_response(await listed(request), dumps=lambda o: json.dumps(o, ensure_ascii=False))
        except ChatError as err:
            return error_response(err)

    async def model(request: web.Request) -> web.StreamResponse:
        """One model, as OpenAI's "retrieve model": any name a chat request may give (a listed model, or a
        listed collection's with a profile or several collections), 404 model_not_found otherwise."""
        name = request.match_info["model"]
        try:
            wanted = parse_model(name)
            body = await listed(request)
            stored = {m["collection"] for m in body["data"] if "collection" in m} | {DEFAULT_COLLECTION}
            missing = [c for c in wanted.collections if c not in stored]
            if missing:
                raise ChatError(404, f"The model {name!r} does not exist: no collection {missing[0]!r} (GET /v1/models)",
                                "model", "model_not_found")
            listed_model = next((m for m in body["data"] if m["id"] == name), None)
            return web.json_response(listed_model or {"id": name, "object": "model", "created": 0, "owned_by": "graphmesh"},
                                     dumps=lambda o: json.dumps(o, ensure_ascii=False))
        except ChatError as err:
            return error_response(err)

    async def unserved(request: web.Request) -> web.StreamResponse:
        return error_response(ChatError(404, f"GraphMesh does not serve {request.path}: it answers with POST {CHAT_PATH} "
                                             f"and lists its models with GET {MODELS_PATH}", None, "unknown_url"))

    app.router.add_post(CHAT_PATH, chat)
    app.router.add_get(MODELS_PATH, models)
    app.router.add_get(MODELS_PATH + "/{model}", model)
    for path in sorted(UNSERVED_OPENAI_PATHS):
        app.router.add_route("*", path, unserved)


def _overloaded(busy: Overloaded) -> ChatError:
    if busy.waited:
        return ChatError(504, str(busy), None, "timeout", "server_error")
    return ChatError(429, str(busy), None, "rate_limit_exceeded", "rate_limit_error", {"Retry-After": str(busy.retry_after)})
