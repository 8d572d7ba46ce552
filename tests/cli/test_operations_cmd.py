"""``graphmesh ingest ... --async`` and ``graphmesh operations`` against the
real gateway (fake downstream services): the name printed is a running
operation that list, get and cancel then show."""
from __future__ import annotations

import asyncio
import json

import pytest

from services.cli.main import main
from tests.gateway.operations.test_imports import GatedExpander

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_async_ingest_then_list_get_and_cancel(cli_gateway, capsys, tmp_path):
    expander = GatedExpander()
    await cli_gateway(expander=expander, ingest={"sentence_vectors": False}, operations={"batch_records": 1})  # one Embed call per batch
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"第{i}条 内容。"}, ensure_ascii=False) for i in range(3)), "utf-8")
    code, out, _ = await run(capsys, "ingest", "documents", str(data), "--collection", "hr", "--async")
    name = out.strip()
    assert code == 0 and name.startswith("operations/import-")
    await expander.until_arrived(1)
    code, out, _ = await run(capsys, "operations", "list", "--filter", "done = false")
    listed = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [(o["name"], o["state"], o["collection"], o["total"]) for o in listed] == [(name, "RUNNING", "hr", 3)]
    code, out, _ = await run(capsys, "operations", "cancel", name)
    assert code == 0 and out.strip() == f"cancel requested: {name}"
    expander.open(10)
    for _ in range(500):
        code, out, _ = await run(capsys, "operations", "get", name)
        operation = json.loads(out)
        if operation.get("done"):
            break
    assert operation["done"] and operation["metadata"]["stored"] == 1 and operation["error"]["code"] == 1  # CANCELLED
    code, out, _ = await run(capsys, "operations", "cancel", name)  # a fresh user read "cancel requested" here
    assert code == 0 and out.strip() == f"{name} had already finished: nothing to cancel"
    code, _, err = await run(capsys, "operations", "get", "operations/nope")
    assert code == 2 and "NOT_FOUND" in err
    code, _, err = await run(capsys, "operations", "get")
    assert code == 2 and "takes NAME" in err


def _finished(stored: int, unchanged: int, failed: int):
    from google.longrunning import operations_pb2
    from graphmesh.gateway.v1 import gateway_pb2
    operation = operations_pb2.Operation(name="operations/x", done=True)
    operation.metadata.Pack(gateway_pb2.IngestOperationMetadata(stored=stored, unchanged=unchanged, failed=failed))
    operation.response.Pack(gateway_pb2.IngestResponse())
    return operation


def test_a_finished_import_whose_every_document_failed_is_not_shown_as_succeeded():
    """A trial's import of three files that all failed was listed "SUCCEEDED": a dashboard showed it green."""
    from services.cli.operations_cmd import describe
    assert describe(_finished(0, 0, 3))["state"] == "FAILED"
    assert describe(_finished(2, 0, 1))["state"] == "PARTIAL"
    assert describe(_finished(0, 2, 0))["state"] == "SUCCEEDED"
