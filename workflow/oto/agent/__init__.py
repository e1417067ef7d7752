"""The hypothesis engine: Claude reads the evidence and proposes a few parameter mutations; the configured
strategy (search.strategy) fills the generation's other slots, and the workflow validates, builds, measures
and selects. See README ("The agent") and docs/architecture.md.

:mod:`.settings` (config, key, prices), :mod:`.engine` (one validated call), :mod:`.client` (the API call
with retries), :mod:`.prompt`, :mod:`.validate`, :mod:`.digest` (the evidence shown), :mod:`.ledger`
(budget), :mod:`.audit` (redacted log) and :mod:`.proposals` (the agent's part of the mutate stage)."""
