"""The pure state of ImportDocuments operations: the Operation form of a
record, batch merging and progress, the statuses an operation ends with,
ListOperations' filter, page size and tokens, and which records are orphans."""
from __future__ import annotations

from datetime import timedelta

import pytest
from google.rpc import code_pb2, error_details_pb2

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.common.errors import InvalidArgument
from services.gateway.operations import state

pytestmark = pytest.mark.unit


def test_a_running_operation_carries_its_progress_and_times_but_no_result():
    record = state.new_record("hr", total=7, owner="host-a")
    assert state.NAME.fullmatch(record.name) and record.name.startswith("operations/import-")
    record.cancel_requested = True
    operation = state.to_operation(record)
    meta = gateway_pb2.IngestOperationMetadata()
    assert operation.metadata.Unpack(meta)
    assert (meta.collection, meta.total, meta.cancel_requested) == ("hr", 7, True)
    assert meta.create_time.ToDatetime(tzinfo=record.created.tzinfo) == record.created
    assert not operation.done and operation.WhichOneof("result") is None


def test_a_finished_operation_has_its_response_or_its_error():
    record = state.new_record("default")
    state.finish(record, gateway_pb2.IngestResponse(received=3, stored=2))
    reply = gateway_pb2.IngestResponse()
    operation = state.to_operation(record)
    assert operation.done and operation.response.Unpack(reply) and (reply.received, reply.stored) == (3, 2)
    state.finish(record, gateway_pb2.IngestResponse(received=3), error=state.cancelled_status())
    operation = state.to_operation(record)
    assert operation.WhichOneof("result") == "error" and operation.error.code == code_pb2.CANCELLED
    assert record.response is None


def test_batches_add_up_counts_failures_files_and_timings_per_stage():
    total = gateway_pb2.IngestResponse(received=1, failures=[types_pb2.IngestFailure(index=0, reason="not JSON")])
    ok, degraded = types_pb2.STAGE_STATUS_OK, types_pb2.STAGE_STATUS_DEGRADED
    for i, status in enumerate((ok, degraded, ok)):
        state.add_batch(total, gateway_pb2.IngestResponse(
            stored=2, unchanged=1, chunks=5, failures=[types_pb2.IngestFailure(index=10 + i, id=f"d{i}")],
            files=[gateway_pb2.FileOutcome(name=f"f{i}")],
            timings=[types_pb2.StageTiming(stage="embed", duration_ms=10.0, status=status, detail=f"b{i}"),
                     types_pb2.StageTiming(stage="store", duration_ms=1.5, status=ok)]))
    assert (total.received, total.stored, total.unchanged, total.chunks) == (1, 6, 3, 15)
    assert [f.index for f in total.failures] == [0, 10, 11, 12] and [f.name for f in total.files] == ["f0", "f1", "f2"]
    by_stage = {t.stage: t for t in total.timings}
    assert list(by_stage) == ["embed", "store"]
    assert by_stage["embed"].duration_ms == pytest.approx(30.0) and by_stage["store"].duration_ms == pytest.approx(4.5)
    assert (by_stage["embed"].status, by_stage["embed"].detail) == (degraded, "b1")  # a degraded batch stays visible


def test_progress_counts_come_from_the_running_response():
    record = state.new_record("default", total=10)
    before = record.updated
    state.set_progress(record, gateway_pb2.IngestResponse(stored=3, unchanged=1, failures=[types_pb2.IngestFailure()]),
                       received=5, now=before + timedelta(seconds=1))
    m = record.metadata
    assert (m.received, m.stored, m.unchanged, m.failed, m.total) == (5, 3, 1, 1, 10)
    assert record.updated == record.heartbeat == before + timedelta(seconds=1)


def test_errors_keep_the_field_or_the_downstream_status_and_hide_internals():
    bad = state.status_of(InvalidArgument("domain_pack", "unknown pack 'x'"))
    assert bad.code == code_pb2.INVALID_ARGUMENT
    request = error_details_pb2.BadRequest()
    assert any(d.Unpack(request) for d in bad.details) and request.field_violations[0].field == "domain_pack"
    internal = state.status_of(RuntimeError("password=hunter2 in a traceback"))
    assert internal.code == code_pb2.INTERNAL and "hunter2" not in internal.message
    aborted = state.aborted_status()
    assert aborted.code == code_pb2.ABORTED and "restarted" in aborted.message and "skips" in aborted.message


@pytest.mark.parametrize("text, expected", [("", None), ("  ", None), ("done = true", True), ("DONE=false", False),
                                            (" done =  TRUE ", True)])
def test_the_done_filter(text, expected):
    assert state.parse_done_filter(text) is expected


@pytest.mark.parametrize("text", ["done", "done = 1", "collection = 'a'", "done = true AND done = false", "done != true"])
def test_other_filters_are_refused_naming_the_field(text):
    with pytest.raises(InvalidArgument) as err:
        state.parse_done_filter(text)
    assert err.value.field == "filter"


def test_page_sizes_and_tokens():
    assert state.page_size(0) == state.DEFAULT_PAGE_SIZE and state.page_size(7) == 7
    for bad in (-1, state.MAX_PAGE_SIZE + 1):
        with pytest.raises(InvalidArgument, match="page_size"):
            state.page_size(bad)
    record = state.new_record("default")
    assert state.parse_page_token(state.page_token(record)) == (record.created, record.name)
    assert state.parse_page_token("") is None
    for bad in ("x", "eyJ0IjogMX0", state.page_token(record)[:-3] + "!!!"):
        with pytest.raises(InvalidArgument) as err:
            state.parse_page_token(bad)
        assert err.value.field == "page_token"
    older = state.new_record("default", now=record.created - timedelta(seconds=1))
    assert state.after(older, (record.created, record.name)) and not state.after(record, (record.created, record.name))


@pytest.mark.parametrize("name", ["operations/import-0a1b", "operations/x_y-Z"])
def test_operation_names(name):
    assert state.validate_name(name) == name


@pytest.mark.parametrize("name", ["", "operations/", "operations", "collections/a", "operations/a/b", "operations/" + "a" * 129,
                                  "operations/a b"])
def test_bad_operation_names_name_the_field(name):
    with pytest.raises(InvalidArgument) as err:
        state.validate_name(name)
    assert err.value.field == "name"


def test_orphans_have_no_heartbeat_for_the_lease_or_belong_to_this_host():
    record = state.new_record("default", owner="host-a")
    now = record.heartbeat + timedelta(seconds=30)
    assert not state.is_orphan(record, now, lease=60)
    assert state.is_orphan(record, now, lease=10)
    assert state.is_orphan(record, now, lease=60, owner="host-a")  # a gateway just started on its host
    assert not state.is_orphan(record, now, lease=60, owner="host-b")
    state.finish(record, gateway_pb2.IngestResponse())
    assert not state.is_orphan(record, now + timedelta(hours=1), lease=10, owner="host-a")


def test_batches_cover_every_item_once_in_order():
    items = list(range(7))
    assert [(s, list(b)) for s, b in state.batches(items, 3)] == [(0, [0, 1, 2]), (3, [3, 4, 5]), (6, [6])]
    assert list(state.batches([], 3)) == []
