"""Models behind one protocol (`Model.complete(messages, tools) -> ModelResponse`).

Adapters: `anthropic` (Messages API), `openai` (any OpenAI-compatible server, local ones included),
`local` (`local:NAME`: a packaged model behind llama-cpp-python's server, which `local_server` starts
and stops), `react` (Thought/Action text for models without native tool calls), `scripted` (replays
a script; the test double that ships in the package), `gold`/`empty` (reference models for
evaluation). `factory` makes one from a `provider:name` spec; `factory.open_model` holds one for a run.
"""

from harness.models.base import Model, ModelResponse, Usage, cost_usd
from harness.models.factory import make_model

__all__ = ["Model", "ModelResponse", "Usage", "cost_usd", "make_model"]
