"""The model gateway: a sandboxed third-party agent's model calls, answered on the host.

An agent inside the network-less sandbox (mini-swe-agent or aider through litellm, any CLI agent using
the openai or anthropic SDK) is given an OpenAI- or Anthropic-compatible base URL on its own loopback;
each request reaches the host as a `sandbox.loopback.HttpRequest` and `Gateway.handle` answers it. It
forwards model calls only, to one harness `Model` (so the API key stays on the host), meters them,
holds them to the run's budgets and records them in calls.jsonl; anything else is refused at once.

    gateway = Gateway(model, budgets=GatewayBudgets.from_loop(config.loop), price=[3.0, 15.0],
                      record=run_dir / RECORD_NAME)

Modules: `service` (Gateway, routes), `openai_api` and `anthropic_api` (the two wire formats),
`metering` (budgets, totals), `record` (calls.jsonl). docs/gateway.md says what it promises.
"""

from harness.gateway.metering import BudgetName, BudgetSpent, GatewayBudgets, Totals
from harness.gateway.record import RECORD_NAME, read_records
from harness.gateway.service import REFUSED_REASON, ROUTES, Gateway

__all__ = ["BudgetName", "BudgetSpent", "Gateway", "GatewayBudgets", "read_records", "RECORD_NAME", "REFUSED_REASON",
           "ROUTES", "Totals"]
