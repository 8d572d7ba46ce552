"""Rich gRPC errors (google.rpc.Status) with stable reasons (AIP-193).

Bad input aborts with INVALID_ARGUMENT carrying a google.rpc.BadRequest that
names the offending field, plus an ErrorInfo whose reason is stable.
"""
from __future__ import annotations

import re

from typing import NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

ERROR_DOMAIN = "graphmesh.io"


class DownstreamError(Exception):
    """A call to another GraphMesh service failed: raised by the gateway's
    client adapters (and the expander's library client) instead of the raw
    ``grpc.aio.AioRpcError``, so orchestration can be tested with fakes.

    The error interceptor passes it on to the caller with the same status
    code and the same rich details (a downstream INVALID_ARGUMENT stays
    INVALID_ARGUMENT with its BadRequest), the message prefixed with the
    service name.

    Attributes:
        service: the service called, e.g. "retriever_pg".
        code: the gRPC status code it answered.
        message: its status message.
        status: its google.rpc.Status (rich details), None when it sent none.
    """

    def __init__(self, service: str, code: grpc.StatusCode, message: str, status: status_pb2.Status | None = None) -> None:
        super().__init__(f"{service}: {code.name}: {message}")
        self.service = service
        self.code = code
        self.message = message
        self.status = status

    @classmethod
    def from_rpc(cls, service: str, err: grpc.aio.AioRpcError) -> "DownstreamError":
        """The DownstreamError of a failed call to ``service``."""
        return cls(service, err.code(), err.details() or "", rpc_status.from_call(err))

    def describe(self) -> str:
        """Short text for a StageTiming detail: "UNAVAILABLE: <message>"."""
        return f"{self.code.name}: {self.message}"


class ConfigError(Exception):
    """A setting the operator must fix (unreadable key file, malformed key
    line, ...): the service's entry point stops with this one line."""


class InvalidArgument(ValueError):
    """Raised by pure logic for a bad request field; servicers turn it into
    INVALID_ARGUMENT.

    Attributes:
        field: the request field path, e.g. "query" or "top_k".
        description: what is wrong, for the caller.
    """

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}")
        self.field = field
        self.description = description


#: Longest status message or field description sent (characters). Errors
#: quote the caller's values; unclipped, a 1 MB value overflowed gRPC's
#: 16 KiB metadata limit and the caller got RESOURCE_EXHAUSTED (and the
#: connection a GOAWAY) instead of INVALID_ARGUMENT (fuzzing, issue 16).
MAX_MESSAGE_CHARS = 500


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class NotFound(LookupError):
    """Raised by pure logic for a resource that does not exist (AIP-131
    Get); servicers turn it into NOT_FOUND with the message as is."""


def _status(code: int, message: str, reason: str, details: list) -> status_pb2.Status:
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN)
    packed = []
    for detail in [info, *details]:
        any_detail = any_pb2.Any()
        any_detail.Pack(detail)
        packed.append(any_detail)
    return status_pb2.Status(code=code, message=clip(message), details=packed)


async def abort_invalid_argument(context: grpc.aio.ServicerContext, field: str, description: str) -> NoReturn:
    """Aborts the RPC with INVALID_ARGUMENT, a BadRequest naming ``field``
    and ErrorInfo reason "INVALID_FIELD"."""
    field, description = clip(field, 200), clip(description)
    bad_request = error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field=field, description=description)]
    )
    status = _status(code_pb2.INVALID_ARGUMENT, f"{field}: {description}", "INVALID_FIELD", [bad_request])
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")  # abort_with_status always raises


async def abort_downstream(context: grpc.aio.ServicerContext, err: DownstreamError) -> NoReturn:
    """Aborts the RPC with the downstream service's own status: its code,
    its details (BadRequest, ErrorInfo) and its message prefixed with the
    service name."""
    message = clip(f"{err.service}: {err.message}")
    if err.status is not None:
        status = status_pb2.Status(code=err.code.value[0], message=message, details=err.status.details)
    else:
        status = _status(err.code.value[0], message, "DOWNSTREAM_" + err.code.name, [])
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")


async def abort_with(context: grpc.aio.ServicerContext, code: grpc.StatusCode, reason: str, message: str) -> NoReturn:
    """Aborts the RPC with ``code`` and an ErrorInfo carrying the stable ``reason``."""
    status = _status(code.value[0], message, reason, [])
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")


def field_violations(err: grpc.aio.AioRpcError) -> list[tuple[str, str]]:
    """(field, description) pairs of a BadRequest inside ``err``, if any."""
    status = rpc_status.from_call(err)
    if status is None:
        return []
    out = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend((v.field, v.description) for v in bad.field_violations)
    return out


#: A letter, digit or CJK character: what a query needs to be searched for.
_WORD_CHARACTER = re.compile(r"[^\W_]")


def validate_query(query: str, max_chars: int, field: str = "query") -> str:
    """Returns ``query`` stripped; raises InvalidArgument when it is empty,
    only whitespace, only punctuation or symbols (no letter, digit or CJK
    character: nothing to search for, and every channel would return
    arbitrary chunks), longer than ``max_chars`` characters, or holds a NUL
    character (no store can search for one)."""
    stripped = query.strip()
    if not stripped:
        raise InvalidArgument(field, "must not be empty or only whitespace")
    if not _WORD_CHARACTER.search(stripped):
        raise InvalidArgument(field, "has no letter, digit or CJK character (only punctuation or symbols)")
    if "\x00" in query:
        raise InvalidArgument(field, "must not contain NUL characters")
    if len(query) > max_chars:
        raise InvalidArgument(field, f"is {len(query)} characters; the maximum is {max_chars}")
    return stripped


def validate_range(value: int, low: int, high: int, field: str) -> int:
    """Returns ``value``; raises InvalidArgument unless low <= value <= high."""
    if not low <= value <= high:
        raise InvalidArgument(field, f"must be between {low} and {high}, got {value}")
    return value
