"""The run's circuit breaker for the agent's endpoint: one small JSON file under results/<arch>/agent/, shared
by every mutate job of a run and locked like the ledger.

Every failed attempt (timeout, connection error, HTTP error, a reply that is not the Messages API's) counts;
a usable reply resets the count. After ``agent.breaker_failures`` failures in a row the endpoint is off for
the rest of the run: later jobs make no call and fill their generation from the search strategy. Without
it, a hung endpoint costs every mutate job all its attempts times the timeout (about ten minutes each with
the defaults), hours over a night. The job whose failure opens the breaker says so, once; later jobs record
a short reason in their proposals.yaml. A new run starts with the breaker closed (the Snakefile's onstart
calls :func:`reset`), so a fixed network is used again without any manual step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from oto.files import locked_json

log = logging.getLogger(__name__)

FILE = "breaker.json"


DEFAULT_ENDPOINT = "https://api.anthropic.com"


def endpoint_of(base_url: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint calls really go to, as the SDK picks it: the configured ``agent.base_url``, else
    ``ANTHROPIC_BASE_URL`` from the environment, else the SDK's default. A breaker (and its message) names
    this one: naming the default while a gateway was failing sent people to check the wrong service."""
    env = os.environ if environ is None else environ
    return base_url or env.get("ANTHROPIC_BASE_URL") or DEFAULT_ENDPOINT


def breaker_path(agent_dir: Path) -> Path:
    return Path(agent_dir) / FILE


def reset(agent_dir: Path) -> None:
    """Close every breaker of ``results/<arch>/agent`` (a new run starts)."""
    breaker_path(agent_dir).unlink(missing_ok=True)


class CircuitBreaker:
    def __init__(self, path: Path, endpoint: str, threshold: int):
        self.path = Path(path)
        self.endpoint = endpoint
        self.threshold = max(1, int(threshold))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """This endpoint's entry of the shared state."""
        with locked_json(self.path, self._read) as state:
            entry = dict(state.get(self.endpoint, {}))
            yield entry
            if entry or self.endpoint in state:  # an endpoint only asked about leaves the file as it was
                state[self.endpoint] = entry

    def _read(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError:
            # Losing the breaker's state only costs calls (never money, unlike the ledger): start afresh.
            log.warning("%s unreadable; the agent's circuit breaker starts closed", self.path)
            return {}
        if not isinstance(state, dict):
            return {}
        return {k: v for k, v in state.items() if isinstance(v, dict)}

    def refusal(self) -> str:
        """'' while the endpoint may be called, else why not."""
        with self._locked() as e:
            if e.get("open"):
                return (
                    f"agent off for this run: {self.endpoint} failed {e.get('failures', '?')} times in a row "
                    f"(last: {e.get('last', '?')}); {self.path} says so"
                )
        return ""

    def failure(self, what: str) -> str:
        """Count a failed attempt; returns the announcement when this failure opens the breaker, else ''."""
        with self._locked() as e:
            e["failures"] = int(e.get("failures", 0) or 0) + 1
            e["last"] = what
            if e.get("open") or e["failures"] < self.threshold:
                return ""
            e.update(open=True, opened_at=round(time.time(), 3))
            note = (
                f"oto agent: {self.endpoint} failed {e['failures']} times in a row (last: {what}); no more "
                "agent calls in this run, proposals come from the search strategy (agent.breaker_failures)"
            )
        log.warning("%s", note)
        return note

    def success(self) -> None:
        with self._locked() as e:
            e.update(failures=0, open=False, last="")
