"""The OpenAPI part of the OpenAI-compatible routes, merged into the served document by scripts/gen_openapi.py (services.gateway.api.openai_compat)."""
from __future__ import annotations

from services.gateway.api.edge_rules import TIMEOUT_HEADER
from services.gateway.api.openai_compat.ignored_params import IGNORED_PARAM_RULES
from services.gateway.api.openai_compat.requests import CHAT_PATH, CONTEXT_TURNS, IGNORED_PARAMS, MODELS_PATH


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/openai.{name}"}


_STR, _INT, _NUM, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
#: Schemas of the OpenAI routes, named "openai.<name>" in the document.
OPENAPI_SCHEMAS: dict[str, dict] = {
    "ChatMessage": {
        "type": "object", "required": ["role"], "additionalProperties": True,
        "description": "A chat message. Only user turns are used: the last one is the question, and when it is a "
                       f"follow-up (\"那孩子呢？\") up to {CONTEXT_TURNS} earlier ones are prepended to it as context.",
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
            **{name: {**IGNORED_PARAM_RULES[name].schema, "nullable": True, "description": "accepted, no effect"}
               for name in sorted(IGNORED_PARAMS)},
            **{name: {"description": "refused unless empty / none / text"} for name in
               ("tools", "tool_choice", "functions", "function_call", "response_format", "logprobs", "top_logprobs")}}},
    "Citation": {
        "type": "object", "description": "A source an answer's [number] mark points at (GraphMesh extension).",
        "properties": {"number": _INT, "document_id": _STR, "candidate_id": _STR,
                       "label": {"type": "string", "description": "title and headings of the source"},
                       "caveat": {"type": "string", "description": "what to know before relying on the source "
                                  "(a repealed law's status, 已废止); empty when nothing"}}},
    "Extension": {
        "type": "object", "description": "How the answer was made (GraphMesh extension, top level of the reply or last chunk).",
        "properties": {
            "mode": {"type": "string", "enum": ["llm", "extractive", "abstained", "unspecified"]},
            "abstained": {"type": "boolean", "description": "the sources do not answer the question; the answer says so"},
            "strategy": {"type": "string", "description": "the fallback strategy answered (standard, expanded_query, ...)"},
            "answerability": _NUM, "answerability_threshold": _NUM,
            "insufficient_sources": {"type": "array", "items": _ref("Citation"),
                                     "description": "abstained only: the nearest sources, not sufficient to answer"},
            "answer": {"type": "string", "description": "the verified answer (streamed deltas are the model's raw text)"},
            "degraded": {"type": "array", "items": _STR,
                         "description": "services that failed, timed out or were asked for and not configured (a reranker "
                                        "for @rerank); the answer was made without them"}}},
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
    "Model": {
        "type": "object", "properties": {
            "id": {"type": "string", "description": "graphmesh, or graphmesh:<collection>"},
            "object": {"type": "string", "enum": ["model"]}, "created": _INT, "owned_by": _STR,
            "description": _STR, "collection": _STR, "documents": _INT, "domain_pack": _STR}},
    "ModelList": {
        "type": "object", "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": _ref("Model")}}},
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
    "message, is the question; when it is a follow-up, up to 3 earlier user turns are prepended to it as （上文：...）. "
    "The answer carries [n] "
    "citation marks, the sources in choices[0].message.citations (streamed: the last chunk's delta.citations) and how "
    "it was made in the top-level graphmesh object; an abstention is an ordinary reply that says the sources do not "
    "answer (graphmesh.abstained). Errors are in OpenAI's shape with the HTTP status of the gateway's error; the API key "
    "(when required) as Authorization: Bearer KEY. docs/integrations.md.")
MODELS_DESCRIPTION = ("The models that can be asked, from ListCollections: graphmesh (the default collection) and "
                      "graphmesh:<name> for every other stored collection, with its document count and domain pack.")


def openapi_paths() -> dict[str, dict]:
    """The OpenAPI path items of CHAT_PATH, MODELS_PATH and one model (schemas in
    OPENAPI_SCHEMAS, referenced as #/components/schemas/openai.<name>)."""
    error = {"description": "error", "content": {"application/json": {"schema": _ref("Error")}}}
    responses = {
        "400": dict(error, description="invalid_request_error: \"param\" names the parameter at fault"),
        "401": dict(error, description="authentication_error: no valid API key (when keys are required)"),
        "404": dict(error, description="model_not_found: not a GraphMesh model, or a collection that is not stored"),
        "429": dict(error, description="rate_limit_error: the key's rate limit; retry after Retry-After seconds",
                    headers={"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}),
        "default": error}
    timeout = TIMEOUT_HEADER
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
        MODELS_PATH + "/{model}": {"get": {
            "operationId": "OpenAI_retrieveModel", "tags": ["OpenAI"],
            "summary": "One model: any name a chat request may give (graphmesh[:<collection>[,...]][@fast|@rerank]).",
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": _STR}, timeout],
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": _ref("Model")}}},
                          **responses}}},
    }
