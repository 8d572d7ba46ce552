"""OpenAI-compatible chat routes on the gateway's REST port, so that any
OpenAI client or chat UI can ask GraphMesh questions:

    POST /v1/chat/completions   a chat completion (``"stream": true``: server-sent events)
    GET  /v1/models             the models (collections) that can be asked

Both are built on the public RPCs, called over the REST app's loopback
channel with the caller's ``Authorization`` / ``X-API-Key`` headers
forwarded, exactly as the transcoded routes are: a chat completion is one
Answer call (AnswerStream when streamed), the model list one
ListCollections call. So the API-key check and rate limits (the gRPC
server's AuthInterceptor, which takes ``Authorization: Bearer KEY`` as
OpenAI clients send it), deadlines (X-Timeout-Seconds / grpc-timeout),
admission and metrics are those of every other route, and the edge rules
(Host allow-list, cross-site write refusal, application/json on POST) run
before these handlers as before any other route.

Model names (MODEL_PREFIX):
    ``graphmesh``                      the default collection
    ``graphmesh:<c1>[,<c2>...]``       those collections (at most 20)
    ``...@fast`` / ``...@rerank``      answer profile: no cross-encoder /
                                       always the cross-encoder (default:
                                       the gateway's own rerank setting)
A named collection that is not stored (other than "default") is 404
``model_not_found``.

The question is the last message, which must be a user message; the user
turns before it (at most CONTEXT_TURNS, each cut to CONTEXT_TURN_CHARS) are
prepended as ``（上文：turn1；turn2）`` (``(Earlier: turn1; turn2) `` when
the question has no CJK character) so that a follow-up ("那第二款呢？") is
searched and answered with what it refers to. System, developer, assistant
and tool messages are not sent: the gateway's grounding prompt is fixed,
and earlier answers would only echo their own citations.

Replies carry the answer with its [n] marks and, as extensions:
``choices[0].message.citations`` (streamed: ``choices[0].delta.citations``
on the last chunk) = [{"number", "document_id", "candidate_id", "label"}],
and a top-level ``graphmesh`` object {"mode": "llm" | "extractive" |
"abstained", "abstained", "strategy", "answerability",
"answerability_threshold", "insufficient_sources", "answer"}. An abstention
(the evidence does not answer the question) is an ordinary reply whose text
says so, with no citations. Streamed deltas are the model's raw tokens; the
verified answer (citation marks checked, docs/usage.md) is
``graphmesh.answer`` on the last chunk; when nothing was streamed
(extractive answer, abstention) the whole answer arrives as one delta.
``usage`` is not reported (the gateway does not count tokens).

Errors use OpenAI's shape, {"error": {"message", "type", "param", "code"}},
with the HTTP status of the gateway's error (400 for bad input, "param"
naming the request field: "messages", "model", "top_k", ...; 401 without a
valid key when auth is on; 429 with Retry-After over the key's rate) — the
edge's own refusals (403, 404, 405, 413, 415) on these paths included.
"""
from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from grpc_status import rpc_status

from graphmesh.gateway.v1 import gateway_pb2
from services.common.admission import Overloaded
from services.common.errors import InvalidArgument, field_violations
from services.common.filters import DEFAULT_COLLECTION, parse_filter, to_proto, validate_collections
from services.gateway.api.edge_rules import request_timeout

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
OPENAI_PATHS = frozenset({CHAT_PATH, MODELS_PATH})
MODEL_PREFIX = "graphmesh"
#: Answer profiles a model name may end with: the AnswerRequest.rerank they set.
PROFILES: dict[str, bool | None] = {"default": None, "fast": False, "rerank": True}
#: Earlier user turns prepended to the question, and the characters kept of each.
CONTEXT_TURNS, CONTEXT_TURN_CHARS = 3, 200
#: Most collections a model name may name (as SearchRequest.collections).
MAX_MODEL_COLLECTIONS = 20
#: Chat parameters of OpenAI's API that are accepted and have no effect here
#: (the gateway's LLM settings decide length and sampling).
IGNORED_PARAMS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "presence_penalty", "frequency_penalty",
    "stop", "seed", "user", "metadata", "store", "logit_bias", "parallel_tool_calls", "service_tier",
    "reasoning_effort", "stream_options", "prediction", "modalities", "audio", "web_search_options", "verbosity",
    "prompt_cache_key", "safety_identifier",
})
#: GraphMesh's own request fields: top_k (1-100, evidence items), filter (the
#: AIP-160 subset of ListDocuments.filter, applied to document metadata).
EXTENSION_PARAMS = frozenset({"top_k", "filter"})
KNOWN_PARAMS = frozenset({"model", "messages", "stream", "n", "logprobs", "top_logprobs", "tools", "tool_choice",
                          "functions", "function_call", "response_format"}) | IGNORED_PARAMS | EXTENSION_PARAMS
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_MODEL = re.compile(r"^graphmesh(?::(?P<collections>[^@]*))?(?:@(?P<profile>[A-Za-z0-9_-]*))?$")
#: Request fields of AnswerRequest -> the chat request's parameter at fault.
_PARAM_OF = {"query": "messages", "collections": "model", "filters": "filter", "top_k": "top_k"}
_MODE = {gateway_pb2.ANSWER_MODE_LLM: "llm", gateway_pb2.ANSWER_MODE_EXTRACTIVE: "extractive",
         gateway_pb2.ANSWER_MODE_ABSTAINED: "abstained"}


class ChatError(Exception):
    """A request error in OpenAI's shape: HTTP ``status``, error ``type``,
    the request ``param`` at fault (or None) and a machine ``code``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = dict(headers or {})

    def body(self) -> dict:
        """{"error": {"message", "type", "param", "code"}}."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(param: str | None, message: str, code: str = "invalid_value") -> ChatError:
    """A 400 ``invalid_request_error`` naming ``param``."""
    return ChatError(400, message if param is None else f"{param}: {message}", param, code)


@dataclass(frozen=True)
class Model:
    """What a model name selects: ``collections`` (empty = the default
    collection), the answer ``profile`` and its ``rerank`` setting."""

    collections: tuple[str, ...] = ()
    profile: str = "default"

    @property
    def rerank(self) -> bool | None:
        return PROFILES[self.profile]


def parse_model(name: Any) -> Model:
    """The collections and profile of a model name (module docstring).

    Raises:
        ChatError: 400 (param "model") when it is not a string or not of
            the form graphmesh[:c1,c2][@profile], names an invalid
            collection or more than MAX_MODEL_COLLECTIONS, or an unknown
            profile; 404 ``model_not_found`` when it is not a GraphMesh model.
    """
    if not isinstance(name, str) or not name.strip():
        raise bad("model", "must be a model name such as 'graphmesh' or 'graphmesh:<collection>'", "missing_required_parameter"
                  if name is None else "invalid_type")
    match = _MODEL.match(name.strip())
    if match is None:
        if not name.startswith(MODEL_PREFIX):
            raise ChatError(404, f"The model {name[:100]!r} does not exist: GraphMesh serves 'graphmesh' and "
                                 "'graphmesh:<collection>[,<collection>]' (GET /v1/models)", "model", "model_not_found")
        raise bad("model", f"{name[:100]!r} is not graphmesh[:<collection>[,<collection>]][@fast|@rerank]")
    collections = tuple(c.strip() for c in (match.group("collections") or "").split(",") if c.strip())
    if match.group("collections") is not None and not collections:
        raise bad("model", "names no collection after 'graphmesh:'")
    if len(collections) > MAX_MODEL_COLLECTIONS:
        raise bad("model", f"names {len(collections)} collections; at most {MAX_MODEL_COLLECTIONS}")
    try:
        validate_collections(collections, "model")
    except InvalidArgument as err:
        raise bad("model", err.description) from None
    profile = match.group("profile")
    if profile is not None and profile not in PROFILES:
        raise bad("model", f"unknown profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
    return Model(tuple(dict.fromkeys(collections)), profile or "default")


def message_text(content: Any, index: int) -> str:
    """The text of a message's ``content``: a string, or a list of parts of
    which the {"type": "text", "text": ...} ones are joined (other parts,
    images and audio, are not supported).

    Raises:
        ChatError: 400 naming messages[index].content.
    """
    param = f"messages[{index}].content"
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for n, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad(f"{param}[{n}]", "only text parts ({\"type\": \"text\", \"text\": ...}) are supported")
            texts.append(part["text"])
        return "\n".join(texts)
    raise bad(param, "must be a string or a list of text parts", "invalid_type")


def question_of(messages: Any) -> str:
    """The query sent to Answer: the last message's text (it must be a user
    message), with up to CONTEXT_TURNS earlier user turns prepended
    (module docstring).

    Raises:
        ChatError: 400 naming "messages" (not a non-empty list, a message
            that is not an object with a string role, the last message not
            from the user, or its text empty).
    """
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "must be a non-empty list of messages", "missing_required_parameter"
                  if messages is None else "invalid_value")
    turns: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad(f"messages[{index}]", "must be an object with a string \"role\"", "invalid_type")
        turns.append((message["role"], message_text(message.get("content"), index)))
    role, question = turns[-1]
    last = len(turns) - 1
    if role != "user":
        raise bad(f"messages[{last}].role", f"the last message must be from the user (got {role[:20]!r})")
    if not question.strip():
        raise bad(f"messages[{last}].content", "the question must not be empty")
    earlier = [" ".join(text.split())[:CONTEXT_TURN_CHARS] for r, text in turns[:-1] if r == "user" and text.strip()]
    earlier = earlier[-CONTEXT_TURNS:]
    if not earlier:
        return question.strip()
    if _CJK.search(question):
        return f"（上文：{'；'.join(earlier)}）{question.strip()}"
    return f"(Earlier: {'; '.join(earlier)}) {question.strip()}"


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat request: the model it named and what it selects,
    the AnswerRequest to send, and whether to stream."""

    model_name: str
    model: Model
    answer: gateway_pb2.AnswerRequest
    stream: bool = False


def chat_request(body: Any) -> ChatRequest:
    """Validates a /v1/chat/completions body into a ChatRequest.

    Raises:
        ChatError: 400 naming the parameter at fault: the body not an
            object ("body"), an unknown parameter, "model", "messages",
            "stream" not a boolean, "n" other than 1, tools or functions
            (not supported), a response_format other than text, logprobs,
            "top_k" not an integer in 1..100, "filter" not readable; 404
            for a model that is not GraphMesh's.
    """
    if not isinstance(body, dict):
        raise bad(None, "the request body must be a JSON object")
    unknown = sorted(set(body) - KNOWN_PARAMS)
    if unknown:
        raise bad(unknown[0], "unrecognized request argument", "unknown_parameter")
    model = parse_model(body.get("model"))
    query = question_of(body.get("messages"))
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad("stream", "must be a boolean", "invalid_type")
    if body.get("n") not in (None, 1):
        raise bad("n", "only one choice (n = 1) is supported")
    for name in ("tools", "functions"):
        if body.get(name):
            raise bad(name, "tool calls are not supported: GraphMesh answers from its sources", "unsupported_parameter")
    for name in ("tool_choice", "function_call"):
        if body.get(name) not in (None, "none"):
            raise bad(name, "tool calls are not supported", "unsupported_parameter")
    response_format = body.get("response_format")
    if response_format is not None and (not isinstance(response_format, dict) or response_format.get("type") != "text"):
        raise bad("response_format", "only {\"type\": \"text\"} is supported", "unsupported_parameter")
    if body.get("logprobs"):
        raise bad("logprobs", "log probabilities are not available", "unsupported_parameter")
    top_k = body.get("top_k", 0)
    if top_k is None:
        top_k = 0
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not (top_k == 0 or 1 <= top_k <= 100):
        raise bad("top_k", "must be an integer from 1 to 100", "invalid_value")
    filters = []
    if body.get("filter") not in (None, ""):
        if not isinstance(body["filter"], str):
            raise bad("filter", "must be a string such as 'status = \"现行有效\" AND year >= 2020'", "invalid_type")
        try:
            filters = to_proto(parse_filter(body["filter"], "filter"))
        except InvalidArgument as err:
            raise bad("filter", err.description) from None
    answer = gateway_pb2.AnswerRequest(query=query, top_k=top_k, collections=list(model.collections), filters=filters)
    if model.rerank is not None:
        answer.rerank = model.rerank
    return ChatRequest(body["model"].strip(), model, answer, bool(stream))


def _citation(c: gateway_pb2.Citation) -> dict:
    return {"number": c.number, "document_id": c.document_id, "candidate_id": c.candidate_id, "label": c.label}


def citations_of(reply: gateway_pb2.AnswerResponse) -> list[dict]:
    """The ``citations`` extension: the sources the answer's [n] marks point at."""
    return [_citation(c) for c in reply.citations]


def graphmesh_extension(reply: gateway_pb2.AnswerResponse) -> dict:
    """The top-level ``graphmesh`` extension of a reply (module docstring)."""
    return {
        "mode": _MODE.get(reply.mode, "unspecified"),
        "abstained": reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED,
        "strategy": gateway_pb2.FallbackStrategy.Name(reply.strategy).removeprefix("FALLBACK_STRATEGY_").lower(),
        "answerability": reply.answerability,
        "answerability_threshold": reply.answerability_threshold,
        "insufficient_sources": [_citation(c) for c in reply.insufficient_sources],
        "answer": reply.answer,
    }


def completion_id() -> str:
    """A fresh ``chatcmpl-`` id."""
    return "chatcmpl-" + secrets.token_hex(12)


def completion_body(reply: gateway_pb2.AnswerResponse, model: str, cid: str, created: int) -> dict:
    """A ``chat.completion`` object for an AnswerResponse."""
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.answer, "citations": citations_of(reply)}}],
        "graphmesh": graphmesh_extension(reply),
    }


def chunk_body(cid: str, created: int, model: str, delta: dict, finish_reason: str | None = None,
               extension: dict | None = None) -> dict:
    """One ``chat.completion.chunk`` of a streamed reply."""
    body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    if extension is not None:
        body["graphmesh"] = extension
    return body


@dataclass
class StreamState:
    """What a streamed reply has sent: whether any answer text went out."""

    streamed: list[str] = field(default_factory=list)


def stream_chunks(event: gateway_pb2.AnswerStreamResponse, state: StreamState, cid: str, created: int,
                  model: str) -> list[dict]:
    """The chunks to send for one AnswerStream event: a token is a content
    delta; ``done`` is the rest of the answer when nothing (or a failed LLM
    answer) was streamed, then the last chunk with finish_reason "stop",
    the citations and the ``graphmesh`` extension; stage events send nothing."""
    kind = event.WhichOneof("event")
    if kind == "token":
        state.streamed.append(event.token)
        return [chunk_body(cid, created, model, {"content": event.token})]
    if kind != "done":
        return []
    done, out = event.done, []
    if not state.streamed:
        out.append(chunk_body(cid, created, model, {"content": done.answer}))
    elif done.mode != gateway_pb2.ANSWER_MODE_LLM:  # the LLM failed mid-answer: the fallback answer follows
        out.append(chunk_body(cid, created, model, {"content": "\n\n" + done.answer}))
    out.append(chunk_body(cid, created, model, {"citations": citations_of(done)}, "stop", graphmesh_extension(done)))
    return out


def models_body(collections: Iterable[Any], created: int = 0) -> dict:
    """The ``list`` of models: ``graphmesh`` (the default collection) and
    ``graphmesh:<name>`` for every stored collection (CollectionInfo), each
    with its counts and domain pack as extensions."""
    data = [{"id": MODEL_PREFIX, "object": "model", "created": created, "owned_by": "graphmesh",
             "description": "the default collection"}]
    for c in collections:
        data.append({"id": f"{MODEL_PREFIX}:{c.name}", "object": "model", "created": created, "owned_by": "graphmesh",
                     "collection": c.name, "documents": c.documents, "domain_pack": c.domain_pack})
    return {"object": "list", "data": data}


#: gRPC code -> (HTTP status, OpenAI error type, code).
_RPC_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_request_error", "invalid_value"),
    grpc.StatusCode.FAILED_PRECONDITION: (400, "invalid_request_error", "failed_precondition"),
    grpc.StatusCode.OUT_OF_RANGE: (400, "invalid_request_error", "invalid_value"),
    grpc.StatusCode.UNAUTHENTICATED: (401, "authentication_error", "invalid_api_key"),
    grpc.StatusCode.PERMISSION_DENIED: (403, "permission_error", "permission_denied"),
    grpc.StatusCode.NOT_FOUND: (404, "not_found_error", "not_found"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "rate_limit_error", "rate_limit_exceeded"),
    grpc.StatusCode.CANCELLED: (499, "server_error", "cancelled"),
    grpc.StatusCode.UNAVAILABLE: (503, "server_error", "service_unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "server_error", "timeout"),
}


def rpc_error(err: grpc.aio.AioRpcError) -> ChatError:
    """The OpenAI-shaped error of a failed Answer / ListCollections call;
    an INVALID_ARGUMENT's field is named as the chat parameter it came
    from (query -> messages, collections -> model, filters -> filter)."""
    status, kind, code = _RPC_ERRORS.get(err.code(), (500, "server_error", "internal_error"))
    param = None
    if err.code() == grpc.StatusCode.INVALID_ARGUMENT and rpc_status.from_call(err) is not None:
        violations = field_violations(err)
        if violations:
            name = violations[0][0]
            param = _PARAM_OF.get(name.split(".")[0].split("[")[0], name)
    headers = {k: str(v) for k, v in (err.trailing_metadata() or ()) if k == "retry-after"}
    return ChatError(status, err.details() or err.code().name, param, code, kind,
                     {"Retry-After": headers["retry-after"]} if headers else None)


def error_response(error: ChatError) -> web.Response:
    """``error`` as an HTTP reply."""
    return web.json_response(error.body(), status=error.status, headers=error.headers,
                             dumps=lambda o: json.dumps(o, ensure_ascii=False))


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 405: "invalid_request_error", 408: "timeout", 413: "invalid_request_error",
                415: "invalid_request_error", 429: "rate_limit_error"}


def openai_shape(google_error: dict, status: int) -> dict:
    """The google.rpc.Status-shaped JSON error of the edge ({"error":
    {"code", "status", "message", "details"}}) in OpenAI's shape; a
    BadRequest's first field violation becomes "param"."""
    error = google_error.get("error") or {}
    param = None
    for detail in error.get("details") or ():
        for violation in detail.get("fieldViolations") or ():
            param = param or violation.get("field")
    return {"error": {"message": error.get("message", ""), "type": _ERROR_TYPES.get(status, "server_error"),
                      "param": param, "code": str(error.get("status", "")).lower() or None}}


@web.middleware
async def openai_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Rewrites the JSON errors of the middlewares inside it (edge rules,
    unknown method, body too large) into OpenAI's shape on OPENAI_PATHS;
    other paths pass untouched. Put it first (outermost) in the app's list."""
    response = await handler(request)
    if request.path not in OPENAI_PATHS or response.status < 400 or not isinstance(response, web.Response):
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
                      forwarded: Sequence[str] = ("authorization", "x-api-key")) -> None:
    """Adds POST /v1/chat/completions and GET /v1/models to ``app``.
    ``state`` is the REST app's: its "stub" (GatewayServiceStub over the
    loopback channel) and "admission" are read at request time; the
    ``forwarded`` request headers travel as the calls' metadata."""

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
                body = json.loads(raw.decode("utf-8")) if raw.strip() else None
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise bad(None, "the request body must be UTF-8 JSON", "invalid_json") from None
            chat_req = chat_request(body)
            timeout = deadline(request)
            async with state["admission"].slot(timeout) as waited:
                remaining = None if timeout is None else max(timeout - waited, 0.001)
                try:
                    named = set(chat_req.model.collections) - {DEFAULT_COLLECTION}
                    if named:
                        missing = sorted(named - await known_collections(request, remaining))
                        if missing:
                            raise ChatError(404, f"The model {chat_req.model_name!r} does not exist: no collection "
                                                 f"{missing[0]!r} (GET /v1/models)", "model", "model_not_found")
                    if chat_req.stream:
                        return await _stream_reply(request, chat_req, remaining, metadata(request))
                    reply = await state["stub"].Answer(chat_req.answer, timeout=remaining, metadata=metadata(request))
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
        stream_request = gateway_pb2.AnswerStreamRequest()
        stream_request.ParseFromString(chat_req.answer.SerializeToString())  # same fields, same numbers
        call = state["stub"].AnswerStream(stream_request, timeout=timeout, metadata=md)
        cid, created, sent = completion_id(), int(time.time()), StreamState()
        response: web.StreamResponse | None = None

        async def send(chunk: dict) -> None:
            await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())

        try:
            async for event in call:
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
            call.cancel()
            raise
        if response is None:
            raise ChatError(502, "the answer stream ended without an answer", None, "empty_stream", "server_error")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.StreamResponse:
        try:
            timeout = deadline(request)
            async with state["admission"].slot(timeout) as waited:
                remaining = None if timeout is None else max(timeout - waited, 0.001)
                try:
                    reply = await state["stub"].ListCollections(gateway_pb2.ListCollectionsRequest(), timeout=remaining,
                                                                metadata=metadata(request))
                except grpc.aio.AioRpcError as err:
                    raise rpc_error(err) from None
        except ChatError as err:
            return error_response(err)
        except Overloaded as busy:
            return error_response(_overloaded(busy))
        return web.json_response(models_body(c for c in reply.collections if c.name != "default"),
                                 dumps=lambda o: json.dumps(o, ensure_ascii=False))

    app.router.add_post(CHAT_PATH, chat)
    app.router.add_get(MODELS_PATH, models)


def _overloaded(busy: Overloaded) -> ChatError:
    if busy.waited:
        return ChatError(504, str(busy), None, "timeout", "server_error")
    return ChatError(429, str(busy), None, "rate_limit_exceeded", "rate_limit_error", {"Retry-After": str(busy.retry_after)})


# --- the OpenAPI document's part (scripts/gen_openapi.py merges it) ---------------

def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/openai.{name}"}


_STR, _INT, _NUM, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
#: Schemas of the OpenAI routes, named "openai.<name>" in the document.
OPENAPI_SCHEMAS: dict[str, dict] = {
    "ChatMessage": {
        "type": "object", "required": ["role"], "additionalProperties": True,
        "description": "A chat message. Only user turns are used: the last one is the question, up to "
                       f"{CONTEXT_TURNS} earlier ones are prepended to it as context.",
        "properties": {
            "role": {"type": "string", "description": "system, developer, user, assistant, tool; the last message's must be user"},
            "content": {"description": "the text, or a list of {\"type\": \"text\", \"text\": ...} parts",
                        "oneOf": [_STR, {"type": "array", "items": {
                            "type": "object", "required": ["type", "text"],
                            "properties": {"type": {"type": "string", "enum": ["text"]}, "text": _STR}}}]},
            "name": _STR}},
    "ChatCompletionRequest": {
        "type": "object", "required": ["model", "messages"], "additionalProperties": False,
        "description": "OpenAI's chat completion request. Unknown parameters are refused (400 naming them); "
                       "sampling and length parameters are accepted and have no effect (the gateway's LLM settings "
                       "decide); n must be 1; tools, functions and logprobs are refused.",
        "properties": {
            "model": {"type": "string", "description": "graphmesh (the default collection), graphmesh:<c1>[,<c2>...] "
                                                       "(those collections), optionally ending @fast (no cross-encoder) "
                                                       "or @rerank (always the cross-encoder)"},
            "messages": {"type": "array", "minItems": 1, "items": _ref("ChatMessage")},
            "stream": {"type": "boolean", "description": "server-sent events of chat.completion.chunk, ending data: [DONE]"},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 100, "description": "GraphMesh: evidence items (default 10)"},
            "filter": {"type": "string", "description": "GraphMesh: metadata filter, e.g. status = \"现行有效\" AND year >= 2020"},
            "n": {"type": "integer", "enum": [1]},
            **{name: {"description": "accepted, no effect"} for name in sorted(IGNORED_PARAMS)},
            **{name: {"description": "refused unless empty / none / text"} for name in
               ("tools", "tool_choice", "functions", "function_call", "response_format", "logprobs", "top_logprobs")}}},
    "Citation": {
        "type": "object", "description": "A source an answer's [number] mark points at (GraphMesh extension).",
        "properties": {"number": _INT, "document_id": _STR, "candidate_id": _STR,
                       "label": {"type": "string", "description": "title and headings of the source"}}},
    "Extension": {
        "type": "object", "description": "How the answer was made (GraphMesh extension, top level of the reply or last chunk).",
        "properties": {
            "mode": {"type": "string", "enum": ["llm", "extractive", "abstained", "unspecified"]},
            "abstained": {"type": "boolean", "description": "the sources do not answer the question; the answer says so"},
            "strategy": {"type": "string", "description": "the fallback strategy answered (standard, expanded_query, ...)"},
            "answerability": _NUM, "answerability_threshold": _NUM,
            "insufficient_sources": {"type": "array", "items": _ref("Citation"),
                                     "description": "abstained only: the nearest sources, not sufficient to answer"},
            "answer": {"type": "string", "description": "the verified answer (streamed deltas are the model's raw text)"}}},
    "ChatCompletion": {
        "type": "object", "description": "A chat.completion.",
        "properties": {
            "id": _STR, "object": {"type": "string", "enum": ["chat.completion"]}, "created": _INT, "model": _STR,
            "choices": {"type": "array", "items": {"type": "object", "properties": {
                "index": _INT, "finish_reason": {"type": "string", "enum": ["stop"]},
                "message": {"type": "object", "properties": {
                    "role": {"type": "string", "enum": ["assistant"]},
                    "content": {"type": "string", "description": "the answer with [n] citation marks"},
                    "citations": {"type": "array", "items": _ref("Citation")}}}}}},
            "graphmesh": _ref("Extension")}},
    "ChatCompletionChunk": {
        "type": "object", "description": "One server-sent event of a streamed reply (data: <chunk>; the last event is "
                                         "data: [DONE]). The last chunk has finish_reason stop, delta.citations and graphmesh.",
        "properties": {
            "id": _STR, "object": {"type": "string", "enum": ["chat.completion.chunk"]}, "created": _INT, "model": _STR,
            "choices": {"type": "array", "items": {"type": "object", "properties": {
                "index": _INT, "finish_reason": {"type": "string", "nullable": True},
                "delta": {"type": "object", "properties": {
                    "role": _STR, "content": _STR, "citations": {"type": "array", "items": _ref("Citation")}}}}}},
            "graphmesh": _ref("Extension")}},
    "ModelList": {
        "type": "object", "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string", "description": "graphmesh, or graphmesh:<collection>"},
                "object": {"type": "string", "enum": ["model"]}, "created": _INT, "owned_by": _STR,
                "description": _STR, "collection": _STR, "documents": _INT, "domain_pack": _STR}}}}},
    "Error": {
        "type": "object", "description": "OpenAI's error shape.",
        "properties": {"error": {"type": "object", "properties": {
            "message": _STR, "type": {"type": "string", "description": "invalid_request_error, authentication_error, "
                                                                       "permission_error, not_found_error, rate_limit_error, server_error"},
            "param": {"type": "string", "nullable": True, "description": "the request parameter at fault (400)"},
            "code": {"type": "string", "nullable": True}}}}},
}


CHAT_DESCRIPTION = (
    "OpenAI-compatible chat completions over the Answer RPC (AnswerStream when streamed). The model name picks the "
    "collections and the answer profile: graphmesh = the default collection, graphmesh:<c1>[,<c2>...] = those "
    "collections, a suffix @fast (no cross-encoder) or @rerank (always the cross-encoder). The last message, a user "
    "message, is the question; up to 3 earlier user turns are prepended to it as （上文：...）. The answer carries [n] "
    "citation marks, the sources in choices[0].message.citations (streamed: the last chunk's delta.citations) and how "
    "it was made in the top-level graphmesh object; an abstention is an ordinary reply that says the sources do not "
    "answer (graphmesh.abstained). Errors are in OpenAI's shape with the HTTP status of the gateway's error; the API key "
    "(when required) as Authorization: Bearer KEY. docs/integrations.md.")
MODELS_DESCRIPTION = ("The models that can be asked, from ListCollections: graphmesh (the default collection) and "
                      "graphmesh:<name> for every other stored collection, with its document count and domain pack.")


def openapi_paths() -> dict[str, dict]:
    """The OpenAPI path items of CHAT_PATH and MODELS_PATH (schemas in
    OPENAPI_SCHEMAS, referenced as #/components/schemas/openai.<name>)."""
    error = {"description": "error", "content": {"application/json": {"schema": _ref("Error")}}}
    responses = {
        "400": dict(error, description="invalid_request_error: \"param\" names the parameter at fault"),
        "401": dict(error, description="authentication_error: no valid API key (when keys are required)"),
        "404": dict(error, description="model_not_found: not a GraphMesh model, or a collection that is not stored"),
        "429": dict(error, description="rate_limit_error: the key's rate limit; retry after Retry-After seconds",
                    headers={"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}),
        "default": error}
    timeout = {"name": "X-Timeout-Seconds", "in": "header", "required": False, "schema": {"type": "number"},
               "description": "deadline of the call in seconds (also accepted: grpc-timeout)"}
    return {
        CHAT_PATH: {"post": {
            "operationId": "OpenAI_createChatCompletion", "tags": ["OpenAI"],
            "summary": "An answer as an OpenAI chat completion (streamed with \"stream\": true).",
            "description": CHAT_DESCRIPTION, "parameters": [timeout],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("ChatCompletionRequest")}}},
            "responses": {"200": {"description": "the completion, or with stream true its chunks as server-sent events",
                                  "content": {"application/json": {"schema": _ref("ChatCompletion")},
                                              "text/event-stream": {"schema": _ref("ChatCompletionChunk")}}},
                          **responses}}},
        MODELS_PATH: {"get": {
            "operationId": "OpenAI_listModels", "tags": ["OpenAI"],
            "summary": "The models: graphmesh and graphmesh:<collection> for every stored collection.",
            "description": MODELS_DESCRIPTION, "parameters": [timeout],
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": _ref("ModelList")}}},
                          **{k: v for k, v in responses.items() if k != "404"}}}},
    }
