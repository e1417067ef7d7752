"""Reply → accepted proposals and rejections. A reply is data: its values are compared with the legal values
of the space and copied only when they match one exactly; nothing in it is executed, imported or used as a
path. Rationales are truncated, single-line text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oto.agent.prompt import RATIONALE_MAX, TOOL_NAME
from oto.search.space import Parameter, Space

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


class UnusableReply(ValueError):
    """The reply has no usable tool call (no tool use, wrong tool, input not an object)."""


@dataclass
class Validated:
    accepted: list[dict[str, Any]] = field(default_factory=list)  # {id, params, rationale}
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {params, class, reason}


def clean_text(text: Any, limit: int = RATIONALE_MAX) -> str:
    s = _UNPRINTABLE.sub(" ", text if isinstance(text, str) else "").strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


def tool_input(content: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The input of the first call to our tool; thinking and text blocks are ignored."""
    for block in content:
        if block.get("type") == "tool_use":
            if block.get("name") != TOOL_NAME:
                raise UnusableReply(f"reply called an unknown tool {clean_text(block.get('name'), 60)!r}")
            data = block.get("input")
            if not isinstance(data, dict):
                raise UnusableReply("tool input is not a JSON object")
            return data
    raise UnusableReply("reply contains no tool call")


def coerce(space: Space, raw: Any) -> tuple[dict[str, Any] | None, str]:
    """A reply's parameter object → (full configuration, "") or (None, why it was rejected).

    Strict on JSON types: a value is accepted only if it is, exactly, one of the legal values (no strings
    for numbers, no floats, no booleans for integers, no extra keys); a parameter left out takes its default.
    """
    if not isinstance(raw, dict):
        return None, f"params must be an object, got {type(raw).__name__}"
    names = {p.name for p in space.parameters}
    unknown = sorted(str(k) for k in raw if k not in names)
    if unknown:
        return None, f"unknown parameter(s): {', '.join(unknown)}"
    out: dict[str, Any] = {}
    for p in space.parameters:
        if p.name not in raw:
            default = p.default_value
            out[p.name] = list(default) if isinstance(default, tuple) else default
            continue
        value, why = _strict(raw[p.name], p)
        if why:
            return None, f"{p.name}: {why}"
        out[p.name] = value
    reasons = space.violations(out)
    if reasons:
        return None, "illegal: " + "; ".join(reasons)
    return out, ""


def _strict(value: Any, p: Parameter) -> tuple[Any, str]:
    sample = p.values[0]
    if isinstance(sample, tuple):
        if not isinstance(value, list) or not all(type(v) is int for v in value):
            return None, f"must be a list of integers, got {value!r:.80}"
        if tuple(value) not in p.values:
            return None, f"{value!r:.80} is out of range (legal: {_legal_text(p)})"
        return list(value), ""
    if type(value) is not type(sample):
        return None, f"must be {type(sample).__name__}, got {type(value).__name__} {value!r:.80}"
    if value not in p.values:
        return None, f"{value!r:.80} is out of range (legal: {_legal_text(p)})"
    return value, ""


def _legal_text(p: Parameter, limit: int = 12) -> str:
    vals = [list(v) if isinstance(v, tuple) else v for v in p.values]
    return str(vals if len(vals) <= limit else [*vals[:limit], "..."])


def validate(data: Mapping[str, Any], space: Space, seen: set[str] | frozenset[str], n: int) -> Validated:
    """Keep at most ``n`` proposals that are well-formed, legal and new (not in ``seen``, not repeated)."""
    items = data.get("proposals")
    if not isinstance(items, list):
        raise UnusableReply("tool input has no 'proposals' list")
    out = Validated()
    taken: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            out.rejected.append({"params": None, "class": "malformed", "reason": "proposal is not an object"})
            continue
        raw = item.get("params")
        params, why = coerce(space, raw)
        if params is None:
            cls = "illegal" if why.startswith("illegal") else "invalid"
            out.rejected.append({"params": _shown(raw), "class": cls, "reason": clean_text(why, 600)})
            continue
        kid = space.id_of(params)
        if kid in seen or kid in taken:
            reason = "already measured" if kid in seen else "repeated within the reply"
            out.rejected.append({"id": kid, "params": params, "class": "duplicate", "reason": reason})
            continue
        if len(out.accepted) >= n:
            out.rejected.append({"id": kid, "params": params, "class": "surplus", "reason": f"more than {n}"})
            continue
        taken.add(kid)
        out.accepted.append({"id": kid, "params": params, "rationale": clean_text(item.get("rationale"))})
    return out


def _shown(raw: Any) -> Any:
    """What of a rejected value goes into results: scalars and short lists only, text truncated."""
    if isinstance(raw, dict):
        return {clean_text(str(k), 60): _shown(v) for k, v in list(raw.items())[:32]}
    if isinstance(raw, list):
        return [_shown(v) for v in raw[:8]]
    if isinstance(raw, bool | int | float) or raw is None:
        return raw
    return clean_text(str(raw), 120)
