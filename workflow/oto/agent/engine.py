"""The agent's entry: evidence → at most n validated, new proposals plus the provenance of the call.

Never raises for anything the API or the reply does: every failure (no budget, HTTP errors after retries,
timeouts, a reply that is not the Messages API's, an unusable tool call, an endpoint the run's circuit
breaker has switched off) comes back as an Outcome with status 'failed' or 'skipped' and a reason, and the
caller fills the generation with the configured search strategy. Every reason is redacted: nothing the
endpoint said reaches a file with a secret in it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oto.agent import prompt
from oto.agent.audit import AuditLog, Redactor, read
from oto.agent.breaker import CircuitBreaker, breaker_path
from oto.agent.client import CallFailed, call
from oto.agent.ledger import Ledger, LedgerError
from oto.agent.settings import AgentSettings
from oto.agent.validate import UnusableReply, clean_text, tool_input, validate
from oto.search.space import Space

_CHARS_PER_TOKEN = 3.0  # conservative: over-estimates tokens for JSON-heavy prompts


@dataclass
class Outcome:
    status: str  # used | failed | skipped
    reason: str
    model: str
    proposals: list[dict[str, Any]] = field(default_factory=list)  # {id, params, rationale}
    rejected: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    usd: float = 0.0
    attempts: int = 0

    def provenance(self) -> dict[str, Any]:
        """The per-file block written to proposals.yaml (no secrets: settings and counts only)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "model": self.model,
            "accepted": len(self.proposals),
            "rejected": self.rejected,
            "usage": self.usage,
            "usd": round(self.usd, 6),
            "attempts": self.attempts,
        }


def build_request(
    space: Space, digest: Mapping[str, Any], hardware: Mapping[str, Any], n: int, settings: AgentSettings
) -> dict[str, Any]:
    return {
        "model": settings.model,
        "max_tokens": settings.max_output_tokens,
        "system": prompt.system_blocks(space, hardware, n),
        "messages": prompt.user_message(digest, n),
        "tools": [prompt.tool_schema(space, n)],
        "tool_choice": {"type": "auto"},  # current models reject forced tool use; the prompt requires it
    }


def propose(
    space: Space,
    digest: Mapping[str, Any],
    hardware: Mapping[str, Any],
    n: int,
    seen: set[str] | frozenset[str],
    settings: AgentSettings,
    key: str,
    ledger_path: Path,
    audit_path: Path | None,
    job: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    redact = Redactor([key])
    audit = AuditLog(audit_path, redact)
    out = Outcome("failed", "", settings.model)
    if n <= 0:
        out.status, out.reason = "skipped", "no agent slots in this generation"
        return out
    try:
        _ask(out, space, digest, hardware, n, seen, settings, key, ledger_path, audit, job, sleep)
    except Exception as exc:  # noqa: BLE001 - the generation goes on with the strategy, whatever happened
        out.status, out.proposals = "failed", []
        out.reason = f"agent failed: {type(exc).__name__}: {exc}"
        audit.write("failed", reason=out.reason)
    out.reason = redact.text(out.reason)[:600]
    out.model = redact.text(out.model)
    return out


def _ask(
    out: Outcome,
    space: Space,
    digest: Mapping[str, Any],
    hardware: Mapping[str, Any],
    n: int,
    seen: set[str] | frozenset[str],
    settings: AgentSettings,
    key: str,
    ledger_path: Path,
    audit: AuditLog,
    job: str,
    sleep: Callable[[float], None],
) -> None:
    request = build_request(space, digest, hardware, n, settings)
    audit.write("start", job=job, space=space.name, n=n, settings=_settings_record(settings))
    breaker = CircuitBreaker(
        breaker_path(Path(ledger_path).parent), settings.endpoint, settings.breaker_failures
    )
    off = breaker.refusal()
    if off:  # said once by the job that opened it; here only recorded
        out.status, out.reason = "skipped", off
        audit.write("skipped", reason=off)
        return
    ledger = Ledger(ledger_path)
    est_in = int(len(json.dumps(request)) / _CHARS_PER_TOKEN)
    p_in, p_out, p_write, _ = settings.price()
    want_tokens = est_in + settings.max_output_tokens
    want_usd = (est_in * max(p_in, p_write) + settings.max_output_tokens * p_out) / 1e6
    try:
        over = ledger.reserve(settings.max_tokens_per_run, settings.max_usd_per_run, want_tokens, want_usd)
    except LedgerError as exc:
        over = str(exc)
    if over:
        out.reason = f"budget exhausted ({over})"
        audit.write("skipped", reason=out.reason)
        return
    try:
        reply = call(settings, key, request, audit, sleep=sleep, breaker=breaker)
    except CallFailed as exc:
        out.attempts = exc.attempts
        if exc.breaker_open:
            out.status, out.reason = "skipped", str(exc)
        else:
            out.reason = f"API call failed: {exc}"
        if exc.unaccounted:  # a reply came with usage we cannot trust: charge what the call could cost
            out.usage, out.usd = (
                {"input_tokens": est_in, "output_tokens": settings.max_output_tokens},
                want_usd,
            )
            ledger.record(job, out.usage, out.usd)
            out.reason += "; charged the call's maximum to the budget"
        audit.write("failed", reason=out.reason)
        return
    out.usage, out.attempts, out.model = reply.usage, reply.attempts, clean_text(reply.model, 100)
    out.usd = settings.cost_usd(reply.usage)
    ledger.record(job, reply.usage, out.usd)
    try:
        result = validate(tool_input(reply.content), space, seen, n)
    except UnusableReply as exc:
        out.reason = f"unusable reply: {exc} (stop_reason {clean_text(reply.stop_reason, 40)})"
        audit.write("failed", reason=out.reason)
        return
    out.proposals, out.rejected = result.accepted, result.rejected
    out.status = "used"
    out.reason = f"{len(result.accepted)} accepted, {len(result.rejected)} rejected by validation"
    audit.write("validated", accepted=result.accepted, rejected=result.rejected, usd=round(out.usd, 6))


def _settings_record(s: AgentSettings) -> dict[str, Any]:
    return {
        "model": s.model,
        "max_output_tokens": s.max_output_tokens,
        "timeout_s": s.timeout_s,
        "max_retries": s.max_retries,
        "breaker_failures": s.breaker_failures,
        "budget_tokens": s.max_tokens_per_run,
        "budget_usd": s.max_usd_per_run,
        "base_url": s.base_url,
    }


def revalidate_audit(audit_path: Path, space: Space, seen: set[str] | frozenset[str], n: int):
    """Re-validate the last recorded reply of an audit log offline (review a run, or re-check it against a
    changed validator) without calling the API. Returns oto.agent.validate.Validated."""
    replies = [r for r in read(audit_path) if r.get("event") == "reply"]
    if not replies:
        raise UnusableReply(f"{audit_path}: no reply recorded")
    return validate(tool_input(replies[-1]["content"]), space, seen, n)
