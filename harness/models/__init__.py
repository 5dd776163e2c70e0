"""Models behind one protocol (`Model.complete(messages, tools) -> ModelResponse`).

Adapters: `anthropic` (Messages API), `openai` (any OpenAI-compatible server, local ones included),
`react` (Thought/Action text for models without native tool calls), `scripted` (replays a script; the
test double that ships in the package), `gold`/`empty` (reference models for evaluation). `factory`
makes one from a `provider:name` spec.
"""

from harness.models.base import Model, ModelResponse, Usage, cost_usd
from harness.models.factory import make_model

__all__ = ["Model", "ModelResponse", "Usage", "cost_usd", "make_model"]
