"""API keys (salted scrypt hashes), key extraction, the token bucket and
redaction: services/gateway/api/auth.py and services/cli/keys.py."""
from __future__ import annotations

import logging

import pytest

from services.cli import keys as cli_keys
from services.cli.keys import create_key
from services.gateway.api import auth
from services.common.redaction import KeyRedactingFilter, redact
from services.gateway.api.auth import KeyStore, TokenBucketLimiter, extract_key, parse_line, retry_after

pytestmark = pytest.mark.unit


def test_created_key_verifies_against_its_stored_line_only():
    key, line = create_key("alice")
    other_key, other_line = create_key("alice")
    assert key != other_key and line != other_line  # fresh secret and salt each time
    assert key not in line and key.split("_", 2)[2] not in line  # only the hash is stored
    store = KeyStore([parse_line(line)])
    assert store.verify(key) == "alice"
    assert store.verify(other_key) is None  # same name, other key
    record = parse_line(line)
    assert (record.n, record.r, record.p) == (auth.SCRYPT_N, auth.SCRYPT_R, auth.SCRYPT_P) and len(record.salt) == auth.SALT_BYTES


def test_wrong_or_malformed_keys_are_refused():
    key, line = create_key("bob")
    store = KeyStore([parse_line(line)])
    key_id = key.split("_")[1]
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    for bad in (None, "", "bob", tampered, f"gmk_{key_id}_short", "gmk_00000000_" + "x" * 43, key + "x", " " + key):
        assert store.verify(bad) is None, bad


def test_scrypt_runs_once_per_key_then_the_verification_is_remembered(monkeypatch):
    key, line = create_key("carol")
    store = KeyStore([parse_line(line)])
    calls = []
    real = auth._scrypt
    monkeypatch.setattr(auth, "_scrypt", lambda *a: calls.append(1) or real(*a))
    assert store.verify(key) == "carol" and store.verify(key) == "carol"
    assert len(calls) == 1
    assert store.verify(key[:-1] + ("A" if key[-1] != "A" else "B")) is None and len(calls) == 2  # failures are not remembered


def test_store_loads_from_file_and_environment_and_names_a_bad_line(tmp_path):
    k1, l1 = create_key("from-file")
    k2, l2 = create_key("from-env")
    k3, l3 = create_key("from-env-2")
    path = tmp_path / "keys"
    path.write_text(f"# GraphMesh keys\n\n{l1}\n")
    store = KeyStore.load(str(path), f"{l2},{l3}")
    assert len(store) == 3
    assert (store.verify(k1), store.verify(k2), store.verify(k3)) == ("from-file", "from-env", "from-env-2")
    path.write_text(f"{l1}\nnot-a-key-line\n")
    with pytest.raises(ValueError, match=r"keys: line 2"):
        KeyStore.load(str(path))
    with pytest.raises(ValueError, match="duplicate key id"):
        KeyStore([parse_line(l1), parse_line(l1)])


def test_create_key_rejects_names_that_would_break_the_stored_line():
    for bad in ("", "a:b", "has space", "-lead", "x" * 65):
        with pytest.raises(ValueError, match="key name"):
            create_key(bad)


def test_key_file_is_created_private_and_appended(tmp_path):
    path = tmp_path / "api-keys"
    _, l1 = create_key("a")
    _, l2 = create_key("b")
    cli_keys.append_line(path, l1)
    cli_keys.append_line(path, l2)
    assert path.read_text().splitlines() == [l1, l2]
    assert path.stat().st_mode & 0o777 == 0o600


def test_extract_key_reads_bearer_or_x_api_key_in_any_case():
    assert extract_key([("authorization", "Bearer abc")]) == "abc"
    assert extract_key([("Authorization", b"bearer   abc  ")]) == "abc"
    assert extract_key([("X-API-Key", " xyz ")]) == "xyz"
    assert extract_key([("x-api-key", "xyz"), ("authorization", "Bearer abc")]) == "abc"  # bearer preferred
    assert extract_key([("authorization", "Basic dXNlcg==")]) is None
    assert extract_key([("user-agent", "grpc")]) is None and extract_key([]) is None


def test_token_bucket_admits_a_burst_then_says_how_long_to_wait():
    now = [100.0]
    limiter = TokenBucketLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.acquire("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("k") == pytest.approx(0.5)  # one token at 2/s
    assert limiter.acquire("other") == 0.0  # buckets are per key
    now[0] += 0.5
    assert limiter.acquire("k") == 0.0
    assert limiter.acquire("k") == pytest.approx(0.5)
    now[0] += 100
    assert [limiter.acquire("k") for _ in range(4)][-1] > 0  # refills to the burst, not beyond
    with pytest.raises(ValueError):
        TokenBucketLimiter(rate=0)


def test_retry_after_is_whole_seconds_rounded_up():
    assert [retry_after(s) for s in (0.01, 0.5, 1.0, 1.2, 7.9)] == ["1", "1", "1", "2", "8"]


def test_redaction_masks_keys_and_header_values_in_text_and_log_records(caplog):
    key, _ = create_key("dave")
    secret = key.split("_", 2)[2]
    text = f"call with {key} and authorization: Bearer {key} and x-api-key={secret}"
    clean = redact(text)
    assert secret not in clean and "gmk_" + key.split("_")[1] + "_***" in clean
    logger = logging.getLogger("test.redaction")
    handler_filter = KeyRedactingFilter()
    logger.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="test.redaction"):
            logger.info("client sent %s", key)
    finally:
        logger.removeFilter(handler_filter)
    assert "client sent gmk_" in caplog.text and secret not in caplog.text


def test_a_key_removed_from_or_added_to_the_keys_file_counts_without_a_restart(tmp_path):
    """A trial revoked a key by deleting its line and added another: the revoked one still worked and the new
    one was refused until the gateway restarted."""
    from services.gateway.api.auth import KeyStore, new_key

    old_key, old = new_key("mcp-assistant")
    new, added = new_key("web-tool")
    file = tmp_path / "keys"
    file.write_text(old.line() + "\n", encoding="utf-8")
    store = KeyStore.load(str(file))
    assert store.verify(old_key) == "mcp-assistant" and store.verify(new) is None
    file.write_text("# mcp-assistant revoked\n" + added.line() + "\n", encoding="utf-8")
    assert store.verify(old_key) is None  # remembered before, refused now
    assert store.verify(new) == "web-tool"
    file.write_text("not a key line\n", encoding="utf-8")  # a broken edit keeps the keys read before
    assert store.verify(new) == "web-tool"
