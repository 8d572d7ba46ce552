"""OpenAI-shaped bodies of GraphMesh answers: completions, stream chunks, the models list and errors (services.gateway.api.openai_compat)."""
from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from grpc_status import rpc_status

from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import field_violations
from services.gateway.api.edge_rules import DEADLINE_MESSAGE
from services.gateway.api.openai_compat.requests import ANSWER_MODES, MODEL_PREFIX, PARAM_OF_FIELD, ChatError


def _citation(c: gateway_pb2.Citation) -> dict:
    return {"number": c.number, "document_id": c.document_id, "candidate_id": c.candidate_id, "label": c.label,
            "caveat": c.caveat}


def citations_of(reply: gateway_pb2.AnswerResponse) -> list[dict]:
    """The ``citations`` extension: the sources the answer's [n] marks point at."""
    return [_citation(c) for c in reply.citations]


def graphmesh_extension(reply: gateway_pb2.AnswerResponse) -> dict:
    """The top-level ``graphmesh`` extension of a reply (module docstring)."""
    return {
        "mode": ANSWER_MODES.get(reply.mode, "unspecified"),
        "abstained": reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED,
        "strategy": gateway_pb2.FallbackStrategy.Name(reply.strategy).removeprefix("FALLBACK_STRATEGY_").lower(),
        "answerability": reply.answerability,
        "answerability_threshold": reply.answerability_threshold,
        "insufficient_sources": [_citation(c) for c in reply.insufficient_sources],
        "answer": reply.answer,
        "degraded": list(dict.fromkeys(reply.search.degraded)),
    }


def answer_content(reply: gateway_pb2.AnswerResponse) -> str:
    """The message content of a reply: the answer; for an abstention, the
    answer followed by the nearest sources it says are listed below, one
    "- label" line each (no [n] marks: nothing is cited)."""
    if reply.mode != gateway_pb2.ANSWER_MODE_ABSTAINED or not reply.insufficient_sources:
        return reply.answer
    return reply.answer + "\n" + "\n".join(f"- {c.label or c.document_id}" for c in reply.insufficient_sources)


def completion_id() -> str:
    """A fresh ``chatcmpl-`` id."""
    return "chatcmpl-" + secrets.token_hex(12)


def completion_body(reply: gateway_pb2.AnswerResponse, model: str, cid: str, created: int) -> dict:
    """A ``chat.completion`` object for an AnswerResponse."""
    return {
        "id": cid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": answer_content(reply), "citations": citations_of(reply)}}],
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
        out.append(chunk_body(cid, created, model, {"content": answer_content(done)}))
    elif done.mode != gateway_pb2.ANSWER_MODE_LLM:  # the LLM failed mid-answer: the fallback answer follows
        out.append(chunk_body(cid, created, model, {"content": "\n\n" + answer_content(done)}))
    out.append(chunk_body(cid, created, model, {"citations": citations_of(done)}, "stop", graphmesh_extension(done)))
    return out


def models_body(collections: Iterable[Any], created: int = 0) -> dict:
    """The ``list`` of models: ``graphmesh`` (the default collection) and
    ``graphmesh:<name>`` for every other stored collection (CollectionInfo;
    one named "default" gives the default's counts), each with its counts and
    domain pack as extensions. ``graphmesh`` comes first unless the default
    collection is empty while others hold documents: then it comes last, said
    empty, since a chat page picks the first model (two trials' pages answered
    every question "nothing is stored" from the empty default)."""
    collections = list(collections)
    default = next((c for c in collections if c.name == "default"), None)
    others = [{"id": f"{MODEL_PREFIX}:{c.name}", "object": "model", "created": created, "owned_by": "graphmesh",
               "collection": c.name, "documents": c.documents, "domain_pack": c.domain_pack}
              for c in collections if c.name != "default"]
    empty = (default is None or not default.documents) and any(m["documents"] for m in others)
    first = {"id": MODEL_PREFIX, "object": "model", "created": created, "owned_by": "graphmesh",
             "description": "the default collection" + (" (empty: name a collection, graphmesh:<name>)" if empty else "")}
    if default is not None:
        first.update(documents=default.documents, domain_pack=default.domain_pack)
    return {"object": "list", "data": [*others, first] if empty else [first, *others]}


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
            param = PARAM_OF_FIELD.get(name.split(".")[0].split("[")[0], name)
    headers = {k: str(v) for k, v in (err.trailing_metadata() or ()) if k == "retry-after"}
    message = err.details() or err.code().name
    if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and rpc_status.from_call(err) is None:
        message = DEADLINE_MESSAGE  # gRPC's own words ("Stream removed") for a deadline the call itself ran out of
    return ChatError(status, message, param, code, kind,
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
    # a 401 is OpenAI's invalid_api_key whoever refused it (the edge checks a key before reading a body)
    code = _RPC_ERRORS[grpc.StatusCode.UNAUTHENTICATED][2] if status == 401 else str(error.get("status", "")).lower()
    return {"error": {"message": error.get("message", ""), "type": _ERROR_TYPES.get(status, "server_error"),
                      "param": param, "code": code or None}}
