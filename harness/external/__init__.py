"""Third-party agents run inside the sandbox (`harness run --agent NAME`): the catalogue and the image.

    spec.py       AgentSpec, AgentRequest, AgentInvocation and the paths they name inside the container
    registry.py   the catalogue (mini-swe-agent, aider) and `parse_agent` for NAME, NAME==VERSION, cmd:...
    commands.py   each agent's argv, environment and files for a request (docs/external-agents.md)
    image.py      `ensure_agent_image`: the session's image plus a layer with the agent's venv, built offline
    run.py        `run_invocation`: the files written into a started sandbox, then the argv run

Sits above harness.environments and sandbox (whose wheelhouse and image builders it uses) and below
harness.agent and harness.cli, which run what it describes.
"""

from harness.external.commands import base_environment, check_replay
from harness.external.image import ensure_agent_image
from harness.external.registry import CATALOGUE, parse_agent
from harness.external.run import command_line, run_invocation, write_files
from harness.external.spec import (
    RUN_DIR,
    TASK_FILE,
    TESTBED,
    AgentInvocation,
    AgentRequest,
    AgentSpec,
    RecordedRun,
)

__all__ = ["CATALOGUE", "RUN_DIR", "TASK_FILE", "TESTBED", "AgentInvocation", "AgentRequest", "AgentSpec",
           "RecordedRun", "base_environment", "check_replay", "command_line", "ensure_agent_image", "parse_agent",
           "run_invocation", "write_files"]
