"""One Messages API call through the real ``anthropic`` SDK, with our own retries so every attempt is audited.

Retried with exponential backoff and jitter (honouring Retry-After): 429, 5xx/529, timeouts and connection
errors. Not retried: other 4xx (bad request, auth, permissions), which a retry cannot fix.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oto.agent.audit import AuditLog
from oto.agent.settings import AgentSettings

BACKOFF_CAP_S = 60.0


class CallFailed(RuntimeError):
    def __init__(self, reason: str, attempts: int):
        super().__init__(reason)
        self.attempts = attempts


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


def _usage(message: Any) -> dict[str, int]:
    u = getattr(message, "usage", None)
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {k: int(getattr(u, k, 0) or 0) for k in keys}


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
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (HTTP {status})" if status else kind


def call(
    settings: AgentSettings,
    key: str,
    request: Mapping[str, Any],
    audit: AuditLog,
    sleep: Callable[[float], None] = time.sleep,
) -> Reply:
    """Send ``request`` (Messages API keyword arguments); raise CallFailed after the last attempt."""
    # Imported here: the SDK takes seconds to import and most mutate jobs never call it (no key, or frozen).
    import anthropic

    client = anthropic.Anthropic(
        api_key=key, base_url=settings.base_url, timeout=settings.timeout_s, max_retries=0
    )
    attempts = settings.max_retries + 1
    rng = random.Random()
    last = ""
    for attempt in range(1, attempts + 1):
        t0 = time.monotonic()
        audit.write("request", attempt=attempt, request=dict(request))
        try:
            message = client.messages.create(**request)
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified below
            seconds = time.monotonic() - t0
            last = _describe(exc)
            retry = _retryable(exc) and attempt < attempts
            audit.write(
                "error",
                attempt=attempt,
                error=last,
                detail=str(exc)[:500],
                seconds=round(seconds, 3),
                retry=retry,
            )
            if not isinstance(exc, anthropic.APIError) or not retry:
                raise CallFailed(f"{last} after {attempt} attempt(s)", attempt) from None
            delay = min(BACKOFF_CAP_S, settings.backoff_s * 2 ** (attempt - 1)) * (0.5 + rng.random())
            hinted = _retry_after(exc)
            if hinted is not None:
                delay = max(delay, min(hinted, BACKOFF_CAP_S))
            sleep(delay)
            continue
        seconds = time.monotonic() - t0
        content = [b.model_dump(mode="json", exclude_none=True) for b in message.content]
        reply = Reply(
            content=content,
            usage=_usage(message),
            model=str(message.model),
            stop_reason=message.stop_reason,
            request_id=getattr(message, "_request_id", None),
            attempts=attempt,
            seconds=round(seconds, 3),
        )
        audit.write(
            "reply",
            attempt=attempt,
            model=reply.model,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            content=content,
            request_id=reply.request_id,
            seconds=reply.seconds,
        )
        return reply
    raise CallFailed(f"{last} after {attempts} attempt(s)", attempts)
