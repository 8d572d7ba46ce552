"""google.longrunning.Operations for the gateway's ImportDocuments
operations (AIP-151), over the runner's store: Get, List (newest first,
filter "done = true|false", page_size / page_token), Cancel (the import
stops after the batch in progress) and Delete (finished operations only).
WaitOperation is not offered (UNIMPLEMENTED): poll GetOperation.

Errors: INVALID_ARGUMENT naming "name", "filter", "page_size" or
"page_token"; NOT_FOUND for an unknown operation; FAILED_PRECONDITION for
deleting one still running; UNAVAILABLE when the operations database cannot
be reached."""
from __future__ import annotations

import grpc
from google.longrunning import operations_pb2, operations_pb2_grpc
from google.protobuf import empty_pb2

from services.common.errors import InvalidArgument, NotFound, abort_with
from services.gateway.operations import state
from services.gateway.operations.runner import ImportRunner

#: The full name of the service, for health and reflection.
SERVICE_NAME = "google.longrunning.Operations"


class OperationsServicer(operations_pb2_grpc.OperationsServicer):
    """The Operations service over ``runner.store``."""

    def __init__(self, runner: ImportRunner) -> None:
        self._runner = runner

    async def _get(self, name: str) -> state.OperationRecord:
        record = await self._runner.store.get(state.validate_name(name))
        if record is None:
            raise NotFound(f"operation {name!r} not found")
        return record

    async def GetOperation(self, request: operations_pb2.GetOperationRequest, context: grpc.aio.ServicerContext) -> operations_pb2.Operation:
        return state.to_operation(await self._get(request.name))

    async def ListOperations(self, request: operations_pb2.ListOperationsRequest,
                             context: grpc.aio.ServicerContext) -> operations_pb2.ListOperationsResponse:
        if request.name not in ("", "operations"):
            raise InvalidArgument("name", f'must be "operations" (or empty), got {request.name[:80]!r}')
        done = state.parse_done_filter(request.filter)
        size = state.page_size(request.page_size)
        records = await self._runner.store.list(done, state.parse_page_token(request.page_token), size + 1)
        page = records[:size]
        return operations_pb2.ListOperationsResponse(
            operations=[state.to_operation(r) for r in page],
            next_page_token=state.page_token(page[-1]) if len(records) > size else "")

    async def CancelOperation(self, request: operations_pb2.CancelOperationRequest, context: grpc.aio.ServicerContext) -> empty_pb2.Empty:
        name = state.validate_name(request.name)
        if await self._runner.store.request_cancel(name, state.utcnow()) is None:
            raise NotFound(f"operation {name!r} not found")
        return empty_pb2.Empty()

    async def DeleteOperation(self, request: operations_pb2.DeleteOperationRequest, context: grpc.aio.ServicerContext) -> empty_pb2.Empty:
        record = await self._get(request.name)
        if not record.done or not await self._runner.store.delete(record.name):
            await abort_with(context, grpc.StatusCode.FAILED_PRECONDITION, "OPERATION_RUNNING",
                             f"operation {record.name!r} is still running: cancel it (CancelOperation) and delete it once done")
        return empty_pb2.Empty()
