"""Shared client of an OpenAI-compatible chat endpoint (llama.cpp server,
vLLM, Ollama, DeepSeek, DashScope: configuration only).

Every call has a timeout (seconds, per attempt and overall); answers 429
(rate limit) and 5xx, and connection failures, are retried with exponential
backoff a bounded number of times, then ``LlmError`` is raised so the caller
can degrade. Cancelling the awaiting task (a client that cancels its RPC)
closes the HTTP request, which makes llama.cpp stop generating.
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import httpx
from prometheus_client import Counter, Histogram

log = logging.getLogger("graphmesh.llm")

LLM_CALLS = Counter("graphmesh_llm_calls_total", "LLM calls by purpose and outcome.", ("purpose", "outcome"))
LLM_RETRIES = Counter("graphmesh_llm_retries_total", "LLM attempts retried after 429/5xx/connection errors.", ("purpose",))
LLM_SECONDS = Histogram(
    "graphmesh_llm_seconds", "Wall time of LLM calls (seconds): a streamed call's until its last token.", ("purpose",),
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
)
LLM_FIRST_TOKEN_SECONDS = Histogram(
    "graphmesh_llm_first_token_seconds", "Seconds from a streamed LLM call's start to its first token.", ("purpose",),
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60),
)
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
#: First tokens read as a yes / a no in a yes-or-no judgement (compared
#: stripped and lower-cased).
YES_TOKENS = frozenset({"yes", "是", "相关"})
NO_TOKENS = frozenset({"no", "否", "不", "不是", "不相关"})


def yes_probability(alternatives: list[tuple[str, float]]) -> float | None:
    """P(yes) / (P(yes) + P(no)) over a generated token's alternatives
    ((token, natural-log probability) pairs, as ``LlmClient.top_logprobs``
    returns them); None when neither a yes nor a no token is among them."""
    yes = sum(math.exp(lp) for tok, lp in alternatives if tok.strip().lower() in YES_TOKENS)
    no = sum(math.exp(lp) for tok, lp in alternatives if tok.strip().lower() in NO_TOKENS)
    return yes / (yes + no) if yes + no > 0 else None


class LlmError(RuntimeError):
    """The LLM call failed for good (after retries) or timed out.

    Attributes:
        reason: short stable reason: "timeout", "rate_limited", "server_error",
            "http_<code>", "connection", "malformed" (a 2xx answer that is not
            a chat completion), "disabled", "circuit_open" (the gateway's
            circuit breaker refused the call).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LlmConfig:
    """Where and how to call the LLM.

    Attributes:
        base_url: OpenAI-compatible base URL ending in /v1; "" = no LLM.
        api_key: bearer token ("none" for local servers).
        model: model name sent in requests ("" lets llama.cpp use its own).
        timeout: seconds per call (all attempts and backoff together).
        max_retries: extra attempts after a 429/5xx/connection failure.
        backoff: first backoff, seconds; doubled per retry (capped at 8 s).
        temperature: sampling temperature (0 = greedy, reproducible).
    """

    base_url: str = ""
    api_key: str = "none"
    model: str = ""
    timeout: float = 60.0
    max_retries: int = 2
    backoff: float = 0.5
    temperature: float = 0.0

    @property
    def enabled(self) -> bool:
        """True when an endpoint is configured."""
        return bool(self.base_url)


class LlmClient:
    """Async chat-completions client with timeouts, bounded retries and
    streaming. One instance per process; ``close()`` releases the pool."""

    def __init__(self, config: LlmConfig) -> None:
        self.config = config
        self._http: httpx.AsyncClient | None = None

    @property
    def enabled(self) -> bool:
        """True when an endpoint is configured."""
        return self.config.enabled

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.config.api_key or 'none'}"}
            self._http = httpx.AsyncClient(base_url=self.config.base_url.rstrip("/"), headers=headers, timeout=None)
        return self._http

    async def close(self) -> None:
        """Closes the connection pool."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _body(self, messages: list[dict[str, str]], max_tokens: int, stream: bool, extra: Mapping[str, object] | None = None) -> dict:
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": self.config.temperature, "stream": stream}
        if self.config.model:
            body["model"] = self.config.model
        # server-specific fields (llama.cpp's "grammar") never override the standard ones
        body.update({k: v for k, v in (extra or {}).items() if k not in body})
        return body

    async def _with_retries(self, purpose: str, timeout: float, attempt_fn, record: bool = True):
        """``attempt_fn(seconds left)`` retried on 429, 5xx and connection
        errors within ``timeout``; counted "ok" with its seconds unless
        ``record`` is False (a stream counts itself once it ends)."""
        if not self.enabled:
            raise LlmError("disabled", "no LLM endpoint configured")
        end = time.monotonic() + timeout
        delay = self.config.backoff
        started = time.perf_counter()
        attempt = 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                LLM_CALLS.labels(purpose, "timeout").inc()
                raise LlmError("timeout", f"no answer within {timeout:.1f}s")
            try:
                result = await asyncio.wait_for(attempt_fn(left), timeout=left)
                if record:
                    LLM_CALLS.labels(purpose, "ok").inc()
                    LLM_SECONDS.labels(purpose).observe(time.perf_counter() - started)
                return result
            except asyncio.TimeoutError:
                LLM_CALLS.labels(purpose, "timeout").inc()
                raise LlmError("timeout", f"no answer within {timeout:.1f}s") from None
            except LlmError as err:
                LLM_CALLS.labels(purpose, err.reason).inc()
                raise
            except (httpx.HTTPStatusError, httpx.TransportError) as err:
                status = err.response.status_code if isinstance(err, httpx.HTTPStatusError) else 0
                retryable = status in RETRYABLE_STATUS or isinstance(err, httpx.TransportError)
                reason = "rate_limited" if status == 429 else "server_error" if status >= 500 else "connection" if not status else f"http_{status}"
                if not retryable or attempt >= self.config.max_retries or end - time.monotonic() <= delay:
                    LLM_CALLS.labels(purpose, reason).inc()
                    raise LlmError(reason, str(err)) from err
                attempt += 1
                LLM_RETRIES.labels(purpose).inc()
                log.info("LLM %s attempt %d failed (%s); retrying in %.1fs", purpose, attempt, reason, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 8.0)

    async def complete(self, messages: list[dict[str, str]], max_tokens: int, timeout: float | None = None, purpose: str = "answer",
                       extra: Mapping[str, object] | None = None) -> str:
        """One chat completion; returns the message text.

        Args:
            messages: OpenAI chat messages.
            max_tokens: most tokens generated.
            timeout: seconds for the whole call (default: config.timeout).
            purpose: metrics label ("answer", "hyde", "rewrite", "sub_queries").
            extra: further request fields the server understands (llama.cpp:
                "grammar", a GBNF grammar); standard fields are not replaced.
        Raises:
            LlmError: disabled, timed out, or failed after retries.
        """
        async def attempt(left: float) -> str:
            reply = await self._client().post("/chat/completions", json=self._body(messages, max_tokens, False, extra), timeout=left)
            reply.raise_for_status()
            try:
                content = reply.json()["choices"][0]["message"].get("content") or ""
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as err:
                raise LlmError("malformed", f"not a chat completion: {type(err).__name__}: {err}") from None
            if not isinstance(content, str):
                raise LlmError("malformed", f"message content is {type(content).__name__}, not text")
            return content

        return await self._with_retries(purpose, timeout or self.config.timeout, attempt)

    async def top_logprobs(self, messages: list[dict[str, str]], top_logprobs: int = 10, max_tokens: int = 1,
                           timeout: float | None = None, purpose: str = "score") -> list[list[tuple[str, float]]]:
        """One chat completion asking for log-probabilities (OpenAI
        ``logprobs`` / ``top_logprobs``, served by llama.cpp server, vLLM and
        OpenAI); retried and timed like ``complete``.

        Args:
            messages: OpenAI chat messages.
            top_logprobs: alternatives per generated token (1..20).
            max_tokens: tokens generated (1 for a yes/no judgement).
            timeout: seconds for the whole call (default: config.timeout).
            purpose: metrics label.
        Returns:
            per generated token, its alternatives as (token text, natural-log
            probability), most likely first.
        Raises:
            LlmError: disabled, timed out, failed after retries, or
                "no_logprobs" when the endpoint returned none.
        """
        async def attempt(left: float) -> list[list[tuple[str, float]]]:
            body = self._body(messages, max_tokens, False)
            body["logprobs"] = True
            body["top_logprobs"] = top_logprobs
            reply = await self._client().post("/chat/completions", json=body, timeout=left)
            reply.raise_for_status()
            choice = reply.json()["choices"][0]
            content = (choice.get("logprobs") or {}).get("content")
            if not content:
                raise LlmError("no_logprobs", "the endpoint returned no logprobs (does it support top_logprobs?)")
            return [[(str(alt.get("token", "")), float(alt.get("logprob", -math.inf))) for alt in entry.get("top_logprobs") or [entry]]
                    for entry in content]

        return await self._with_retries(purpose, timeout or self.config.timeout, attempt)

    async def stream(self, messages: list[dict[str, str]], max_tokens: int, timeout: float | None = None, purpose: str = "answer",
                     extra: Mapping[str, object] | None = None) -> AsyncIterator[str]:
        """Streams the answer as text pieces (server-sent events of the
        OpenAI API); ``extra`` as for ``complete``. Connecting is retried
        like ``complete``; once tokens flow, a failure raises ``LlmError``. Closing or cancelling the
        iterator closes the HTTP response, which stops generation upstream.

        Raises:
            LlmError: disabled, timed out (overall ``timeout``), or failed.
        """
        import json

        total = timeout or self.config.timeout
        end = time.monotonic() + total
        started = time.perf_counter()
        first = True

        async def open_stream(left: float):
            request = self._client().build_request(
                "POST", "/chat/completions", json=self._body(messages, max_tokens, True, extra), timeout=left
            )
            response = await self._client().send(request, stream=True)
            if response.status_code >= 400:
                await response.aread()
                await response.aclose()
                response.raise_for_status()
            return response

        response = await self._with_retries(purpose, total, open_stream, record=False)
        finished = False
        try:
            lines = response.aiter_lines()
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise LlmError("timeout", f"stream not finished within {total:.1f}s")
                try:
                    line = await asyncio.wait_for(lines.__anext__(), timeout=left)
                except StopAsyncIteration:
                    finished = True
                    return
                except asyncio.TimeoutError:
                    raise LlmError("timeout", f"stream not finished within {total:.1f}s") from None
                except httpx.HTTPError as err:
                    raise LlmError("connection", str(err)) from err
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    finished = True
                    return
                try:
                    choices = json.loads(payload).get("choices") or []
                except ValueError:
                    continue
                piece = (choices[0].get("delta") or {}).get("content") if choices else None
                if piece:
                    if first:
                        LLM_FIRST_TOKEN_SECONDS.labels(purpose).observe(time.perf_counter() - started)
                        first = False
                    yield piece
        except (asyncio.CancelledError, GeneratorExit):
            LLM_CALLS.labels(purpose, "cancelled").inc()
            raise
        except LlmError as err:
            LLM_CALLS.labels(purpose, err.reason).inc()
            raise
        finally:
            # Closing the response mid-stream drops the connection, which
            # makes llama.cpp (and OpenAI-compatible servers) stop generating.
            await response.aclose()
            if finished:
                LLM_CALLS.labels(purpose, "ok").inc()
                LLM_SECONDS.labels(purpose).observe(time.perf_counter() - started)
