"""The `bash` tool: one command in the sandbox, answered with an observation built for a model."""

from __future__ import annotations

from typing import Any

from harness.config import ToolsConfig
from harness.errors import ChannelLost
from harness.tools.base import Effect, Observation, Tool, ToolContext
from harness.tools.shell.truncation import ERROR_PATTERN, Budget, format_observation
from sandbox.api import ExecResult, Sandbox, StreamCapture
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


def _stream(capture: StreamCapture) -> dict[str, Any]:
    return {"bytes": capture.total_bytes, "lines": capture.total_lines, "truncated": capture.truncated,
            "saved_path": capture.saved_path}


def details_of(result: ExecResult) -> dict[str, Any]:
    """The command's outcome as data (the `details` of the bash tool's observation; OUTPUT_SCHEMA)."""
    return {"exit_code": result.exit_code, "timed_out": result.timed_out, "duration_seconds": round(result.duration, 4),
            "stdout": _stream(result.stdout), "stderr": _stream(result.stderr),
            "killed_leftovers": result.killed_leftovers}


_STREAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "bytes": {"type": "integer", "description": "size of the whole stream"},
        "lines": {"type": "integer", "description": "lines in the whole stream"},
        "truncated": {"type": "boolean", "description": "true when the text shows only part of it"},
        "saved_path": {"type": ["string", "null"],
                       "description": "the whole stream, saved inside the sandbox (page it with `view`)"},
    },
    "required": ["bytes", "lines", "truncated", "saved_path"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "exit_code": {"type": "integer", "description": "the command's exit code; 128+N when killed by signal N"},
        "timed_out": {"type": "boolean", "description": "killed at its timeout"},
        "duration_seconds": {"type": "number", "description": "wall time inside the sandbox"},
        "stdout": _STREAM_SCHEMA,
        "stderr": _STREAM_SCHEMA,
        "killed_leftovers": {"type": "integer", "description": "background processes stopped after the command"},
    },
    "required": ["exit_code", "timed_out", "duration_seconds", "stdout", "stderr", "killed_leftovers"],
}


def bash_tool(config: ToolsConfig) -> Tool:
    budget = budget_of(config)
    default_timeout = config.command_timeout

    def run(ctx: ToolContext, command: str, timeout: float | None = None) -> Observation:
        seconds = float(timeout if timeout is not None else default_timeout)
        try:
            result, text = run_command(ctx.sandbox, command, seconds, budget)
            return Observation(text, details_of(result))
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
    return Tool(name="bash", description=DESCRIPTION, parameters=parameters, effect=Effect.SANDBOX, function=run,
                output_schema=OUTPUT_SCHEMA, example={"command": "python -m pytest -q", "timeout": 300})
