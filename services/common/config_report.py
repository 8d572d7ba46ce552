"""What ``graphmesh config show`` prints: every setting of every service,
its effective value and where the value came from, secrets redacted.

Pure logic (no gRPC, no network): the settings classes are read the way each
service reads them at start, from this process's environment (plus
GRAPHMESH_ENV_FILE and GRAPHMESH_SECRETS_DIR, services.common.settings).

A setting's source is one of:
    "default": nobody set it.
    "environment": an environment variable (``variable``).
    "deprecated environment": the variable's flat name of the previous
        release (``variable``), still read; ``rename_to`` names the new one.
    "env file": a line of the GRAPHMESH_ENV_FILE file.
    "secret file": a file of the GRAPHMESH_SECRETS_DIR directory.
"""
from __future__ import annotations

import importlib
import json
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, InitSettingsSource, SecretsSettingsSource

from services.common.settings import DeprecatedEnvSource, SecretFilesSource, env_name, is_group

#: Section name -> "module:class" of its settings, in the order shown. The
#: seven services, the local LLM server, then the settings every service
#: shares.
SECTIONS: dict[str, str] = {
    "gateway": "services.gateway.config:GatewaySettings",
    "expander": "services.expander.config:ExpanderSettings",
    "retriever_pg": "services.retriever_pg.config:RetrieverPgSettings",
    "retriever_graph": "services.retriever_graph.config:RetrieverGraphSettings",
    "reranker": "services.reranker.config:RerankerSettings",
    "fuser": "services.fuser.config:FuserSettings",
    "judge": "services.judge.config:JudgeSettings",
    "llm": "services.llm.server:LocalLlmSettings",
    "tls": "services.common.settings:TlsSettings",
    "mesh": "services.common.mesh_auth:MeshSettings",
    "tracing": "services.common.settings:TracingSettings",
    "addresses": "services.common.settings:MeshAddresses",
}

REDACTED = "***"
#: Leaf names whose values are secrets (``*_file`` paths are not).
_SECRET_NAME = re.compile(r"(^|_)(api_keys?|password|token|secret)$")
#: user:password@ in a URL or DSN, and password=... in a libpq DSN.
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]+@")
_DSN_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('[^']*'|\S+)", re.I)
#: A URL query parameter holding a secret (?api_key=..., &token=..., &sig=...).
_QUERY_SECRET = re.compile(r"([?&][\w.-]*(?:key|token|secret|password|passwd|sig|signature)[\w.-]*=)[^&#\s]+", re.I)


@dataclass(frozen=True, slots=True)
class Setting:
    """One effective setting.

    Attributes:
        path: dotted field path, e.g. "llm.base_url".
        value: effective value, JSON-compatible, secrets replaced by "***".
        source: "default", "environment", "deprecated environment",
            "env file" or "secret file" (module docstring).
        variable: the variable that set it, or for a default the one that
            would (e.g. "GRAPHMESH_GATEWAY_LLM__BASE_URL").
        rename_to: for a deprecated variable, its new name; else "".
        origin: the file of an env-file or secret-file value; else "".
    """

    path: str
    value: Any
    source: str
    variable: str
    rename_to: str = ""
    origin: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    """The settings of one section (a service, the local LLM or a shared
    group).

    Attributes:
        name: key of SECTIONS.
        settings_class: class name, e.g. "GatewaySettings".
        env_prefix: its variables' prefix ("" for classes with aliases only).
        settings: one Setting per leaf field (groups flattened); empty when
            ``error`` is set.
        error: why the settings do not validate (what the service would
            fail to start with); "" when they do.
    """

    name: str
    settings_class: str
    env_prefix: str
    settings: tuple[Setting, ...]
    error: str = ""


def settings_class(name: str) -> type[BaseSettings]:
    """The settings class of section ``name``.

    Raises:
        KeyError: ``name`` is not a key of SECTIONS.
    """
    module, _, attr = SECTIONS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def is_secret(path: str) -> bool:
    """Whether the field at dotted ``path`` holds a secret (API keys,
    passwords, tokens), judged by its last part."""
    return bool(_SECRET_NAME.search(path.rsplit(".", 1)[-1]))


def redact_value(path: str, value: Any, default: Any) -> Any:
    """``value`` fit to print: "***" for a secret field's value that is set
    and not the default; passwords inside URLs and DSNs, and URL query
    parameters named like a key, token or signature, masked in any string; lists and dicts redacted element-wise by the same rule."""
    if is_secret(path):
        return value if value in ("", None) or value == default else REDACTED
    if isinstance(value, str):
        value = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, value)
        return _DSN_PASSWORD.sub(lambda m: m.group(1) + REDACTED, _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", value))
    if isinstance(value, list):
        return [redact_value("", v, None) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(str(k), v, None) for k, v in value.items()}
    return value


def _leaves(cls: type[BaseModel]) -> list[tuple[str, Any]]:
    """(dotted path, default) of each leaf field, groups flattened."""
    out = []
    for name, field in cls.model_fields.items():
        if is_group(field):
            defaults = field.get_default(call_default_factory=True)
            for sub in field.annotation.model_fields:
                out.append((f"{name}.{sub}", getattr(defaults, sub)))
        else:
            out.append((name, field.get_default(call_default_factory=True)))
    return out


def _has(data: Mapping[str, Any], path: str, aliases: Iterable[str] = ()) -> bool:
    top, _, sub = path.partition(".")
    keys = [top, *aliases]
    for key in keys:
        for candidate in (key, key.lower()):
            if candidate in data:
                value = data[candidate]
                return not sub or (isinstance(value, Mapping) and sub in value)
    return False


def _aliases(cls: type[BaseSettings], top: str) -> list[str]:
    alias = cls.model_fields[top].validation_alias
    choices = getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else [])
    return [c for c in choices if isinstance(c, str)]


def _variable_in(env_vars: Mapping[str, Any], cls: type[BaseSettings], path: str) -> str:
    """The variable of ``env_vars`` that gave ``path``: its own name, or the
    whole group's (JSON), or a nested name below it."""
    own = env_name(cls, path)
    candidates = [own] if "." not in path else [own, env_name(cls, path.split(".")[0])]
    for name in candidates:
        if name.lower() in env_vars or name in env_vars:
            return name
    below = sorted(k for k in env_vars if k.lower().startswith(own.lower() + "__"))
    return f"{own}__*" if below else own


def _sources(cls: type[BaseSettings]) -> tuple[Any, ...]:
    """The class's own sources, by priority, without keyword arguments."""
    return cls.settings_customise_sources(cls, InitSettingsSource(cls, init_kwargs={}), EnvSettingsSource(cls),
                                          DotEnvSettingsSource(cls), SecretsSettingsSource(cls))


def describe(name: str) -> Section:
    """The effective settings of section ``name``, with sources, redacted.

    Deprecated variables are reported (source "deprecated environment"),
    not warned about.

    Raises:
        KeyError: ``name`` is not a key of SECTIONS.
    """
    cls = settings_class(name)
    prefix = cls.model_config.get("env_prefix", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            effective = cls().model_dump(mode="json")
        except ValidationError as err:
            return Section(name, cls.__name__, prefix, (), error=str(err))
        provided = [(source, source()) for source in _sources(cls) if not isinstance(source, InitSettingsSource)]
    out = []
    for path, default in _leaves(cls):
        value: Any = effective
        for part in path.split("."):
            value = value[part]
        default_json = default.model_dump(mode="json") if isinstance(default, BaseModel) else default
        entry = Setting(path, redact_value(path, value, default_json), "default", env_name(cls, path))
        for source, data in provided:
            if not _has(data, path, _aliases(cls, path.split(".")[0])):
                continue
            if isinstance(source, DeprecatedEnvSource):
                entry = Setting(path, entry.value, "deprecated environment", source.origins.get(path, ""),
                                rename_to=env_name(cls, path))
            elif isinstance(source, SecretFilesSource):
                variable = _variable_in(source.env_vars, cls, path)
                entry = Setting(path, entry.value, "secret file", variable, origin=str(source.secrets_dir))
            elif isinstance(source, DotEnvSettingsSource):
                env_file = source.env_file
                entry = Setting(path, entry.value, "env file", _variable_in(source.env_vars, cls, path),
                                origin=str(env_file if not isinstance(env_file, (list, tuple)) else env_file[0]))
            elif isinstance(source, EnvSettingsSource):
                entry = Setting(path, entry.value, "environment", _variable_in(source.env_vars, cls, path))
            else:
                entry = Setting(path, entry.value, type(source).__name__, entry.variable)
            break
        out.append(entry)
    return Section(name, cls.__name__, prefix, tuple(out))


def describe_all(names: Iterable[str] | None = None) -> list[Section]:
    """``describe`` of each of ``names`` (default: every section, in
    SECTIONS order).

    Raises:
        KeyError: a name is not a key of SECTIONS.
    """
    return [describe(n) for n in (SECTIONS if names is None else names)]


def _short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) and value == REDACTED else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(sections: Iterable[Section]) -> str:
    """Human-readable report: a header per section, then one line per
    setting, ``path = value  <- source``. Long values are shortened (the
    JSON report has them whole)."""
    lines = []
    for section in sections:
        prefix = f" ({section.env_prefix}*)" if section.env_prefix else ""
        lines.append(f"[{section.name}] {section.settings_class}{prefix}")
        if section.error:
            lines.append(f"  INVALID: {section.error}")
        for s in section.settings:
            if s.source == "default":
                where = f"default ({s.variable})"
            elif s.source == "deprecated environment":
                where = f"env {s.variable} (deprecated: rename to {s.rename_to})"
            elif s.source == "environment":
                where = f"env {s.variable}"
            else:
                where = f"{s.source} {s.origin}: {s.variable}"
            lines.append(f"  {s.path} = {_short(s.value)}  <- {where}")
        lines.append("")
    return "\n".join(lines)


def render_json(sections: Iterable[Section]) -> str:
    """JSON report: {section: {"class", "env_prefix", "error", "settings":
    {path: {"value", "source", "variable", "rename_to", "origin"}}}}."""
    out = {}
    for section in sections:
        out[section.name] = {
            "class": section.settings_class, "env_prefix": section.env_prefix, "error": section.error,
            "settings": {s.path: {k: v for k, v in asdict(s).items() if k != "path"} for s in section.settings},
        }
    return json.dumps(out, ensure_ascii=False, indent=2)
