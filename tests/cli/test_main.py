"""The graphmesh command's entry point (services/cli/main.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]
# A command that prints far more than a pipe holds, run by main() as any command is.
LONG_OUTPUT = """
import sys
from services.cli import main as cli
def long_listing(args):
    for i in range(200_000):
        print(f"stored    docs/file-{i}.txt (3 chunks)")
    return 0
cli._run = long_listing
sys.exit(cli.main(["status"]))
"""


def test_output_cut_short_by_its_reader_ends_quietly_with_the_shells_status():
    proc = subprocess.Popen([sys.executable, "-c", LONG_OUTPUT], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PYTHONPATH": f"{REPO}:{REPO / 'gen' / 'python'}", "PATH": "/usr/bin:/bin"})
    first = proc.stdout.readline()  # like `| head -1`: read a line, then go away
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert first.startswith(b"stored") and proc.wait(timeout=60) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


@pytest.mark.parametrize("kind", ["documents", "entities", "triples"])
def test_id_prefix_and_meta_are_refused_where_a_jsonl_record_carries_its_own(kind, capsys, monkeypatch, tmp_path):
    """A trial's `ingest documents --meta dept=hr --id-prefix pre/` stored the records as written, silently."""
    from services.cli.main import main

    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "127.0.0.1:9")  # never called
    (tmp_path / "m.jsonl").write_text('{"id": "1", "text": "x"}\n', "utf-8")
    for flags, named in ((["--meta", "dept=hr"], "--meta"), (["--id-prefix", "pre/"], "--id-prefix"),
                         (["--id-prefix", "p/", "--meta", "a=b", "--async"], "--id-prefix and --meta")):
        assert main(["ingest", kind, str(tmp_path / "m.jsonl"), *flags]) == 2
        err = capsys.readouterr().err
        assert f"error: {named} apply to `ingest files` only" in err, err


@pytest.mark.parametrize("command", ["search", "answer"])
def test_top_k_outside_1_to_100_is_a_usage_error_naming_the_range(command, capsys, monkeypatch):
    """A second trial's `search x --top-k 0` was taken, though the help says 1 to 100."""
    from services.cli.main import main

    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "127.0.0.1:9")  # never called
    for bad in ("0", "101", "ten"):
        with pytest.raises(SystemExit) as stop:
            main([command, "年假", "--top-k", bad])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "--top-k" in err and ("from 1 to 100" in err or "is not a number of results" in err), err


def test_json_output_prints_zero_values_as_rest_does():
    """A second trial's script read `graphmesh search --json` and failed on a pg.centred entry with no "score"
    (0.0 was left out) and a result with no "fusedScore"; REST prints both."""
    import json

    from graphmesh.common.v1 import types_pb2
    from graphmesh.gateway.v1 import gateway_pb2
    from services.cli.client import proto_json

    reply = gateway_pb2.SearchResponse(results=[types_pb2.Candidate(id="a#0", fused_score=0.0, channel_scores=[
        types_pb2.ChannelScore(channel="pg.centred", score=0.0, rank=3)])])
    result = json.loads(proto_json(reply))["results"][0]
    assert result["fusedScore"] == 0 and result["channelScores"][0]["score"] == 0 and result["channelScores"][0]["rank"] == 3


def test_eval_asks_answers_with_the_answer_commands_top_k_unless_told():
    """A trial's `eval --answers` asked 30 results and refused 4 of 12 out-of-scope questions; `graphmesh answer`,
    at 10, refused 6: the run scored answers users never get."""
    from services.cli.main import build_parser
    from services.cli.tools import eval_top_k

    assert build_parser().parse_args(["eval", "--dataset", "q.jsonl", "--answers"]).top_k is None
    assert eval_top_k(answers=True) == 10 and eval_top_k(answers=False) == 30
    assert build_parser().parse_args(["eval", "--dataset", "q.jsonl", "--answers", "--top-k", "30"]).top_k == 30
