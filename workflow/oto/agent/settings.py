"""Agent settings from the run config, the one place the default Claude model and its prices are named."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oto.config import config_block, config_defaults

_DEFAULTS = config_defaults("agent")  # the config schema states every default
DEFAULT_MODEL: str = _DEFAULTS["model"]
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


def no_key_message(strategy: str) -> str:
    """Said once per run when the agent is on in the config but has no key."""
    return (
        f"oto agent: {KEY_ENV} is not set; proposals come from the {strategy} strategy only "
        "(set the key to let Claude propose part of each generation)"
    )


@dataclass(frozen=True)
class AgentSettings:
    provider: str = _DEFAULTS["provider"]  # anthropic | none
    model: str = DEFAULT_MODEL
    proposals: int = _DEFAULTS["proposals_per_generation"]  # the strategy fills the other slots
    max_tokens_per_run: int = _DEFAULTS["budget"]["tokens"]  # all jobs of a results folder together
    max_usd_per_run: float = _DEFAULTS["budget"]["usd"]
    max_output_tokens: int = _DEFAULTS["max_output_tokens"]
    timeout_s: float = _DEFAULTS["timeout_s"]
    max_retries: int = _DEFAULTS["max_retries"]
    backoff_s: float = _DEFAULTS["backoff_s"]
    breaker_failures: int = _DEFAULTS[
        "breaker_failures"
    ]  # failed attempts in a row that end calls for the run
    base_url: str | None = _DEFAULTS["base_url"]  # e.g. a gateway; None: the SDK default

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AgentSettings:
        a = config_block(config, "agent")
        return cls(
            provider=str(a["provider"]),
            model=str(a["model"]),
            proposals=int(a["proposals_per_generation"]),
            max_tokens_per_run=int(a["budget"]["tokens"]),
            max_usd_per_run=float(a["budget"]["usd"]),
            max_output_tokens=int(a["max_output_tokens"]),
            timeout_s=float(a["timeout_s"]),
            max_retries=int(a["max_retries"]),
            backoff_s=float(a["backoff_s"]),
            breaker_failures=int(a["breaker_failures"]),
            base_url=a["base_url"] or None,
        )

    @property
    def endpoint(self) -> str:
        """The endpoint calls go to, as the circuit breaker names it (base_url, else ANTHROPIC_BASE_URL)."""
        from oto.agent.breaker import endpoint_of

        return endpoint_of(self.base_url)

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
