"""graphmesh up: the environment --llm gives the services it starts, and
a clear error when a store cannot start."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from services.cli import stack
from services.cli.stack import point_at_local_llm

pytestmark = pytest.mark.unit

LOCAL = "http://127.0.0.1:50060/v1"


def test_the_local_llm_answers_with_the_citation_grammar():
    env: dict[str, str] = {}
    point_at_local_llm(env, LOCAL)
    assert env["GRAPHMESH_GATEWAY_LLM__BASE_URL"] == env["GRAPHMESH_EXPANDER_LLM__BASE_URL"] == LOCAL
    assert env["GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR"] == "true"
    assert env["GRAPHMESH_GATEWAY_LLM__MAX_SOURCES"] == str(stack.LOCAL_LLM_MAX_SOURCES)


def test_a_users_own_endpoint_and_choice_are_kept():
    """Another server may reject llama.cpp's grammar field: the gateway
    pointed elsewhere gets no grammar, and a user's explicit false stays."""
    elsewhere = {"GRAPHMESH_GATEWAY_LLM__BASE_URL": "https://api.example.com/v1"}
    point_at_local_llm(elsewhere, LOCAL)
    assert "GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR" not in elsewhere
    assert "GRAPHMESH_GATEWAY_LLM__MAX_SOURCES" not in elsewhere  # another server is shown every source
    assert elsewhere["GRAPHMESH_EXPANDER_LLM__BASE_URL"] == LOCAL
    off = {"GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR": "false"}
    point_at_local_llm(off, LOCAL)
    assert off["GRAPHMESH_GATEWAY_LLM__CITATION_GRAMMAR"] == "false"


def test_a_taken_bolt_port_is_a_clear_error_and_nothing_is_left_running(tmp_path, monkeypatch, capsys):
    """Another checkout's stack (or any Neo4j) on the Bolt port: up says so
    and returns 1, instead of a traceback from the launcher's bind failure."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
        monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://127.0.0.1:1/external")  # no embedded PostgreSQL
        monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", raising=False)
        monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", raising=False)
        config = stack.StackConfig
        monkeypatch.setattr(stack, "StackConfig", lambda: config(neo4j_bolt_port=port))
        assert stack.up(detach=True) == 1
    err = capsys.readouterr().err
    assert f"error: port {port} (embedded Neo4j's Bolt) is already in use" in err
    assert "graphmesh down" in err and "Traceback" not in err
    assert not (tmp_path / "logs" / "neo4j.log").exists()  # the launcher was never started


def test_a_port_setting_out_of_range_is_named_before_anything_starts(tmp_path, monkeypatch, capsys):
    """Two trials' GRAPHMESH_GATEWAY_PORT=66051 and GRAPHMESH_GATEWAY_METRICS_PORT=65551 ended in a traceback
    (OverflowError from the port check) with both stores left running."""
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    for name, value in (("GRAPHMESH_GATEWAY_PORT", "66051"), ("GRAPHMESH_GATEWAY_METRICS_PORT", "65551"),
                        ("GRAPHMESH_LLM_PORT", "x")):
        monkeypatch.setenv(name, value)
        assert stack.up(detach=True) == 2
        err = capsys.readouterr().err
        assert f"error: {name} must be a TCP port number, 0-65535; got '{value}'" in err and "Traceback" not in err
        monkeypatch.delenv(name)
    assert not (tmp_path / "pids.json").exists() and not (tmp_path / "logs").exists()  # nothing was started


def test_a_failed_up_leaves_a_running_stack_alone(tmp_path, monkeypatch, capsys):
    """up run again while a stack runs but its Neo4j has died and another
    process holds the port: the error stops nothing the earlier up started."""
    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
            monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://127.0.0.1:1/external")
            monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", raising=False)
            monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", raising=False)
            monkeypatch.setenv("GRAPHMESH_NEO4J_BOLT_PORT", str(port))
            recorded = {"gateway": service.pid, "neo4j": 2**22 + 1}  # a live service, a dead Neo4j pid
            (tmp_path / "pids.json").write_text(json.dumps(recorded))
            assert stack.up(detach=True) == 1
        assert service.poll() is None  # still running
        assert json.loads((tmp_path / "pids.json").read_text()) == recorded
        assert "already in use" in capsys.readouterr().err
    finally:
        service.kill()
        service.wait()


@pytest.mark.parametrize("value", ["abc", "70000", "0", "-1"])
def test_a_bad_bolt_port_setting_is_a_clear_error(value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.setenv("GRAPHMESH_NEO4J_BOLT_PORT", value)
    assert stack.up(detach=True) == 2
    assert stack.status() == 2
    err = capsys.readouterr().err
    assert f"GRAPHMESH_NEO4J_BOLT_PORT must be a TCP port number, 1-65535; got {value!r}" in err
    assert "Traceback" not in err and not (tmp_path / "pids.json").exists()


def test_stores_already_running_or_external_are_reused_not_started(tmp_path, monkeypatch):
    """start_stores with a live embedded Neo4j (its pid recorded) returns its
    Bolt URI even while the port is taken by it, and with an external URI
    returns that one; neither starts a launcher."""
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://127.0.0.1:1/external")
    monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J_URI", raising=False)
    monkeypatch.delenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", raising=False)
    import services.retriever_graph.embedded as embedded

    def no_launcher(*args, **kwargs):
        raise AssertionError("the embedded Neo4j was started")

    monkeypatch.setattr(embedded, "start_embedded_neo4j", no_launcher)
    with socket.socket() as taken:  # the running Neo4j holds its port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            pids = {"neo4j": live.pid}
            assert stack.start_stores(stack.StackConfig(neo4j_bolt_port=port), pids) == (
                "postgresql://127.0.0.1:1/external", f"bolt://127.0.0.1:{port}")
            assert pids == {"neo4j": live.pid}
        finally:
            live.kill()
            live.wait()
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", "bolt://db.example:7687")
    assert stack.start_stores(stack.StackConfig(), {})[1] == "bolt://db.example:7687"


def test_a_taken_service_port_is_refused_before_any_service_starts(tmp_path, monkeypatch):
    """Another stack's service on a port up would give one of its own would
    answer up's health check as if it were ours: up names the taken port's
    setting and starts nothing."""
    started = []
    monkeypatch.setattr(stack.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {f"GRAPHMESH_{n.upper()}_PORT": "0" for n in stack.SERVICES}
        env |= {"GRAPHMESH_FUSER_PORT": str(port), "GRAPHMESH_GATEWAY_REST__PORT": "0"}
        assert stack.taken_ports(env, list(stack.SERVICES)) == [f"GRAPHMESH_FUSER_PORT={port}"]
        assert stack.taken_ports(env, ["gateway"]) == []  # a service already running is not checked
        with pytest.raises(RuntimeError, match=f"GRAPHMESH_FUSER_PORT={port}.*Several stacks on one machine"):
            stack.start_services(env, {})
    assert started == []


def test_commands_reach_the_stack_started_under_their_graphmesh_home(tmp_path, monkeypatch):
    """A fresh user's trial: a second stack on moved ports, and a command that exported only GRAPHMESH_HOME
    reached the default port, another stack's gateway. ``up`` records the addresses; later commands read them,
    an address the environment sets wins, and ``down`` forgets them."""
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    for key in ("GRAPHMESH_GATEWAY_ADDR", "GRAPHMESH_JUDGE_ADDR"):
        monkeypatch.setenv(key, "unset")  # restored as it was after the test, whatever this one sets
        monkeypatch.delenv(key)
    stack.use_stack_addresses()  # nothing started here: nothing set
    assert "GRAPHMESH_GATEWAY_ADDR" not in stack.os.environ
    stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:53051", "GRAPHMESH_JUDGE_ADDR": "127.0.0.1:53057",
                            "GRAPHMESH_GATEWAY_PORT": "53051", "PATH": "/bin"})
    assert json.loads((tmp_path / "addresses.json").read_text()) == {
        "GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:53051", "GRAPHMESH_JUDGE_ADDR": "127.0.0.1:53057"}
    monkeypatch.setenv("GRAPHMESH_JUDGE_ADDR", "10.0.0.5:50057")
    stack.use_stack_addresses()
    from services.cli.client import gateway_address

    assert gateway_address() == "127.0.0.1:53051"
    assert stack.os.environ["GRAPHMESH_JUDGE_ADDR"] == "10.0.0.5:50057"  # the environment's own wins
    monkeypatch.setattr(stack, "_stop_all", lambda: 0)
    assert stack.down() == 0 and not (tmp_path / "addresses.json").exists()


def test_status_lists_the_rest_address_and_whether_it_listens(tmp_path, monkeypatch, capsys):
    # a fresh user found the REST address (the console's) in no command's output but `up`'s
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.setenv("GRAPHMESH_GATEWAY_REST__PORT", "13080")
    monkeypatch.setattr(stack, "check_health", lambda address: True)
    monkeypatch.setattr(stack, "port_in_use", lambda port, host="127.0.0.1": port == 13080)
    assert stack.status() == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].split() == ["gateway", "REST", "http://127.0.0.1:13080", "SERVING"]
    monkeypatch.setattr(stack, "port_in_use", lambda port, host="127.0.0.1": False)
    assert stack.status() == 1 and capsys.readouterr().out.splitlines()[-1].endswith("DOWN")


def test_status_lists_the_rest_address_of_the_stack_started_under_graphmesh_home(tmp_path, monkeypatch, capsys):
    """A fresh user's trial: a stack on moved ports, and `graphmesh status` with only GRAPHMESH_HOME set
    listed the default REST port, another stack's console. ``up`` records the REST port with the addresses."""
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    for key in ("GRAPHMESH_GATEWAY_ADDR", "GRAPHMESH_GATEWAY_REST__PORT", "GRAPHMESH_GATEWAY_METRICS_PORT"):
        monkeypatch.setenv(key, "unset")
        monkeypatch.delenv(key)
    stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:54051", "GRAPHMESH_GATEWAY_REST__PORT": "12080",
                            "GRAPHMESH_GATEWAY_PORT": "54051", "GRAPHMESH_GATEWAY_METRICS_PORT": "55051"})
    # the metrics port too: a trial's `config show` listed metrics_port = -1 for a stack serving it on port + 1000
    assert stack.recorded_addresses() == {"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:54051", "GRAPHMESH_GATEWAY_METRICS_PORT": "55051",
                                          "GRAPHMESH_GATEWAY_REST__PORT": "12080"}
    stack.use_stack_addresses()
    monkeypatch.setattr(stack, "check_health", lambda address: True)
    monkeypatch.setattr(stack, "port_in_use", lambda port, host="127.0.0.1": port == 12080)
    assert stack.status() == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["gateway", "REST", "http://127.0.0.1:12080", "SERVING"]


def test_config_show_names_the_addresses_up_recorded(tmp_path, monkeypatch, capsys):
    """`graphmesh config show` reports the environment's settings; a stack on moved ports showed the default
    gateway address there although every other command used the recorded one. The recorded ones are listed."""
    from services.cli import config_cmd

    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "unset")
    monkeypatch.delenv("GRAPHMESH_GATEWAY_ADDR")
    args = config_cmd.argparse.Namespace(service=["addresses"], json=False)
    assert config_cmd.cmd_config(args) == 0
    assert "Recorded by `graphmesh up`" not in capsys.readouterr().out  # nothing started here
    stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:54051", "GRAPHMESH_JUDGE_ADDR": "127.0.0.1:54057"})
    monkeypatch.setenv("GRAPHMESH_JUDGE_ADDR", "10.0.0.5:50057")  # the environment's own: not listed as recorded
    assert config_cmd.cmd_config(args) == 0
    out = capsys.readouterr().out
    assert "  GRAPHMESH_GATEWAY_ADDR = 127.0.0.1:54051" in out and "GRAPHMESH_JUDGE_ADDR = 127.0.0.1:54057" not in out


def test_mcp_says_which_gateway_it_reaches_and_why(tmp_path, monkeypatch):
    """A trial's MCP client started `graphmesh mcp` with no GRAPHMESH_HOME, and its assistant listed another
    user's stack on the default ports without a word: the default is named as such, with how to point elsewhere."""
    monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "unset")
    monkeypatch.delenv("GRAPHMESH_GATEWAY_ADDR")
    default = stack.gateway_origin(from_environment=False)
    assert "the default address: no stack was started under" in default and str(tmp_path) in default
    assert "GRAPHMESH_HOME" in default
    stack._write_addresses({"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:54051"})
    stack.use_stack_addresses()
    assert stack.gateway_origin(from_environment=False) == \
        f"gateway 127.0.0.1:54051, the stack `graphmesh up` started under {tmp_path.resolve()}"
    assert stack.gateway_origin(from_environment=True) == "gateway 127.0.0.1:54051 (GRAPHMESH_GATEWAY_ADDR)"


def test_an_up_whose_services_fail_to_start_stops_only_those_it_started(tmp_path, monkeypatch, capsys):
    """A trial killed retriever_pg and ran `graphmesh up` again; retriever_pg's port was taken, and the
    failed up stopped the gateway and every other running service."""
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setenv("GRAPHMESH_HOME", str(tmp_path))
        monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://127.0.0.1:1/external")
        monkeypatch.setenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI", "bolt://127.0.0.1:1")  # external: nothing to start
        recorded = {"gateway": running.pid, "retriever_pg": 2**22 + 1}  # a live gateway, a killed retriever_pg
        (tmp_path / "pids.json").write_text(json.dumps(recorded))
        (tmp_path / "addresses.json").write_text('{"GRAPHMESH_GATEWAY_ADDR": "127.0.0.1:53051"}')

        def failing(env, pids, timeout=180.0):
            pids["retriever_pg"] = started.pid
            raise RuntimeError("retriever_pg exited")

        monkeypatch.setattr(stack, "start_services", failing)
        assert stack.up(detach=True) == 1
        assert started.wait(timeout=30) is not None  # what this up started is stopped
        assert running.poll() is None  # the gateway of the running stack is not
        assert json.loads((tmp_path / "pids.json").read_text()) == recorded
        assert (tmp_path / "addresses.json").exists()  # the other commands still find the stack
        assert "retriever_pg exited" in capsys.readouterr().err
    finally:
        for proc in (running, started):
            proc.kill()
            proc.wait()
