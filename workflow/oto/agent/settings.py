"""Agent settings from the run config, the one place the default Claude model and its prices are named."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MODEL = "claude-sonnet-5-5"
KEY_ENV = "ANTHROPIC_API_KEY"

# USD per million tokens: input, output, 5-minute cache write, cache read (platform.claude.com pricing).
# A model missing here is charged at the most expensive row, so the cost budget errs on the safe side.
PRICES: Mapping[str, tuple[float, float, float, float]] = {
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 0.1),
    "claude-sonnet-5": (2.0, 10.0, 2.5, 0.2),
    "claude-opus-5-5": (4.0, 20.0, 5.0, 0.4),
    "claude-opus-5": (5.0, 25.0, 6.25, 0.5),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 0.1),
}
_WORST_PRICE = (10.0, 50.0, 12.5, 1.0)

NO_KEY_MESSAGE = (
    f"oto agent: {KEY_ENV} is not set; proposals come from the symbolic strategy only "
    "(set the key to let Claude propose part of each generation)"
)


@dataclass(frozen=True)
class AgentSettings:
    provider: str = "anthropic"  # anthropic | none
    model: str = DEFAULT_MODEL
    proposals: int = 4  # agent slots per generation; the symbolic strategy fills the rest
    max_tokens_per_run: int = 2_000_000  # input + output tokens, all jobs of a results folder together
    max_usd_per_run: float = 5.0
    max_output_tokens: int = 8000
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 2.0
    base_url: str | None = None  # e.g. a gateway; None: the SDK default

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AgentSettings:
        a = config.get("agent") or {}
        d = cls()
        return cls(
            provider=str(a.get("provider", d.provider)),
            model=str(a.get("model") or d.model),
            proposals=int(a.get("proposals_per_generation", d.proposals)),
            max_tokens_per_run=int(a.get("budget", {}).get("tokens", d.max_tokens_per_run)),
            max_usd_per_run=float(a.get("budget", {}).get("usd", d.max_usd_per_run)),
            max_output_tokens=int(a.get("max_output_tokens", d.max_output_tokens)),
            timeout_s=float(a.get("timeout_s", d.timeout_s)),
            max_retries=int(a.get("max_retries", d.max_retries)),
            backoff_s=float(a.get("backoff_s", d.backoff_s)),
            base_url=a.get("base_url") or None,
        )

    def price(self) -> tuple[float, float, float, float]:
        return PRICES.get(self.model, _WORST_PRICE)

    def cost_usd(self, usage: Mapping[str, int]) -> float:
        p_in, p_out, p_write, p_read = self.price()
        return (
            usage.get("input_tokens", 0) * p_in
            + usage.get("output_tokens", 0) * p_out
            + usage.get("cache_creation_input_tokens", 0) * p_write
            + usage.get("cache_read_input_tokens", 0) * p_read
        ) / 1e6


def api_key(environ: Mapping[str, str] | None = None) -> str | None:
    key = (os.environ if environ is None else environ).get(KEY_ENV, "").strip()
    return key or None


def agent_status(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """(will the agent run, why not). The workflow says the reason once; jobs record it in proposals.yaml."""
    settings = AgentSettings.from_config(config)
    if settings.provider == "none":
        return False, "agent.provider is none"
    if api_key(environ) is None:
        return False, f"{KEY_ENV} is not set"
    return True, ""
