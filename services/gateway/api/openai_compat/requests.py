"""What a chat request asks, checked: the model name (collections and profile), the question and earlier turns, the parameters (services.gateway.api.openai_compat)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import InvalidArgument
from services.common.filters import parse_filter, to_proto, validate_collections
from services.gateway.api.openai_compat.ignored_params import IGNORED_PARAM_RULES, ignored_param_error
from services.gateway.answer import small_talk
from services.gateway.api.openai_compat.follow_ups import leans_on_earlier, within



CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
OPENAI_PATHS = frozenset({CHAT_PATH, MODELS_PATH})
#: Endpoints of OpenAI's API that GraphMesh does not serve: an OpenAI client calling one gets an error in
#: OpenAI's shape that says what is served, not the REST transcoder's "no route".
UNSERVED_OPENAI_PATHS = frozenset({"/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/audio/speech",
                                   "/v1/images/generations", "/v1/moderations", "/v1/files", "/v1/batches"})


def is_openai_path(path: str) -> bool:
    """Whether ``path`` answers in OpenAI's error shape: OPENAI_PATHS, one model (/v1/models/{model}) and
    UNSERVED_OPENAI_PATHS."""
    return path in OPENAI_PATHS or path.startswith(MODELS_PATH + "/") or path in UNSERVED_OPENAI_PATHS
MODEL_PREFIX = "graphmesh"
#: Answer profiles a model name may end with: the AnswerRequest.rerank they set.
PROFILES: dict[str, bool | None] = {"default": None, "fast": False, "rerank": True}
#: Earlier user turns prepended to the question, and the characters kept of each.
CONTEXT_TURNS, CONTEXT_TURN_CHARS = 3, 200
#: The shortest piece of an earlier turn kept when it must be cut to fit beside the question.
MIN_EARLIER_CHARS = 20
#: Most collections a model name may name (as SearchRequest.collections).
MAX_MODEL_COLLECTIONS = 20
#: Chat parameters of OpenAI's API that are accepted and have no effect here
#: (the gateway's LLM settings decide length and sampling).
#: Each must still have the type OpenAI gives it (ignored_params.IGNORED_PARAM_RULES).
IGNORED_PARAMS = frozenset(IGNORED_PARAM_RULES)
#: GraphMesh's own request fields: top_k (1-100, evidence items), filter (the
#: AIP-160 subset of ListDocuments.filter, applied to document metadata).
EXTENSION_PARAMS = frozenset({"top_k", "filter"})
KNOWN_PARAMS = frozenset({"model", "messages", "stream", "n", "logprobs", "top_logprobs", "tools", "tool_choice",
                          "functions", "function_call", "response_format"}) | IGNORED_PARAMS | EXTENSION_PARAMS
#: A surrogate code point: in a Python str parsed from JSON, only an unpaired one can occur.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_MODEL = re.compile(r"^graphmesh(?::(?P<collections>[^@]*))?(?:@(?P<profile>[A-Za-z0-9_-]*))?$")
#: Request fields of AnswerRequest -> the chat request's parameter at fault.
PARAM_OF_FIELD = {"query": "messages", "collections": "model", "filters": "filter", "top_k": "top_k"}
ANSWER_MODES = {gateway_pb2.ANSWER_MODE_LLM: "llm", gateway_pb2.ANSWER_MODE_EXTRACTIVE: "extractive",
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
        collections = tuple(validate_collections(collections, "model")) if collections else ()
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


def question_of(messages: Any, max_chars: int = 10_000, follow_up: bool | None = None) -> str:
    """The query sent to Answer: the last message's text (it must be a user
    message), with up to CONTEXT_TURNS earlier user turns prepended when it
    is a follow-up (``leans_on_earlier``, or ``follow_up`` when given; module docstring), the earliest dropped
    and the last one kept cut so that the query stays within ``max_chars`` (the gateway's
    ``max_query_chars``): a question the caller sent within the limit is
    never refused for its history. A question over the limit alone is
    returned as it is (Answer refuses it, naming the query).

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
    question = question.strip()
    if not (leans_on_earlier(question) if follow_up is None else follow_up):
        return question
    earlier = [" ".join(text.split())[:CONTEXT_TURN_CHARS] for r, text in turns[:-1] if r == "user" and text.strip()]
    return within(question, earlier[-CONTEXT_TURNS:], max_chars, MIN_EARLIER_CHARS)


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat request: the model it named and what it selects,
    the AnswerRequest to send, and whether to stream."""

    model_name: str
    model: Model
    answer: gateway_pb2.AnswerRequest
    stream: bool = False
    #: the question with the earlier user turns before it, asked when the question alone was refused by the
    #: answerability rule (``refused_alone``); None when it went with them already, or has none
    with_earlier: gateway_pb2.AnswerRequest | None = None
    #: the reply when the last message asks nothing the gateway could search for ("👍", "🐶？"): a chat's
    #: reaction gets a reply, not the Answer RPC's 400 (a trial's chat page showed it as an error)
    unasked: gateway_pb2.AnswerResponse | None = None


def unpaired_surrogate_at(value: Any, path: str = "") -> str | None:
    """The path of the first string in ``value`` (a parsed JSON body) that
    holds an unpaired surrogate (JSON allows the escape "\\ud800", UTF-8
    and protobuf strings do not), as "messages[0].content"; None when none
    does. A key holding one is reported by its parent's path."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _SURROGATE.search(key):
                return path or "body"
            found = unpaired_surrogate_at(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = unpaired_surrogate_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def chat_request(body: Any, max_query_chars: int = 10_000) -> ChatRequest:
    """Validates a /v1/chat/completions body into a ChatRequest (earlier
    turns cut to fit ``max_query_chars`` beside the question: ``question_of``).

    Raises:
        ChatError: 400 naming the parameter at fault: the body not an
            object ("body"), an unknown parameter, "model", "messages",
            "stream" not a boolean, "n" other than 1, tools or functions
            (not supported), a response_format other than text, logprobs,
            an ignored sampling parameter of the wrong type or range
            (``max_tokens`` not a positive integer, ``temperature`` outside
            0..2: ignored_params.IGNORED_PARAM_RULES),
            "top_k" not an integer in 1..100, "filter" not readable; 404
            for a model that is not GraphMesh's.
    """
    if not isinstance(body, dict):
        raise bad(None, "the request body must be a JSON object")
    broken = unpaired_surrogate_at(body)
    if broken is not None:
        raise bad(broken, "must be valid Unicode text: it holds an unpaired surrogate escape such as \\ud800")
    unknown = sorted(set(body) - KNOWN_PARAMS)
    if unknown:
        raise bad(unknown[0], "unrecognized request argument", "unknown_parameter")
    model = parse_model(body.get("model"))
    query = question_of(body.get("messages"), max_query_chars)
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
    wrong = ignored_param_error(body)
    if wrong is not None:
        raise bad(*wrong)
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
    retry = question_of(body["messages"], max_query_chars, follow_up=True)
    with_turns = None
    if retry != query:
        with_turns = gateway_pb2.AnswerRequest()
        with_turns.CopyFrom(answer)
        with_turns.query = retry
    nothing = None if re.search(r"[^\W_]", query) else small_talk.reply(query)
    unasked = gateway_pb2.AnswerResponse(answer=nothing, mode=gateway_pb2.ANSWER_MODE_ABSTAINED) if nothing else None
    return ChatRequest(body["model"].strip(), model, answer, bool(stream), with_turns, unasked)


def refused_alone(chat: ChatRequest, reply: gateway_pb2.AnswerResponse) -> bool:
    """Whether to ask again with the earlier turns (``ChatRequest.with_earlier``): the question went alone and
    the answerability rule refused it (a scope rule's no, such as a greeting's, has answerability 0). A trial's
    "一个月最多能取多少？" after "公积金能取出来交房租吗" names no subject and was refused alone."""
    return chat.with_earlier is not None and reply.mode == gateway_pb2.ANSWER_MODE_ABSTAINED and \
        0 < reply.answerability < reply.answerability_threshold
