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

The question is the last message, which must be a user message; when it is
a follow-up (``follow_ups.leans_on_earlier``), the user
turns before it (at most CONTEXT_TURNS, each cut to CONTEXT_TURN_CHARS) are
prepended as ``（上文：turn1；turn2）`` (``(Earlier: turn1; turn2) `` when
the question has no CJK character) so that a follow-up ("那第二款呢？") is
searched and answered with what it refers to. System, developer, assistant
and tool messages are not sent: the gateway's grounding prompt is fixed,
and earlier answers would only echo their own citations.

Replies carry the answer with its [n] marks and, as extensions:
``choices[0].message.citations`` (streamed: ``choices[0].delta.citations``
on the last chunk) = [{"number", "document_id", "candidate_id", "label", "caveat"}],
and a top-level ``graphmesh`` object {"mode": "llm" | "extractive" |
"abstained", "abstained", "strategy", "answerability",
"answerability_threshold", "insufficient_sources", "answer", "degraded"}
("degraded": the services the answer was made without, as Search's). An abstention
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
from services.gateway.api.openai_compat.openapi import OPENAPI_SCHEMAS, openapi_paths
from services.gateway.api.openai_compat.replies import (StreamState, chunk_body, citations_of, completion_body,
                                                        graphmesh_extension, models_body, openai_shape, rpc_error,
                                                        stream_chunks)
from services.gateway.api.openai_compat.requests import (CHAT_PATH, CONTEXT_TURN_CHARS, CONTEXT_TURNS, KNOWN_PARAMS,
                                                         MODELS_PATH, OPENAI_PATHS, PROFILES, ChatError, ChatRequest,
                                                         Model, chat_request, message_text, parse_model, question_of)
from services.gateway.api.openai_compat.routes import add_openai_routes, openai_errors

__all__ = [
    "CHAT_PATH", "CONTEXT_TURNS", "CONTEXT_TURN_CHARS", "ChatError", "ChatRequest", "KNOWN_PARAMS", "MODELS_PATH", "Model",
    "OPENAI_PATHS", "OPENAPI_SCHEMAS", "PROFILES", "StreamState", "add_openai_routes", "chat_request", "chunk_body",
    "citations_of", "completion_body", "graphmesh_extension", "message_text", "models_body", "openai_errors",
    "openai_shape", "openapi_paths", "parse_model", "question_of", "rpc_error", "stream_chunks",
]
