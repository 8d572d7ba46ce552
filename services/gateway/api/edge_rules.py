"""Rules the REST edge applies before transcoding, as pure functions (no
aiohttp): the Host allow-list against DNS rebinding, the cross-site write
rules against CSRF, the media type of unsafe requests, the deadline
headers, and the headers those rules read sent only once.

They follow what local servers adopted after their own reports: Ollama and
Jupyter refuse a Host that is not the machine's own (a rebinding page
reaches 127.0.0.1 under the attacker's name), and Django refuses an unsafe
request whose Origin is not trusted. A browser can send a cross-site POST
without a CORS preflight only as a "simple" request (text/plain, a form
encoding), so requiring ``application/json`` on unsafe methods closes the
form and ``fetch(..., {mode: "no-cors"})`` routes even before the Origin
check.
"""
from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Methods that change state: they must carry JSON and come from an allowed origin.
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Host names always allowed: the loopback names (any IP literal is allowed too).
LOOPBACK_NAMES = ("localhost",)
#: Largest deadline a header may ask for (seconds): one day.
MAX_TIMEOUT_SECONDS = 86_400.0
#: X-Timeout-Seconds as the OpenAPI document declares it (request_timeout's bounds).
TIMEOUT_HEADER = {"name": "X-Timeout-Seconds", "in": "header", "required": False,
                  "schema": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": MAX_TIMEOUT_SECONDS},
                  "description": "deadline of the call in seconds, more than 0 and at most one day (also accepted: grpc-timeout)"}
#: gRPC's timeout units (PROTOCOL-HTTP2.md, "Timeout"), as seconds.
_GRPC_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: HTTP status, google.rpc code name, message,
    and the field (header) at fault for a 400."""

    status: int
    code: str
    message: str
    field: str = ""


_HOST_CHARS = re.compile(r"^[a-z0-9._-]+$")


def host_name(host_header: str) -> str:
    """The host part of a Host header, lower-cased, without port, trailing
    dot or the brackets of an IPv6 literal ("[::1]:8080" -> "::1",
    "localhost." -> "localhost"); "" when malformed (a port that is not
    digits, characters no host name has: "localhost:8080@evil.com")."""
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1:] if end > 0 else ""
        if end <= 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return ""
        return value[1:end]
    if value.count(":") > 1:  # a bare IPv6 literal, no port
        return value if _is_ip(value) else ""
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return ""
    name = name[:-1] if name.endswith(".") else name
    return name if _HOST_CHARS.match(name) else ""


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host_header: str | None, allowed: Iterable[str]) -> bool:
    """Whether ``host_header`` names this server: an IP literal (a rebinding
    page can only carry its own DNS name), ``localhost`` or a name under
    ``.localhost``, or one of ``allowed`` (exact names, ``.example.com`` for
    the domain and its subdomains, ``*`` for any). A request without Host
    (HTTP/1.0) is allowed: browsers always send one."""
    if host_header is None:
        return True
    name = host_name(host_header)
    if not name:
        return False
    if _is_ip(name) or name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    for entry in allowed:
        entry = entry.strip().lower()
        if entry == "*" or entry == name or (entry.startswith(".") and (name.endswith(entry) or name == entry[1:])):
            return True
    return False


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


#: Headers the edge's rules read that a request may carry only once: a second
#: Origin after an allowed one must not pass unseen (RFC 6454 section 7: one
#: Origin; Fetch sends one Sec-Fetch-Site), nor two deadlines or media types.
SINGLE_HEADERS = ("Origin", "Sec-Fetch-Site", "Content-Type", "X-Timeout-Seconds", "grpc-timeout")


def repeated_header_refusal(headers: Mapping[str, str]) -> Refusal | None:
    """400 INVALID_ARGUMENT naming the first of SINGLE_HEADERS that
    ``headers`` (a multidict with ``getall``, as aiohttp's request headers)
    carries more than once, or None."""
    getall = getattr(headers, "getall", None)
    if getall is None:
        return None
    for name in SINGLE_HEADERS:
        if len(getall(name, [])) > 1:
            return Refusal(400, "INVALID_ARGUMENT", f"{name} is sent more than once; send it once", field=name)
    return None


def normalised_origin(origin: str) -> str:
    """An Origin as the allow-list compares it: trimmed, lower case, no trailing slash ("*" stays "*")."""
    return origin.strip().lower().rstrip("/")


def cross_site_refusal(method: str, headers: Mapping[str, str], cors_origins: Iterable[str]) -> Refusal | None:
    """The refusal of an unsafe request sent by another site, or None.

    An unsafe request (UNSAFE_METHODS) is cross-site when its Origin is
    neither this server's own origin (scheme and Host of the request) nor in
    ``cors_origins`` ("*" allows any), or when it has no Origin but says
    ``Sec-Fetch-Site: cross-site`` (or an Origin of "null": sandboxed
    frames, file: pages). Callers that are not browsers send neither header
    and are not affected.
    """
    if method.upper() not in UNSAFE_METHODS:
        return None
    allowed = {normalised_origin(o) for o in cors_origins}
    origin = headers.get("Origin")
    fetch_site = (headers.get("Sec-Fetch-Site") or "").lower()
    if origin is not None:
        normalised = normalised_origin(origin)
        own = {f"{scheme}://{headers.get('Host', '').lower()}" for scheme in ("http", "https")}
        if normalised != "null" and ("*" in allowed or normalised in allowed or normalised in own):
            return None
        return Refusal(403, "PERMISSION_DENIED",
                       f"cross-site request refused: origin {origin!r} is not this server's and not in the CORS "
                       "allow-list (GRAPHMESH_GATEWAY_REST__CORS_ORIGINS)")
    if fetch_site == "cross-site":
        referer = _origin_of(headers.get("Referer", ""))
        if referer and ("*" in allowed or referer in allowed):
            return None
        return Refusal(403, "PERMISSION_DENIED",
                       "cross-site request refused (Sec-Fetch-Site: cross-site without an allowed Origin)")
    return None


def media_type_refusal(method: str, content_type: str | None) -> Refusal | None:
    """415 for an unsafe request whose Content-Type is not
    ``application/json`` (parameters allowed; a charset only when it is
    UTF-8, the one JSON is written in, RFC 8259 section 8.1): text/plain
    and the form encodings are what a cross-site page can send without a
    preflight. DELETE without a body (no Content-Type) is allowed."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    media, _, parameters = (content_type or "").partition(";")
    media = media.strip().lower()
    charset = next((value.strip().strip('"').lower() for name, _, value in (p.partition("=") for p in parameters.split(";"))
                    if name.strip().lower() == "charset"), "utf-8")
    if media == "application/json" and charset not in ("utf-8", "utf8"):  # RFC 8259: JSON is UTF-8; read as such it would garble
        return Refusal(415, "INVALID_ARGUMENT", f"a JSON body must be UTF-8 (got charset={charset[:40]})", "Content-Type")
    if media == "application/json" or (method.upper() == "DELETE" and not media):
        return None
    shown = media or "none"
    return Refusal(415, "INVALID_ARGUMENT",
                   f"Content-Type must be application/json for {method.upper()} (got {shown})", "Content-Type")


def request_timeout(headers: Mapping[str, str]) -> tuple[float | None, Refusal | None]:
    """The deadline (seconds) a request asks for, from ``grpc-timeout``
    (gRPC's "10S" / "500m" form) or ``X-Timeout-Seconds`` (a number of
    seconds): (None, None) when neither is set, meaning the gateway's
    default deadline. A value that is not a positive finite number of at
    most MAX_TIMEOUT_SECONDS seconds (inf, nan, 0, -1, "soon") is a 400
    naming the header."""
    for header in ("grpc-timeout", "X-Timeout-Seconds"):
        value = headers.get(header)
        if value is None:
            continue
        seconds = _parse_timeout(value.strip(), grpc_form=header == "grpc-timeout")
        if seconds is None or not (0 < seconds <= MAX_TIMEOUT_SECONDS):
            form = "a positive number with a unit (H, M, S, m, u, n)" if header == "grpc-timeout" else "a positive number of seconds"
            return None, Refusal(400, "INVALID_ARGUMENT",
                                 f"must be {form}, at most {MAX_TIMEOUT_SECONDS:.0f} seconds (got {value[:40]!r})", header)
        return seconds, None
    return None, None


def _parse_timeout(value: str, grpc_form: bool) -> float | None:
    scale = 1.0
    if grpc_form:  # PROTOCOL-HTTP2.md: TimeoutValue (up to 8 digits) then TimeoutUnit
        if value[-1:] not in _GRPC_TIMEOUT_UNITS or not value[:-1].isdigit() or len(value) > 9:
            return None
        scale, value = _GRPC_TIMEOUT_UNITS[value[-1]], value[:-1]
    elif not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?", value):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number * scale if math.isfinite(number) else None


#: The message of a call that ran out of its own deadline before the gateway answered (REST and OpenAI routes alike).
DEADLINE_MESSAGE = ("the request's deadline passed before an answer was ready (X-Timeout-Seconds, or the default "
                    "deadline); retry with a longer one")
