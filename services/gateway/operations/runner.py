"""Runs ImportDocuments operations: one asyncio task per operation ingests
the request in batches through the same use cases as Ingest (JSONL
documents ``operations.batch_records`` at a time, files
``operations.batch_files`` at a time; entities and triples as one batch),
saves the progress after each batch and stops at a batch boundary when a
cancel was asked for. A batch is stored whole or reported failed, never half
(documents are idempotent by content hash: a re-run skips what is stored).

Alive operations get a heartbeat every ``lease / 3`` seconds; at start and
on the same beat, operations that lost their gateway (state.is_orphan) end
ABORTED."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time

from graphmesh.gateway.v1 import gateway_pb2
from services.common import names
from services.common.errors import DownstreamError, InvalidArgument
from services.gateway.config_groups import OperationsSettings
from services.gateway.downstream.guard import Deadline, Trace
from services.gateway.library.document_ingest import (DocumentIngest, count_ingest, failure_proto, latest_records,
                                                      superseded_failures, unreadable_payload)
from services.gateway.library.entity_ingest import EntityIngest
from services.gateway.library.file_ingest import FileIngest
from services.gateway.operations import state
from services.gateway.operations.store import MemoryOperations, OperationsUnavailable, PgOperations
from services.ingest.jsonl_documents import parse_jsonl

log = logging.getLogger("graphmesh.gateway.operations")


class _Stop(Exception):
    """The operation stops here: cancelled, or ended elsewhere (``cancelled`` False)."""

    def __init__(self, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "ended elsewhere")
        self.cancelled = cancelled


class ImportRunner:
    """Starts and runs ImportDocuments operations over ``store``.

    Args:
        settings: batch sizes, batch deadline, heartbeat lease, how many finished operations to keep.
        store: MemoryOperations or PgOperations.
        documents / files / entities: the Ingest use cases.
        owner: this gateway's host name (state.is_orphan).
    """

    def __init__(self, settings: OperationsSettings, store: MemoryOperations | PgOperations, documents: DocumentIngest,
                 files: FileIngest, entities: EntityIngest, owner: str | None = None) -> None:
        self.settings = settings
        self.store = store
        self._documents, self._files, self._entities = documents, files, entities
        self.owner = socket.gethostname() if owner is None else owner
        self._tasks: dict[str, asyncio.Task] = {}
        self._beat: asyncio.Task | None = None

    async def start_up(self) -> None:
        """Opens the store, ends the operations a previous gateway on this
        host (or a dead one elsewhere) left running, and starts the
        heartbeat. A database that is down is logged, not fatal: the
        operations RPCs answer UNAVAILABLE until it is back."""
        try:
            await self.store.open()
            aborted = await self.store.abort_orphans(self.settings.lease, state.aborted_status(), state.utcnow(), self.owner)
            if aborted:
                log.warning("%d import operation(s) left running by a previous gateway ended ABORTED", aborted)
        except OperationsUnavailable as err:
            log.error("%s; ImportDocuments and the Operations service answer UNAVAILABLE until it is back", err)
        self._beat = asyncio.create_task(self._heartbeat())

    async def shut_down(self) -> None:
        """Stops the running operations (each ends ABORTED: the gateway
        stopped), the heartbeat, and closes the store."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        await self.store.close()

    def running(self) -> list[str]:
        """Names of the operations this process runs now."""
        return list(self._tasks)

    async def running_into(self, collection: str) -> list[str]:
        """Names of the unfinished operations into ``collection``, of any
        gateway sharing the operations store; [] when the store cannot be
        read (a deletion is then not held back by what cannot be seen)."""
        try:
            records = await self.store.list(False, None, 1000)
        except OperationsUnavailable:
            return []
        return [r.name for r in records if r.metadata.collection == collection]

    async def start(self, request: gateway_pb2.IngestRequest, collection: str) -> state.OperationRecord:
        """Creates the operation of a validated ``request`` into
        ``collection`` and starts running it; returns it as created.

        Raises:
            OperationsUnavailable: the operations database cannot be reached.
        """
        total = len(request.files) or sum(1 for line in request.jsonl.split(b"\n") if line.strip())
        record = state.new_record(collection, total, self.owner)
        await self.store.create(record)
        task = asyncio.create_task(self._run(record, request), name=record.name)
        self._tasks[record.name] = task
        task.add_done_callback(lambda _: self._tasks.pop(record.name, None))
        if self.settings.keep_done:
            await self.store.prune(self.settings.keep_done)
        return record

    async def _run(self, record: state.OperationRecord, request: gateway_pb2.IngestRequest) -> None:
        response = gateway_pb2.IngestResponse()
        try:
            await self._checkpoint(record, response, 0, last=False)
            if request.files:
                await self._run_files(record, request, response)
            elif request.kind in (gateway_pb2.INGEST_KIND_ENTITIES, gateway_pb2.INGEST_KIND_TRIPLES):
                await self._run_entities(record, request, response)
            else:
                await self._run_documents(record, request, response)
            state.finish(record, response)
        except _Stop as stop:
            if not stop.cancelled:
                return
            state.finish(record, error=state.cancelled_status())
        except asyncio.CancelledError:
            state.finish(record, error=state.aborted_status())
            with contextlib.suppress(Exception):
                await self.store.save(record)
            raise
        except Exception as err:  # noqa: BLE001 - the operation ends with the error, the gateway goes on
            if not isinstance(err, (InvalidArgument, DownstreamError, OperationsUnavailable)):
                log.error("import %s failed", record.name, exc_info=err)
            error = state.unavailable_status(str(err)) if isinstance(err, OperationsUnavailable) else state.status_of(err)
            state.finish(record, error=error)
        await self._save_outcome(record)

    async def _save_outcome(self, record: state.OperationRecord) -> None:
        """Saves a finished operation. While the operations database cannot
        be reached the save is retried (0.5 s doubling to 5 s, for up to one
        lease; the heartbeat keeps the operation alive meanwhile), so that
        it ends with its own outcome once the database is back, not as an
        orphan ABORTED a lease later with "the gateway restarted"."""
        delay, give_up = 0.5, time.monotonic() + self.settings.lease
        while True:
            try:
                await self.store.save(record)
                return
            except OperationsUnavailable as err:
                if time.monotonic() + delay > give_up:
                    log.error("import %s finished but could not be saved: %s", record.name, err)
                    return
                log.warning("import %s finished; saving its outcome again in %.1f s: %s", record.name, delay, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _checkpoint(self, record: state.OperationRecord, response: gateway_pb2.IngestResponse, received: int,
                          last: bool) -> None:
        """Saves the progress; stops a cancelled operation unless its last batch is done."""
        state.set_progress(record, response, received)
        cancel = await self.store.save(record)
        if cancel is None:
            raise _Stop(cancelled=False)
        record.cancel_requested = cancel
        if cancel and not last:
            raise _Stop(cancelled=True)

    def _deadline(self) -> Deadline:
        return Deadline(self.settings.batch_timeout)

    async def _run_documents(self, record: state.OperationRecord, request: gateway_pb2.IngestRequest,
                             response: gateway_pb2.IngestResponse) -> None:
        collection = record.metadata.collection
        pack = await self._documents.packs.for_ingest(collection, request.domain_pack, self._deadline())
        trace, started = Trace(), time.perf_counter()
        docs, parse_failures = await asyncio.to_thread(parse_jsonl, request.jsonl)
        response.received = len(docs) + len(parse_failures)
        response.failures.extend(failure_proto(f) for f in parse_failures)
        trace.record(names.STAGE_PARSE, started)
        response.timings.extend(trace.timings)
        unreadable = unreadable_payload(response, parse_failures)
        if unreadable is not None:
            await self._checkpoint(record, response, response.received, last=True)  # its counts say what failed
            raise unreadable
        latest = latest_records(docs)
        response.failures.extend(superseded_failures(docs))  # as Ingest reports them
        received = response.received - len(latest)  # unreadable lines and records superseded by a later one of their id
        await self._checkpoint(record, response, received, last=not latest)
        for start, batch in state.batches(latest, self.settings.batch_records):
            part, trace = gateway_pb2.IngestResponse(), Trace()
            await self._documents.store_parsed(batch, pack, collection, self._deadline(), trace, part)
            part.timings.extend(trace.timings)
            state.add_batch(response, part)
            received += len(batch)
            await self._checkpoint(record, response, received, last=start + len(batch) >= len(latest))
        count_ingest("documents", response)

    async def _run_files(self, record: state.OperationRecord, request: gateway_pb2.IngestRequest,
                         response: gateway_pb2.IngestResponse) -> None:
        files, seen = list(request.files), {}
        for start, batch in state.batches(files, self.settings.batch_files):
            part = await self._files.ingest(batch, self._deadline(), record.metadata.collection, request.domain_pack,
                                            first=start, seen=seen)
            state.add_batch(response, part)
            await self._checkpoint(record, response, start + len(batch), last=start + len(batch) >= len(files))

    async def _run_entities(self, record: state.OperationRecord, request: gateway_pb2.IngestRequest,
                            response: gateway_pb2.IngestResponse) -> None:
        part, parse_failures = await self._entities.ingest(request.jsonl, request.kind, self._deadline(), record.metadata.collection)
        kind = gateway_pb2.IngestKind.Name(request.kind).removeprefix("INGEST_KIND_").lower()
        count_ingest(kind, part)
        unreadable = unreadable_payload(part, parse_failures)
        if unreadable is not None:
            raise unreadable
        state.add_batch(response, part)
        await self._checkpoint(record, response, part.received, last=True)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.settings.lease / 3)
            try:
                now = state.utcnow()
                await self.store.heartbeat(self.running(), now)
                aborted = await self.store.abort_orphans(self.settings.lease, state.aborted_status(), now)
                if aborted:
                    log.warning("%d import operation(s) whose gateway stopped answering ended ABORTED", aborted)
            except OperationsUnavailable as err:
                log.warning("operations heartbeat: %s", err)
