"""The hypothesis engine: Claude reads the evidence and proposes a few parameter mutations; the symbolic side
validates, builds, measures and selects. See README ("The agent") and docs/architecture.md."""

from oto.agent.engine import Outcome, build_request, propose, replay
from oto.agent.settings import DEFAULT_MODEL, KEY_ENV, NO_KEY_MESSAGE, AgentSettings, agent_status, api_key
from oto.agent.space import Space, SpaceParam, tensile_space

__all__ = [
    "DEFAULT_MODEL",
    "KEY_ENV",
    "NO_KEY_MESSAGE",
    "AgentSettings",
    "Outcome",
    "Space",
    "SpaceParam",
    "agent_status",
    "api_key",
    "build_request",
    "propose",
    "replay",
    "tensile_space",
]
