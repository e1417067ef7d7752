"""Per-job audit log of every call (request, reply or error, usage, timing) as JSON lines, secrets redacted,
so a run can be reviewed and its replies replayed through the validator."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REDACTED = "[REDACTED]"
_SECRET_KEYS = re.compile(r"(api[-_]?key|authorization|auth[-_]?token|secret|password|cookie)", re.I)
# The common shapes of API keys and tokens, whatever variable held them: Anthropic keys, bearer tokens, GitHub
# tokens (classic ghp_/gho_/ghu_/ghs_/ghr_, fine-grained github_pat_), AWS access key ids, Slack bot and user
# tokens, and PEM private-key blocks.
_SHAPES = {
    "Anthropic API key": r"sk-ant-[A-Za-z0-9_\-]{8,}",
    "bearer token": r"Bearer\s+[A-Za-z0-9._\-]{8,}",
    "GitHub token": r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}",
    "AWS access key id": r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
    "Slack token": r"\bxox[bpoa]-[A-Za-z0-9-]{8,}",
    "private key": r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?"
    r"(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
}
_KEY_SHAPES = re.compile("|".join(f"(?:{p})" for p in _SHAPES.values()), re.S)
_EACH_SHAPE = {name: re.compile(p, re.S) for name, p in _SHAPES.items()}


def secret_shapes(text: str) -> list[str]:
    """The kinds of key or token shapes ``text`` still carries (a final check after redaction)."""
    return [name for name, p in _EACH_SHAPE.items() if p.search(text)]


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = ()):
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def text(self, s: str) -> str:
        for secret in self.secrets:
            s = s.replace(secret, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, s)

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            secret = _SECRET_KEYS.search
            return {self.text(str(k)): REDACTED if secret(str(k)) else self(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self(v) for v in obj]
        return obj


class AuditLog:
    """Append-only JSON lines; every record passes through the redactor before it touches the disk."""

    def __init__(self, path: Path | None, redact: Redactor):
        self.path = Path(path) if path else None
        self.redact = redact
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")

    def write(self, event: str, **fields: Any) -> None:
        if not self.path:
            return
        record = self.redact({"t": round(time.time(), 3), "event": event, **fields})
        with self.path.open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")


def read(path: Path) -> list[dict[str, Any]]:
    """Records of an audit log (for review and replay: a 'reply' record's content re-validates offline)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
