"""Models behind one protocol (`Model.complete(messages, tools) -> ModelResponse`).

Adapters: `anthropic` (Messages API), `openai` (any OpenAI-compatible server, local ones included),
`recorded` (`replay:DIR`: a published mini-swe-agent trajectory's messages, for a third-party agent),
`local` (`local:NAME`: a packaged model behind llama-cpp-python's server, which `local_server` starts
and stops), `react` (Thought/Action text for models without native tool calls), `scripted` (replays
a script; the test double that ships in the package), `gold`/`empty` (reference models for
evaluation). `factory` makes one from a `provider:name` spec; `factory.open_model` holds one for a run.
"""

from typing import TYPE_CHECKING

from harness.models.base import Model, ModelResponse, Usage, cost_usd
from harness.models.factory import make_model
from sandbox.surface import lazy_names

__all__ = [
    "check_origin", "cost_usd", "EXAMPLE", "KEY_VARIABLE", "LOCAL_MODELS", "make_model", "MALFORMED", "Model",
    "ModelResponse", "open_model", "ORIGIN_EXAMPLE", "RecordedModel", "replay_for", "resolve_auto", "running",
    "server_for", "tool_format", "Usage",
]


# Names other packages use, loaded on first use: importing the package costs nothing (sandbox.surface).
if TYPE_CHECKING:
    from harness.models.base import MALFORMED
    from harness.models.factory import open_model, replay_for, resolve_auto, running, tool_format
    from harness.models.llama_serve import ORIGIN_EXAMPLE, check_origin
    from harness.models.local import EXAMPLE, LOCAL_MODELS, server_for
    from harness.models.local_server import KEY_VARIABLE
    from harness.models.recorded import RecordedModel

__getattr__ = lazy_names(__name__, {
    "harness.models.base": ("MALFORMED",),
    "harness.models.factory": ("open_model", "replay_for", "resolve_auto", "running", "tool_format"),
    "harness.models.llama_serve": ("ORIGIN_EXAMPLE", "check_origin"),
    "harness.models.local": ("EXAMPLE", "LOCAL_MODELS", "server_for"),
    "harness.models.local_server": ("KEY_VARIABLE",),
    "harness.models.recorded": ("RecordedModel",),
})
