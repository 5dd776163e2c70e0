"""The `bash` tool: one command in the sandbox, answered with an observation built for a model."""

from __future__ import annotations

from typing import Any

from harness.config import ToolsConfig
from harness.errors import ChannelLost
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.shell.truncation import ERROR_PATTERN, Budget, format_observation
from sandbox.api import ExecResult, Sandbox
from sandbox.errors import ChannelClosed

DESCRIPTION = (
    "Run a bash command in /workspace, the project's folder inside an isolated sandbox with no network. "
    "Use it to run tests, scripts, git and other programs. Each command starts fresh: nothing it leaves "
    "running in the background survives it, and stdin is closed. You get the exit code, duration and "
    "output; long output is cut (lines that look like errors first, then head and tail) and the full "
    "output is saved to a file you can page with `view`. Prefer `view`, `search` and the edit tools for "
    "reading and changing files.")


def budget_of(config: ToolsConfig) -> Budget:
    return Budget(max_lines=config.output_max_lines, max_bytes=config.output_max_bytes,
                  error_lines=config.error_lines_max)


def run_command(sandbox: Sandbox, command: str, timeout: float, budget: Budget) -> tuple[ExecResult, str]:
    """Run `command` as the model's shell does; return the result and the observation the model reads.

    Outputs the observation would cut are saved in full in the sandbox (even small ones), so the
    omission note can always point at a file to page.
    """
    result = sandbox.exec(command, timeout=timeout, error_pattern=ERROR_PATTERN,
                          save_over=(budget.max_bytes // 4, budget.max_lines // 4))
    return result, format_observation(result, budget)


def bash_tool(config: ToolsConfig) -> Tool:
    budget = budget_of(config)
    default_timeout = config.command_timeout

    def run(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
        seconds = float(timeout if timeout is not None else default_timeout)
        try:
            return run_command(ctx.sandbox, command, seconds, budget)[1]
        except ChannelClosed as exc:
            ctx.sandbox.restart_channel()
            raise ChannelLost(f"the sandbox's command channel died while running {command!r} (often the memory "
                              f"limit killing it); it has been restarted, and the command's outcome is unknown: "
                              f"check its effects before running it again. Detail: {exc}") from exc

    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1,
                        "description": "The bash command, e.g. \"python -m pytest -q tests/test_core.py\"."},
            "timeout": {"type": "number", "minimum": 1, "maximum": 3600,
                        "description": f"Seconds before the command is killed (default {default_timeout:g})."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    return Tool(name="bash", description=DESCRIPTION, parameters=parameters, effect=Effect.SANDBOX, function=run)
