"""One Messages API call through the real ``anthropic`` SDK, with our own retries so every attempt is audited.

Retried with exponential backoff and jitter (honouring Retry-After): 429, 5xx/529, timeouts and connection
errors. Not retried: other 4xx (bad request, auth, permissions) and a 200 that is not the Messages API's
reply, which a retry cannot fix.

Nothing an endpoint returns is trusted or stored as it came: the body is read raw, every string in it is
redacted (:class:`~oto.agent.audit.Redactor`: an endpoint that echoes the API key gets it written nowhere),
and it must have the Messages API's shape (an object with a list of content blocks and non-negative integer
usage) before anything else sees it. A proxy or captive-portal page, a JSON list or string, ``content:
null`` or a usage of ``"many"`` or ``-5`` tokens is a failed attempt with its reason, never an exception.
Every failed attempt is reported to the run's :class:`~oto.agent.breaker.CircuitBreaker`, which stops
calling an endpoint that keeps failing.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oto.agent.audit import AuditLog
from oto.agent.breaker import CircuitBreaker
from oto.agent.settings import AgentSettings

BACKOFF_CAP_S = 60.0
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class CallFailed(RuntimeError):
    def __init__(self, reason: str, attempts: int, unaccounted: bool = False, breaker_open: bool = False):
        super().__init__(reason)
        self.attempts = attempts
        self.unaccounted = unaccounted  # a reply came but its usage cannot be trusted: charge the reservation
        self.breaker_open = breaker_open  # no call was made: the endpoint is off for this run


class BadReply(ValueError):
    """An HTTP 200 whose body is not a Messages API reply."""

    def __init__(self, reason: str, unaccounted: bool = False):
        super().__init__(reason)
        self.unaccounted = unaccounted


@dataclass
class Reply:
    content: list[dict[str, Any]]
    usage: dict[str, int]
    model: str
    stop_reason: str | None
    request_id: str | None
    attempts: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_reply(text: str, content_type: str, redact: Callable[[Any], Any], model: str) -> dict[str, Any]:
    """The redacted, shape-checked body of a 200 reply: {content, usage, model, stop_reason}."""
    try:
        data = redact(json.loads(text))
    except ValueError:
        head = " ".join(redact(text)[:80].split())
        raise BadReply(
            f"HTTP 200 but the body is not JSON ({content_type or 'no content type'}: {head!r}); "
            "a proxy or captive portal in the way?"
        ) from None
    if not isinstance(data, dict):
        raise BadReply(f"HTTP 200 but the body is a JSON {_kind(data)}, not a Messages API object")
    if data.get("type", "message") != "message":
        raise BadReply(f"HTTP 200 but the body is of type {str(data.get('type'))[:40]!r}, not 'message'")
    content = data.get("content")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise BadReply(f"reply field 'content' is {_kind(content)}, not a list of content blocks")
    usage_in = data.get("usage")
    if not isinstance(usage_in, dict):
        raise BadReply(f"reply field 'usage' is {_kind(usage_in)}, not an object", unaccounted=True)
    usage = {}
    for name in USAGE_FIELDS:
        v = usage_in.get(name, 0)
        v = 0 if v is None else v
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise BadReply(
                f"reply field 'usage.{name}' is {str(v)[:40]!r}, not a non-negative integer", unaccounted=True
            )
        usage[name] = v
    got_model = data.get("model")
    stop = data.get("stop_reason")
    return {
        "content": content,
        "usage": usage,
        "model": got_model if isinstance(got_model, str) and got_model else model,
        "stop_reason": stop if isinstance(stop, str) else None,
    }


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _retryable(exc: Exception) -> bool:
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError | anthropic.APIConnectionError):
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def _describe(exc: Exception) -> str:
    if isinstance(exc, BadReply):
        return f"unusable reply: {exc}"
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (HTTP {status})" if status else kind


def call(
    settings: AgentSettings,
    key: str,
    request: Mapping[str, Any],
    audit: AuditLog,
    sleep: Callable[[float], None] = time.sleep,
    breaker: CircuitBreaker | None = None,
) -> Reply:
    """Send ``request`` (Messages API keyword arguments); raise CallFailed after the last attempt, or as soon
    as the breaker says the endpoint is off for this run."""
    # Imported here: the SDK takes seconds to import and most mutate jobs never call it (no key, or frozen).
    import anthropic

    client = anthropic.Anthropic(
        api_key=key, base_url=settings.base_url, timeout=settings.timeout_s, max_retries=0
    )
    attempts = settings.max_retries + 1
    rng = random.Random()
    last = ""
    for attempt in range(1, attempts + 1):
        off = breaker.refusal() if breaker else ""
        if off:
            audit.write("breaker", attempt=attempt, reason=off)
            raise CallFailed(off, attempt - 1, breaker_open=True)
        t0 = time.monotonic()
        audit.write("request", attempt=attempt, request=dict(request))
        try:
            raw = client.messages.with_raw_response.create(**request)
            body = parse_reply(raw.text(), raw.headers.get("content-type", ""), audit.redact, settings.model)
            request_id = raw.request_id
        except Exception as exc:  # noqa: BLE001 - anything the SDK or the endpoint does is a failed attempt
            seconds = time.monotonic() - t0
            last = audit.redact(_describe(exc))
            retry = _retryable(exc) and attempt < attempts
            audit.write(
                "error",
                attempt=attempt,
                error=last,
                detail=str(exc)[:500],
                seconds=round(seconds, 3),
                retry=retry,
            )
            if breaker is not None and breaker.failure(last):
                retry = False  # the breaker opened on this failure: stop here
            if not retry:
                unaccounted = isinstance(exc, BadReply) and exc.unaccounted
                raise CallFailed(f"{last} after {attempt} attempt(s)", attempt, unaccounted) from None
            delay = min(BACKOFF_CAP_S, settings.backoff_s * 2 ** (attempt - 1)) * (0.5 + rng.random())
            hinted = _retry_after(exc)
            if hinted is not None:
                delay = max(delay, min(hinted, BACKOFF_CAP_S))
            sleep(delay)
            continue
        if breaker is not None:
            breaker.success()
        reply = Reply(
            content=body["content"],
            usage=body["usage"],
            model=body["model"],
            stop_reason=body["stop_reason"],
            request_id=request_id if isinstance(request_id, str) else None,
            attempts=attempt,
            seconds=round(time.monotonic() - t0, 3),
        )
        audit.write(
            "reply",
            attempt=attempt,
            model=reply.model,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            content=reply.content,
            request_id=reply.request_id,
            seconds=reply.seconds,
        )
        return reply
    raise CallFailed(f"{last} after {attempts} attempt(s)", attempts)
