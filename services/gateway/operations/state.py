"""The pure state of ImportDocuments operations (AIP-151): the record kept
per operation, its google.longrunning.Operation form, progress over batches,
the statuses an operation ends with, and ListOperations' filter and page
tokens. No I/O and no gRPC calls: the stores (``store``) and the runner
(``runner``) are built on these."""
from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from google.longrunning import operations_pb2
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import ERROR_DOMAIN, DownstreamError, InvalidArgument, clip

#: An operation's name: "operations/" then 1 to 128 of [A-Za-z0-9_-].
NAME = re.compile(r"^operations/[A-Za-z0-9_-]{1,128}$")
#: ListOperations page size when the caller gives none, and the most allowed.
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 1000
#: Why an operation that a stopped gateway left running ended (ABORTED).
ABORTED_MESSAGE = ("the gateway restarted (or stopped) before this import finished; the batches before it are stored whole, "
                   "and running the same import again skips the documents already stored (same content hash)")
CANCELLED_MESSAGE = "cancelled (CancelOperation): the import stopped at a batch boundary; the batches before it are stored whole"
_DONE_FILTER = re.compile(r"^\s*done\s*=\s*(true|false)\s*$", re.I)
T = TypeVar("T")


def utcnow() -> datetime:
    """The current time, UTC (tz-aware)."""
    return datetime.now(timezone.utc)


@dataclass
class OperationRecord:
    """One operation as stored.

    Attributes:
        name: "operations/import-<32 hex>".
        metadata: its progress counts and collection; the times and the
            cancel flag are filled from the fields below by ``to_operation``.
        created / updated: when it was created and last changed (UTC).
        heartbeat: when its runner last said it is alive (UTC).
        done: finished, with ``response`` or ``error``.
        cancel_requested: CancelOperation was called.
        response: the IngestResponse of a finished import.
        error: the google.rpc.Status of one that failed, was cancelled or aborted.
        owner: host name of the gateway running it.
    """

    name: str
    metadata: gateway_pb2.IngestOperationMetadata
    created: datetime
    updated: datetime
    heartbeat: datetime
    done: bool = False
    cancel_requested: bool = False
    response: gateway_pb2.IngestResponse | None = None
    error: status_pb2.Status | None = field(default=None)
    owner: str = ""


def new_record(collection: str, total: int = 0, owner: str = "", now: datetime | None = None) -> OperationRecord:
    """A new, running operation into ``collection`` of ``total`` records or
    files, run by the gateway on host ``owner``."""
    now = now or utcnow()
    return OperationRecord(name=f"operations/import-{uuid.uuid4().hex}", created=now, updated=now, heartbeat=now, owner=owner,
                           metadata=gateway_pb2.IngestOperationMetadata(collection=collection, total=total))


def validate_name(name: str) -> str:
    """``name`` if it is an operation name (NAME).

    Raises:
        InvalidArgument ("name"): it is not.
    """
    if not NAME.fullmatch(name or ""):
        raise InvalidArgument("name", f"must be operations/<id> (id: 1 to 128 of A-Z a-z 0-9 _ -), got {clip(name, 80)!r}")
    return name


def to_operation(record: OperationRecord) -> operations_pb2.Operation:
    """The google.longrunning.Operation of ``record``: metadata an
    IngestOperationMetadata (with create/update time and the cancel flag),
    and when done either the IngestResponse or the error."""
    metadata = gateway_pb2.IngestOperationMetadata()
    metadata.CopyFrom(record.metadata)
    metadata.create_time.FromDatetime(record.created)
    metadata.update_time.FromDatetime(record.updated)
    metadata.cancel_requested = record.cancel_requested
    operation = operations_pb2.Operation(name=record.name, done=record.done)
    operation.metadata.Pack(metadata)
    if record.done and record.error is not None:
        operation.error.CopyFrom(record.error)
    elif record.done:
        operation.response.Pack(record.response or gateway_pb2.IngestResponse())
    return operation


def add_batch(total: gateway_pb2.IngestResponse, part: gateway_pb2.IngestResponse) -> None:
    """Adds one batch's response to the running ``total``: counts summed,
    failures and file outcomes appended in order, stage timings summed per
    stage (a stage that was degraded in any batch stays so)."""
    total.received += part.received
    total.stored += part.stored
    total.unchanged += part.unchanged
    total.chunks += part.chunks
    total.failures.extend(part.failures)
    total.files.extend(part.files)
    by_stage = {t.stage: t for t in total.timings}
    for timing in part.timings:
        known = by_stage.get(timing.stage)
        if known is None:
            by_stage[timing.stage] = total.timings.add()
            by_stage[timing.stage].CopyFrom(timing)
            continue
        known.duration_ms += timing.duration_ms
        if known.status == types_pb2.STAGE_STATUS_OK and timing.status != types_pb2.STAGE_STATUS_OK:
            known.status, known.detail = timing.status, timing.detail


def set_progress(record: OperationRecord, response: gateway_pb2.IngestResponse, received: int, now: datetime | None = None) -> None:
    """Sets ``record``'s counts from the running ``response`` after a batch:
    ``received`` records or files handled so far."""
    record.metadata.received = received
    record.metadata.stored, record.metadata.unchanged = response.stored, response.unchanged
    record.metadata.failed = len(response.failures)
    record.updated = record.heartbeat = now or utcnow()


def finish(record: OperationRecord, response: gateway_pb2.IngestResponse | None = None,
           error: status_pb2.Status | None = None, now: datetime | None = None) -> None:
    """Marks ``record`` done with ``response`` or ``error``."""
    record.done, record.response, record.error = True, (None if error is not None else response), error
    record.updated = record.heartbeat = now or utcnow()


def status(code: int, message: str, reason: str, details: Sequence = ()) -> status_pb2.Status:
    """A google.rpc.Status of ``code`` with an ErrorInfo (``reason``) and ``details``."""
    packed = []
    for detail in (error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN), *details):
        wrapped = any_pb2.Any()
        wrapped.Pack(detail)
        packed.append(wrapped)
    return status_pb2.Status(code=code, message=clip(message), details=packed)


def cancelled_status() -> status_pb2.Status:
    """The error of a cancelled operation (AIP-151: google.rpc.Code.CANCELLED)."""
    return status(code_pb2.CANCELLED, CANCELLED_MESSAGE, "OPERATION_CANCELLED")


def aborted_status() -> status_pb2.Status:
    """The error of an operation its gateway left running (ABORTED)."""
    return status(code_pb2.ABORTED, ABORTED_MESSAGE, "GATEWAY_RESTARTED")


def unavailable_status(message: str) -> status_pb2.Status:
    """The error of an import stopped because its progress could not be
    saved (the operations database was unreachable): UNAVAILABLE; running
    it again skips what was stored."""
    return status(code_pb2.UNAVAILABLE, f"{message}; the batches before it are stored whole, and running the same import "
                  "again skips the documents already stored", "OPERATIONS_UNAVAILABLE")


def status_of(err: BaseException) -> status_pb2.Status:
    """The error an import ends with for ``err``: INVALID_ARGUMENT with a
    BadRequest naming the field, a downstream service's own status, else
    INTERNAL (the exception is the gateway log's business)."""
    if isinstance(err, InvalidArgument):
        violation = error_details_pb2.BadRequest.FieldViolation(field=err.field, description=clip(err.description))
        return status(code_pb2.INVALID_ARGUMENT, str(err), "INVALID_FIELD", [error_details_pb2.BadRequest(field_violations=[violation])])
    if isinstance(err, DownstreamError):
        message = clip(f"{err.service}: {err.message}")
        if err.status is not None:
            return status_pb2.Status(code=err.code.value[0], message=message, details=err.status.details)
        return status(err.code.value[0], message, "DOWNSTREAM_" + err.code.name)
    return status(code_pb2.INTERNAL, "internal error; see the gateway log", "INTERNAL")


def is_orphan(record: OperationRecord, now: datetime, lease: float, owner: str = "") -> bool:
    """Whether a running ``record`` has lost its gateway: no heartbeat for
    ``lease`` seconds, or run on host ``owner`` (given by a gateway that
    has just started there, so it was a previous process's)."""
    return not record.done and (now - record.heartbeat > timedelta(seconds=lease) or bool(owner) and record.owner == owner)


def parse_done_filter(text: str) -> bool | None:
    """ListOperations' filter: "" (all), "done = true" or "done = false"
    (AIP-160; case and spaces free).

    Raises:
        InvalidArgument ("filter"): anything else.
    """
    if not text.strip():
        return None
    match = _DONE_FILTER.fullmatch(text)
    if match is None:
        raise InvalidArgument("filter", f'only "done = true" or "done = false" is supported, got {clip(text, 80)!r}')
    return match.group(1).lower() == "true"


def page_size(value: int) -> int:
    """ListOperations' page size: DEFAULT_PAGE_SIZE for 0.

    Raises:
        InvalidArgument ("page_size"): negative or over MAX_PAGE_SIZE.
    """
    if value == 0:
        return DEFAULT_PAGE_SIZE
    if not 1 <= value <= MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"must be 0 to {MAX_PAGE_SIZE}, got {value}")
    return value


def page_token(record: OperationRecord) -> str:
    """The token of the page after ``record`` (operations are listed newest
    first, by (created, name) descending)."""
    raw = json.dumps({"t": record.created.isoformat(), "n": record.name}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_page_token(token: str) -> tuple[datetime, str] | None:
    """(created, name) of the last operation of the previous page; None for "".

    Raises:
        InvalidArgument ("page_token"): not a token of ``page_token``.
    """
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        created = datetime.fromisoformat(data["t"])
        if created.tzinfo is None or not isinstance(data["n"], str):
            raise ValueError
        return created, data["n"]
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument("page_token", "not a next_page_token of ListOperations") from None


def after(record: OperationRecord, cursor: tuple[datetime, str] | None) -> bool:
    """Whether ``record`` comes after ``cursor`` in the listing order."""
    return cursor is None or (record.created, record.name) < cursor


def batches(items: Sequence[T], size: int) -> Iterator[tuple[int, Sequence[T]]]:
    """(start index, slice) of ``items`` in slices of ``size`` (at least 1)."""
    size = max(1, size)
    for start in range(0, len(items), size):
        yield start, items[start:start + size]
