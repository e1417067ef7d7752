"""Text from another machine is data: quarantined, never a reason to throw a night's measurements away.

Every string of a parsed bundle member (``bundle.yaml``, the device profile, ``preflight.yaml``, registry
records, finals) is looked at once. A value that carries markup (HTML/XML tags, comments, Markdown links,
template syntax, script URLs), instructions aimed at a language model, control characters, or more than
:data:`TEXT_LIMIT` characters is **neutralised** (replaced by :data:`NEUTRALISED` naming what it carried) and
**flagged** (:class:`Quarantine` keeps the field's name and a quoted, shortened copy for the merged report,
which escapes it). The bundle is still merged: only structure and numbers reject a bundle. A mapping *key*
that carries such text is structure, and rejects it.

The patterns are meant for what a prompt injection looks like, not for honest prose about GPUs: "ignore the
previous winner's DepthU", "Host system: Ryzen 7 5700U", "bypass the LDS" and "R&amp;D" are plain data (an
entity is text once escaped; a role label counts only at the start of a line; "ignore" needs the
instructions it would ignore).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TEXT_LIMIT = 2000  # characters of one text field
NEUTRALISED = "[quarantined text: {what}]"
_MARKUP = re.compile(
    r"</?[A-Za-z][A-Za-z0-9:-]*(\s[^<>]*)?/?>"  # an HTML/XML tag
    r"|<!--|<!\[CDATA\["  # comments, CDATA
    r"|!?\[[^\]\n]*\]\([^)\n]*\)"  # a Markdown link or image
    r"|\{\{|\{%|\$\{|javascript:|data:text/html|vbscript:",  # template syntax, script URLs
    re.I,
)
_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override|bypass)\b(\s+(all|any|the|your|these|those|my|of))*"
    r"(\s+(previous|prior|above|earlier|preceding|system|original|safety))*"
    r"\s+(instructions?|prompts?|rules|guidelines|directions|directives|messages)\b"
    r"|^\s*(system|assistant|human|developer|user)(\s+prompt)?\s*:"
    r"|\byou\s+(are|must|should|will)\s+(now|instead)\b|\bnew\s+instructions?\b|\bact\s+as\s+(an?|the)\b"
    r"|\bprompt\s+injection\b|\bjailbreak\b",
    re.I | re.M,
)
# C0 and C1 controls but tab and newline, zero-width and bidirectional overrides: they hide or reorder text
# on a terminal or a page (a raw ESC from a file name recolours a terminal).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_FIELD = re.compile(r"^[A-Za-z0-9._-]+$")


def quote(text: Any, limit: int = 80) -> str:
    """A value as it appears in a reason: repr'd (control characters escaped), cut short."""
    s = repr(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def printable(text: Any) -> str:
    """``text`` with every control, zero-width or bidirectional character spelled as an escape (``\\x1b``):
    what reaches a report, a log line or a terminal from another machine's file names."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


def text_problem(text: str) -> str | None:
    """What a text field from another machine carries that must not be shown or passed on as it is, or
    None."""
    if len(text) > TEXT_LIMIT:
        return f"is {len(text)} characters long (at most {TEXT_LIMIT})"
    for pattern, what in (
        (_CONTROL, "control characters"),
        (_MARKUP, "markup"),
        (_INSTRUCTION, "instructions"),
    ):
        m = pattern.search(text)
        if m:
            return f"carries {what} ({quote(m.group(0), 40)})"
    return None


class TextRejected(ValueError):
    """A key of a parsed document carries text that is not plain data: the document's structure is wrong."""


@dataclass
class Quarantine:
    """The text fields of one bundle that were neutralised, for the merged report (each: member and field,
    what it carried, a quoted copy)."""

    flags: list[dict[str, str]] = field(default_factory=list)

    def clean(self, obj: Any, where: str) -> Any:
        """``obj`` with every problem string value neutralised (and flagged); a problem key raises
        TextRejected."""
        if isinstance(obj, str):
            problem = text_problem(obj)
            if problem is None:
                return obj
            self.flags.append({"field": printable(where), "problem": problem, "text": quote(obj, 200)})
            return NEUTRALISED.format(what=problem.split(" (")[0])
        if isinstance(obj, Mapping):
            out = {}
            for k, v in obj.items():
                if isinstance(k, str) and (problem := text_problem(k)):
                    raise TextRejected(f"{where}: a key {problem}: {quote(k)}")
                out[k] = self.clean(
                    v, f"{where}.{k}" if isinstance(k, str) and _FIELD.match(k) else f"{where}[…]"
                )
            return out
        if isinstance(obj, list | tuple):
            return [self.clean(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj
