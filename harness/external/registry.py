"""The catalogue of third-party agents `harness run --agent NAME` can run inside the sandbox.

    parse_agent("mini-swe-agent")          the catalogue's entry, at its pinned version
    parse_agent("aider==0.86.1")           the entry with its package pinned at another version
    parse_agent("cmd:python3 my_agent.py") the operator's own command, run with bash (never the model's)

Each installed agent lives in a venv of its own at /opt/agents/<install name> (`harness.external.image`),
made with the image's /usr/bin/python3 and called by absolute path. Both packaged agents speak the OpenAI
protocol through litellm; mini-swe-agent-tools is mini with tool calls (the gateway's model must support
`tools`), mini-swe-agent its text-based format, which any chat model can follow.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from harness.errors import ConfigError
from harness.external import commands
from harness.external.spec import AGENTS_ROOT, AgentSpec

__all__ = ["CATALOGUE", "CMD_PREFIX", "parse_agent"]

CMD_PREFIX = "cmd:"
MINI = "mini-swe-agent==2.4.6"     # the version harness[mini] pins (pyproject.toml)
AIDER = "aider-chat==0.86.2"

CATALOGUE: dict[str, AgentSpec] = {spec.name: spec for spec in (
    AgentSpec(name="mini-swe-agent", requirements=(MINI,), install_name="mini-swe-agent",
              entry=f"{AGENTS_ROOT}/mini-swe-agent/bin/mini", protocol="openai", invoke=commands.mini_swe_agent,
              summary="mini-swe-agent, text-based actions (```mswea_bash_command blocks; any chat model)"),
    AgentSpec(name="mini-swe-agent-tools", requirements=(MINI,), install_name="mini-swe-agent",
              entry=f"{AGENTS_ROOT}/mini-swe-agent/bin/mini", protocol="openai",
              invoke=commands.mini_swe_agent_tools,
              summary="mini-swe-agent, tool-call actions (the model must support OpenAI tools)"),
    AgentSpec(name="aider", requirements=(AIDER,), install_name="aider", entry=f"{AGENTS_ROOT}/aider/bin/aider",
              protocol="openai", invoke=commands.aider,
              summary="aider on one message, diff edit format, edits applied without commits"),
    AgentSpec(name="tiny", requirements=(), install_name="", entry="/usr/bin/python3", protocol="openai",
              invoke=commands.tiny_agent,
              summary="the package's example agent: 60 lines of standard library, one bash tool (docs/agents.md)"),
)}
_EXAMPLES = "e.g. --agent mini-swe-agent, --agent aider==0.86.2 or --agent 'cmd:python3 /workspace/agent.py'"


def parse_agent(text: str) -> AgentSpec:
    """The agent `text` names: `NAME`, `NAME==VERSION` (a catalogue entry at another version of its
    package) or `cmd:COMMAND` (any bash command, given by the operator).

    Raises:
        ConfigError: an unknown name, a malformed version or an empty command; the message lists the
            known names and gives an example.
    """
    if text.startswith(CMD_PREFIX):
        return _command_agent(text[len(CMD_PREFIX):])
    name, sep, version = text.strip().partition("==")
    spec = CATALOGUE.get(name.strip())
    if spec is None:
        raise ConfigError(f"--agent {text!r}: no agent of that name; known agents: {', '.join(sorted(CATALOGUE))}, "
                          f"or cmd:COMMAND for a command of your own; {_EXAMPLES}")
    if not sep:
        return spec
    try:
        pinned = Version(version.strip())
    except InvalidVersion:
        raise ConfigError(f"--agent {text!r}: {version!r} is not a version of {spec.package.split('==')[0]}; "
                          f"expected NAME==VERSION, e.g. {spec.name}=={spec.package.split('==')[1]}") from None
    if spec.name == "mini-swe-agent-tools" and pinned.major < 2:
        raise ConfigError(f"--agent {text!r}: mini-swe-agent {pinned} has text actions only (```bash blocks), no "
                          f"tool calls; use --agent mini-swe-agent=={pinned}")
    return spec.with_version(str(pinned))


def _command_agent(command: str) -> AgentSpec:
    if not command.strip() or "\0" in command:
        raise ConfigError(f"--agent 'cmd:{command}': expected a bash command after 'cmd:' (no NUL bytes), "
                          f"{_EXAMPLES}")
    return AgentSpec(name="cmd", requirements=(), install_name="", entry="/bin/bash", protocol="openai",
                     invoke=commands.shell_command, command=command,
                     summary="the operator's own command, run with bash")
