"""The run's token and cost ledger: one small JSON file under results/<arch>/agent/, shared by mutate jobs.

A "run" is everything that writes one results folder, resumes included, so a crash-and-resume loop cannot
spend past the budget; delete the file to start a fresh budget. Jobs may run in parallel: every read-modify-
write holds an exclusive lock on a sibling .lock file.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oto.files import locked_json

_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class LedgerError(ValueError):
    pass


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _insane(state: Mapping[str, Any]) -> str:
    """Why the ledger's totals cannot be trusted ('' if they can): NaN, negative or non-numeric figures would
    silently disable the budget (NaN compares false; a negative spend is credit)."""
    usd = state["usd"]
    if isinstance(usd, bool) or not isinstance(usd, int | float) or not math.isfinite(usd) or usd < 0:
        return f"field 'usd' is {usd!r}, not a finite non-negative number"
    for f in ("calls", *_FIELDS):
        if not _count(state[f]):
            return f"field '{f}' is {state[f]!r}, not a non-negative integer"
    if not isinstance(state["jobs"], list):
        return f"field 'jobs' is {type(state['jobs']).__name__}, not a list"
    return ""


def _empty() -> dict[str, Any]:
    return {"calls": 0, "usd": 0.0, **{f: 0 for f in _FIELDS}, "jobs": []}


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _locked(self) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return locked_json(self.path, self._read)

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return _empty()
        try:
            state = json.loads(self.path.read_text())
            if not isinstance(state, dict) or not isinstance(state.get("usd"), int | float):
                raise ValueError("not a ledger object")
        except ValueError as exc:
            # Losing track of spending must not mean spending more: refuse until a human looks.
            raise LedgerError(f"{self.path}: unreadable agent ledger ({exc}); fix or delete it") from None
        state = {**_empty(), **state}
        problem = _insane(state)
        if problem:
            raise LedgerError(
                f"{self.path}: {problem}; the budget cannot be checked, fix or delete the ledger"
            )
        return state

    def totals(self) -> dict[str, Any]:
        with self._locked() as state:
            return dict(state)

    def tokens(self, state: Mapping[str, Any]) -> int:
        return sum(int(state.get(f, 0)) for f in _FIELDS)

    def reserve(self, max_tokens: int, max_usd: float, want_tokens: int, want_usd: float) -> str:
        """'' when a call of at most (want_tokens, want_usd) fits the run budget, else the reason."""
        with self._locked() as state:
            spent_t, spent_usd = self.tokens(state), float(state["usd"])
        if spent_t + want_tokens > max_tokens:
            return f"token budget: {spent_t} spent + up to {want_tokens} for this call > {max_tokens}"
        if spent_usd + want_usd > max_usd:
            return (
                f"cost budget: ${spent_usd:.4f} spent + up to ${want_usd:.4f} for this call > ${max_usd:.2f}"
            )
        return ""

    def record(self, job: str, usage: Mapping[str, int], usd: float) -> None:
        bad = [f for f in _FIELDS if not _count(usage.get(f, 0))]
        if bad or not (isinstance(usd, int | float) and math.isfinite(usd) and usd >= 0):
            what = f"usage field '{bad[0]}' = {usage.get(bad[0])!r}" if bad else f"cost {usd!r}"
            raise LedgerError(f"{self.path}: refusing to record {what}: not a non-negative number")
        with self._locked() as state:
            state["calls"] += 1
            state["usd"] = round(float(state["usd"]) + usd, 6)
            for f in _FIELDS:
                state[f] = int(state[f]) + int(usage.get(f, 0))
            state["jobs"].append(
                {"job": job, "usd": round(usd, 6), **{f: int(usage.get(f, 0)) for f in _FIELDS}}
            )
