"""Settings shared by every service, read from environment variables.

Each service subclasses ``ServiceSettings`` with its own prefix, e.g.
``GRAPHMESH_GATEWAY_PORT``. Addresses of the other services are shared
(``GRAPHMESH_<SERVICE>_ADDR``) so one environment configures the whole mesh.

Related fields form typed groups (pydantic sub-models, defined once), read
from ``<PREFIX><GROUP>__<FIELD>``: e.g. ``GRAPHMESH_GATEWAY_LLM__MODEL`` is
``GatewaySettings().llm.model``. A group can also be given whole as JSON
(``GRAPHMESH_GATEWAY_LLM='{"model": "qwen"}'``). The flat names of the
previous release (``GRAPHMESH_GATEWAY_LLM_MODEL``) still work, with a
``DeprecatedSettingWarning`` naming the new variable; each class lists them
in ``deprecated_fields`` (docs/configuration.md).

Besides the environment, values come (lower priority) from an env file named
by ``GRAPHMESH_ENV_FILE`` and from a directory of secret files named by
``GRAPHMESH_SECRETS_DIR`` (one file per variable, named like the variable,
e.g. ``/run/secrets/GRAPHMESH_GATEWAY_LLM__API_KEY``). Both are off unless set.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

if TYPE_CHECKING:
    from services.common.llm import LlmConfig

# Default ports of the local stack: gRPC port, metrics port is +1000.
DEFAULT_PORTS = {
    "gateway": 50051,
    "expander": 50052,
    "retriever_pg": 50053,
    "retriever_graph": 50054,
    "reranker": 50055,
    "fuser": 50056,
    "judge": 50057,
}
REST_DEFAULT_PORT = 8080

#: Separator between a group and its field in variable names.
NESTED_DELIMITER = "__"
#: Variable naming a dotenv file read by every settings class ("" = none).
ENV_FILE_VARIABLE = "GRAPHMESH_ENV_FILE"
#: Variable naming a directory of secret files ("" = none).
SECRETS_DIR_VARIABLE = "GRAPHMESH_SECRETS_DIR"


class DeprecatedSettingWarning(FutureWarning):
    """A setting was given under its flat name of the previous release.

    A FutureWarning, so it is shown by default (DeprecationWarning is hidden
    outside ``__main__``). The flat names are removed in the next release."""


def is_group(field: FieldInfo) -> bool:
    """Whether a settings field is a group: its annotation is a pydantic
    model class (not a dict or list of models)."""
    annotation = field.annotation
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _nested_set(data: dict[str, Any], path: str, value: Any) -> None:
    *groups, leaf = path.split(".")
    for group in groups:
        current = data.get(group)
        if isinstance(current, BaseModel):
            current = current.model_dump()
        if not isinstance(current, dict):
            current = {}
        data[group] = current
        data = current
    data[leaf] = value


def _nested_has(data: Mapping[str, Any], path: str) -> bool:
    *groups, leaf = path.split(".")
    for group in groups:
        data = data.get(group)
        if isinstance(data, BaseModel):
            return leaf in data.model_fields_set
        if not isinstance(data, Mapping):
            return False
    return leaf in data


class DeprecatedEnvSource(PydanticBaseSettingsSource):
    """Values of the flat variable names of the previous release
    (``settings_cls.deprecated_fields``), nested under their new group, each
    with a DeprecatedSettingWarning naming the old and the new variable.

    It ranks below the environment source, so where both names are set the
    new one wins (and the warning says the old one is ignored).

    Attributes:
        origins: new dotted path -> old variable name, for each value found.
    """

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None) -> None:
        super().__init__(settings_cls)
        self.environ = {k.lower(): v for k, v in (os.environ if environ is None else environ).items()}
        self.origins: dict[str, str] = {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused (values are looked up by old name in ``__call__``)."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """The nested values of the deprecated variables that are set."""
        cls = self.settings_cls
        prefix = cls.model_config.get("env_prefix", "")
        out: dict[str, Any] = {}
        for old_field, path in getattr(cls, "deprecated_fields", {}).items():
            old_name = (prefix + old_field).upper()
            raw = self.environ.get(old_name.lower())
            if raw is None:
                continue
            new_name = env_name(cls, path)
            if new_name.lower() in self.environ:
                warnings.warn(f"{old_name} is deprecated and ignored: {new_name} is set (remove {old_name})",
                              DeprecatedSettingWarning, stacklevel=2)
                continue
            warnings.warn(f"{old_name} is deprecated: rename it to {new_name} (the old name goes in the next release)",
                          DeprecatedSettingWarning, stacklevel=2)
            leaf = group_field(cls, path)
            value: Any = raw
            if leaf is not None and self.field_is_complex(leaf):
                value = self.decode_complex_value(path, leaf, raw)
            _nested_set(out, path, value)
            self.origins[path] = old_name
        return out


class SecretFilesSource(EnvSettingsSource):
    """Values from a directory of secret files (``GRAPHMESH_SECRETS_DIR``,
    e.g. a Kubernetes secret volume or /run/secrets): a file named like a
    variable (any case, e.g. ``GRAPHMESH_GATEWAY_LLM__API_KEY``) holds its
    value, trailing newline stripped. Nested names work as in the
    environment. No directory (or a missing one) = no values."""

    def __init__(self, settings_cls: type[BaseSettings], secrets_dir: str | Path | None) -> None:
        self.secrets_dir = Path(secrets_dir) if secrets_dir else None
        super().__init__(settings_cls, case_sensitive=False)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        if self.secrets_dir is None or not self.secrets_dir.is_dir():
            return {}
        return {p.name.lower(): p.read_text(encoding="utf-8").rstrip("\r\n")
                for p in self.secrets_dir.iterdir() if p.is_file() and not p.name.startswith(".")}


class GraphMeshSettings(BaseSettings):
    """Base of every settings class: nested groups (``__``), the deprecated
    flat names of ``deprecated_fields``, and the optional env file and
    secrets directory.

    Class attributes:
        deprecated_fields: old flat field name (without the env prefix, e.g.
            "llm_base_url") -> new dotted path ("llm.base_url"). The old name
            is accepted from the environment and as a keyword argument, with
            a DeprecatedSettingWarning.
    """

    model_config = SettingsConfigDict(extra="ignore", env_nested_delimiter=NESTED_DELIMITER)

    deprecated_fields: ClassVar[dict[str, str]] = {}

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Sources by priority: keyword arguments, environment, deprecated
        flat names, GRAPHMESH_ENV_FILE, GRAPHMESH_SECRETS_DIR, then defaults."""
        env_file = os.environ.get(ENV_FILE_VARIABLE, "")
        if env_file:
            dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=env_file)
        secrets = SecretFilesSource(settings_cls, os.environ.get(SECRETS_DIR_VARIABLE, ""))
        return init_settings, env_settings, DeprecatedEnvSource(settings_cls), dotenv_settings, secrets

    @model_validator(mode="before")
    @classmethod
    def _deprecated_keywords(cls, data: Any) -> Any:
        """Old flat keyword arguments (``llm_base_url=...``) move to their
        group, with a DeprecatedSettingWarning."""
        if not isinstance(data, dict) or not cls.deprecated_fields:
            return data
        old = [key for key in data if key in cls.deprecated_fields]
        if not old:
            return data
        data = dict(data)
        for key in old:
            path = cls.deprecated_fields[key]
            value = data.pop(key)
            if _nested_has(data, path):
                warnings.warn(f"{cls.__name__}({key}=...) is deprecated and ignored: {path} is given",
                              DeprecatedSettingWarning, stacklevel=2)
                continue
            warnings.warn(f"{cls.__name__}({key}=...) is deprecated: use {path.split('.')[0]}="
                          f"{{{path.split('.', 1)[1]!r}: ...}} (variable {env_name(cls, path)})",
                          DeprecatedSettingWarning, stacklevel=2)
            _nested_set(data, path, value)
        return data


def nested_update(base: Mapping[str, Any], *updates: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with each of ``updates`` merged in, recursively
    where both sides hold a mapping: e.g. keyword arguments of a settings
    class with defaults for some fields of a group,
    nested_update({"rest": {"port": 0}}, {"rest": {"max_queued": 1}}) ->
    {"rest": {"port": 0, "max_queued": 1}}. Other values are replaced."""
    out = dict(base)
    for update in updates:
        for key, value in update.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = nested_update(out[key], value)
            else:
                out[key] = value
    return out


def env_name(cls: type[BaseSettings], path: str) -> str:
    """The variable that sets dotted field ``path`` of settings class
    ``cls``: e.g. (GatewaySettings, "llm.model") ->
    "GRAPHMESH_GATEWAY_LLM__MODEL"; a field with a validation alias (e.g.
    ServiceSettings.user_dict) -> its first alias.

    Raises:
        KeyError: ``path``'s first part is not a field of ``cls``.
    """
    top = path.split(".")[0]
    field = cls.model_fields[top]
    alias = field.validation_alias
    if "." not in path and isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
        return alias.choices[0].upper()
    if "." not in path and isinstance(alias, str):
        return alias.upper()
    return (cls.model_config.get("env_prefix", "") + path.replace(".", NESTED_DELIMITER)).upper()


def group_field(cls: type[BaseModel], path: str) -> FieldInfo | None:
    """The FieldInfo of dotted ``path`` in ``cls`` (through groups), None
    when there is no such field."""
    model: Any = cls
    field = None
    for part in path.split("."):
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        model = field.annotation
    return field


class LlmSettings(BaseModel):
    """An OpenAI-compatible chat endpoint (group ``llm``): the fields of
    services.common.llm.LlmConfig, one for one; ``config()`` builds it. Each
    service subclasses it for its own defaults and extra fields.

    Attributes:
        base_url: base URL ending in /v1; "" = no LLM.
        api_key: bearer token ("none" for local servers); a secret.
        model: model name sent in requests ("" = the server's own).
        timeout: seconds per call (all attempts and backoff together).
        max_retries: retries of a 429/5xx/connection failure.
        backoff: first backoff (seconds, doubled per retry).
        temperature: sampling temperature (0 = greedy, reproducible).
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = ""
    api_key: str = "none"
    model: str = ""
    timeout: float = Field(60.0, gt=0.0)
    max_retries: int = Field(2, ge=0, le=10)
    backoff: float = Field(0.5, ge=0.0)
    temperature: float = Field(0.0, ge=0.0, le=2.0)

    @property
    def enabled(self) -> bool:
        """True when an endpoint is configured."""
        return bool(self.base_url)

    def config(self) -> LlmConfig:
        """The services.common.llm.LlmConfig of these settings (the fields
        LlmConfig has; a subclass's extra fields are left out)."""
        from services.common.llm import LlmConfig

        return LlmConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(LlmConfig)})


def llm_deprecated_fields(*names: str) -> dict[str, str]:
    """Deprecated-name table entries of an llm group: {"llm_<name>":
    "llm.<name>"} for each of ``names``, the flat ``llm_*`` fields a service
    had in the previous release."""
    return {f"llm_{name}": f"llm.{name}" for name in names}


class WarmUpSettings(BaseModel):
    """Group ``readiness`` of every service (GRAPHMESH_<SERVICE>_READINESS__*):
    retries of the warm-up a service with a store or model runs before its
    health says SERVING (``services.common.server.Readiness``). Until it
    succeeds the service answers NOT_SERVING, and its other RPCs
    UNAVAILABLE (reason WARMING_UP).

    Attributes:
        attempts: most attempts; 0 = keep trying until one succeeds (a
            store that is still starting is waited for).
        backoff: seconds before the second attempt, doubled after each
            failure.
        max_backoff: longest wait between two attempts, seconds.
        timeout: seconds one attempt may take before it counts as failed.
    """

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(0, ge=0)
    backoff: float = Field(0.5, gt=0.0)
    max_backoff: float = Field(5.0, gt=0.0)
    timeout: float = Field(30.0, gt=0.0)


class ServiceSettings(GraphMeshSettings):

    """Bootstrap settings of one service.

    Attributes:
        host: interface the gRPC server binds (default 127.0.0.1).
        port: gRPC port; 0 picks a free one.
        metrics_port: Prometheus port; 0 picks a free one, -1 disables it.
        grace_seconds: how long in-flight RPCs may drain on SIGTERM (seconds).
        max_query_chars: longest accepted query (characters): a pasted case
            description runs to several thousand.
        max_concurrent_rpcs: RPCs one service runs at once; beyond it new
            calls get RESOURCE_EXHAUSTED at once (0 = no limit).
        max_concurrent_streams: HTTP/2 streams one client connection may
            hold open at once; further calls wait in the client for a slot.
        user_dict: path of the jieba user dictionary every tokenising
            process loads at start (env ``GRAPHMESH_USER_DICT``, shared by all
            services; see services.common.lexicon); "" = jieba's own.
        readiness: WarmUpSettings (group, GRAPHMESH_<SERVICE>_READINESS__<FIELD>):
            retries of the warm-up before SERVING.
    """

    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int = -1
    grace_seconds: float = 5.0
    max_query_chars: int = Field(10_000, ge=1)
    max_concurrent_rpcs: int = Field(256, ge=0)
    max_concurrent_streams: int = Field(100, ge=1)
    user_dict: str = Field("", validation_alias=AliasChoices("GRAPHMESH_USER_DICT"))
    readiness: WarmUpSettings = Field(default_factory=WarmUpSettings)


class TlsSettings(GraphMeshSettings):
    """Transport security of every service's gRPC port and of the channels
    between services (env prefix GRAPHMESH_TLS_, shared by all services).
    Off when ``cert_file`` is empty.

    Attributes:
        cert_file / key_file: PEM certificate chain and private key this
            process presents (as a server, and as a client under mTLS).
        ca_file: PEM CA bundle that signs the other services' certificates.
        client_auth: mTLS: servers require a client certificate signed by
            ``ca_file``, and clients present theirs.
        server_name: name to check in server certificates instead of the
            address's host (e.g. when services are reached by IP).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_TLS_")

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    client_auth: bool = False
    server_name: str = ""

    @property
    def enabled(self) -> bool:
        """Whether TLS is configured."""
        return bool(self.cert_file)


class TracingSettings(GraphMeshSettings):
    """Attributes:
    otlp_endpoint: OTLP/gRPC collector spans are exported to
        (``OTEL_EXPORTER_OTLP_ENDPOINT``, the standard variable, e.g.
        http://collector:4317); "" = no export (spans still give each
        request its trace id).
    """

    otlp_endpoint: str = Field("", validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"))


class MeshAddresses(GraphMeshSettings):
    """Addresses of every service, from GRAPHMESH_<SERVICE>_ADDR."""

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_")

    gateway_addr: str = f"127.0.0.1:{DEFAULT_PORTS['gateway']}"
    expander_addr: str = f"127.0.0.1:{DEFAULT_PORTS['expander']}"
    retriever_pg_addr: str = f"127.0.0.1:{DEFAULT_PORTS['retriever_pg']}"
    retriever_graph_addr: str = f"127.0.0.1:{DEFAULT_PORTS['retriever_graph']}"
    reranker_addr: str = f"127.0.0.1:{DEFAULT_PORTS['reranker']}"
    fuser_addr: str = f"127.0.0.1:{DEFAULT_PORTS['fuser']}"
    judge_addr: str = f"127.0.0.1:{DEFAULT_PORTS['judge']}"
