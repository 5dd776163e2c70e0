"""The values of a third-party agent run inside the sandbox: what the agent is, what it is asked, and how
it is started.

    AgentSpec        one catalogue entry: its pinned packages, where it is installed in the image, the
                     API protocol it speaks, and the function that turns an AgentRequest into an
                     AgentInvocation
    AgentRequest     one task for it: the task text, the model, the gateway's URL and key, the work dir
    AgentInvocation  what the runner does in the sandbox: write `files`, then run `argv` in `cwd` with `env`
    RecordedRun      the published run a `replay:` model serves the messages of: the agent version that
                     recorded it and the settings it ran with, which the replaying agent takes over

Every path named here is inside the container. The task text and the model name reach an agent through
files (`files`) or as the value of an `--option=value` pair after validation, never as a bare argument
that could be read as an option.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from packaging.version import InvalidVersion, Version

from harness.errors import ConfigError

AgentProtocol = Literal["openai", "anthropic"]
"""The model API an agent speaks to the gateway."""

AGENTS_ROOT = "/opt/agents"          # each installed agent has a venv at AGENTS_ROOT/<install name>
RUN_DIR = "/tmp/harness-agent"       # the run's own files (task, configs, trajectory), on the /tmp tmpfs
TASK_FILE = f"{RUN_DIR}/task.md"     # the task text; every agent gets its path as $HARNESS_TASK_FILE
TESTBED = "/testbed"                 # a symbolic link to /workspace in every agent image
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,199}")
_BASE_URL = re.compile(r"http://(127\.0\.0\.1|localhost):([0-9]{1,5})(/v1)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass(frozen=True)
class RecordedRun:
    """The published run a `replay:DIR` model serves the messages of, as its trajectory's `info` says
    (mini-swe-agent's format): the agent version that recorded it (`info.mini_version`) and the settings
    it ran with (`info.config`), so that the replaying agent runs under the same ones.

    `agent`: the `agent:` section as recorded (system and instance templates, the observation, format-error
    and timeout templates, step and cost limits), handed to the agent unchanged; `env`: the variables
    every command ran with; `timeout`: seconds per command; `replies`: how many assistant messages the
    recording holds (the replay's call budget is at least that).
    """

    version: str
    agent: Mapping[str, object]
    env: Mapping[str, str]
    timeout: int
    replies: int

    @classmethod
    def from_info(cls, info: Mapping[str, object], replies: int, source: str) -> RecordedRun:
        """The run recorded in a trajectory's `info` (`source` names the file in errors).

        Raises:
            ConfigError: a field is missing or of the wrong type; every problem is named at once.
        """
        config = info.get("config")
        config = config if isinstance(config, dict) else {}
        agent, environment = config.get("agent"), config.get("environment", {})
        env = environment.get("env", {}) if isinstance(environment, dict) else None
        timeout = environment.get("timeout", 60) if isinstance(environment, dict) else None
        version = info.get("mini_version")
        problems = []
        try:
            Version(str(version))
        except InvalidVersion:
            problems.append(f"info.mini_version is {version!r}, expected the recording agent's version, e.g. '1.15.0'")
        if not isinstance(agent, dict) or not all(isinstance(k, str) for k in agent):
            problems.append(f"info.config.agent is {type(agent).__name__}, expected the agent's settings "
                            "(an object with system_template, instance_template, ...)")
            agent = {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and _ENV_NAME.fullmatch(k) and isinstance(v, str)
                                                for k, v in env.items()):
            problems.append(f"info.config.environment.env is {env!r:.200}, expected variable names and string "
                            "values, e.g. {\"PAGER\": \"cat\"}")
            env = {}
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout <= 86_400:
            problems.append(f"info.config.environment.timeout is {timeout!r}, expected seconds per command, e.g. 60")
            timeout = 60
        if problems:
            raise ConfigError(f"{source}: the recorded run's settings are unreadable: {'; '.join(problems)}")
        return cls(version=str(version), agent=dict(agent), env=dict(env), timeout=timeout, replies=replies)

    @property
    def major(self) -> int:
        return Version(self.version).major


@dataclass(frozen=True)
class AgentRequest:
    """One task for an agent. `base_url` is the model gateway on the sandbox's loopback,
    `http://127.0.0.1:PORT/v1`; `api_key` a dummy (the gateway holds the real one); `step_limit` 0:
    the agent's own limit (mini-swe-agent: none), else at most that many model calls where the agent
    has such a setting.

    Raises:
        ConfigError: the model name or base URL is not of the expected form (checked at construction).
    """

    task: str
    model: str
    base_url: str
    api_key: str = "dummy"
    workdir: str = TESTBED
    step_limit: int = 0
    recorded: RecordedRun | None = None    # the published run a replay reproduces (its settings apply)

    def __post_init__(self) -> None:
        problems = []
        if not _MODEL.fullmatch(self.model):
            problems.append(f"model {self.model!r} is not a model name (letters, digits and ._:@+/- only, not "
                            "starting with '-'), e.g. 'gpt-4o-mini' or 'local/gemma3-270m'")
        if not _BASE_URL.fullmatch(self.base_url):
            problems.append(f"base_url {self.base_url!r} is not the gateway on the sandbox's loopback; expected "
                            "http://127.0.0.1:PORT/v1, e.g. http://127.0.0.1:8400/v1")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", self.api_key):
            problems.append(f"api_key {self.api_key!r} is not a plain token; the gateway holds the real key, "
                            "pass a dummy such as 'dummy'")
        if not re.fullmatch(r"/[A-Za-z0-9._/-]{0,200}", self.workdir) or ".." in self.workdir.split("/"):
            problems.append(f"workdir {self.workdir!r} is not an absolute plain path, e.g. /testbed")
        if self.step_limit < 0:
            problems.append(f"step_limit {self.step_limit} is negative; 0 means the agent's own limit, e.g. 50")
        if problems:
            raise ConfigError("the agent request is invalid: " + "; ".join(problems))

    @property
    def gateway(self) -> str:
        """The gateway's root URL, `http://127.0.0.1:PORT` (its proxy address too)."""
        match = _BASE_URL.fullmatch(self.base_url)
        assert match is not None
        return f"http://{match.group(1)}:{match.group(2)}"


@dataclass(frozen=True)
class AgentInvocation:
    """How the runner starts an agent: create RUN_DIR, write each of `files` (path -> text), then run
    `argv` (no shell around it) in `cwd` with `env` added to the sandbox's environment. `outputs`: files
    the agent leaves that the runner copies out (its trajectory), when they exist."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    files: Mapping[str, str]
    cwd: str
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentSpec:
    """One agent of the catalogue (`harness.external.registry`).

    `requirements`: exact pins installed, with their dependencies as released by `as_of`, into a venv
    at `home` (empty for a `cmd:` agent, which installs nothing); the first is the agent's own package.
    `entry`: the program `invoke` starts, by absolute path (the venv is never on PATH, so `python` there
    stays the project's). `install_name`: the folder under AGENTS_ROOT; variants of one agent share it,
    and so share one image. `invoke` builds the
    invocation for a request; `summary` is one line for listings.
    """

    name: str
    requirements: tuple[str, ...]
    install_name: str
    entry: str
    protocol: AgentProtocol
    invoke: Callable[[AgentSpec, AgentRequest], AgentInvocation] = field(repr=False, compare=False)
    summary: str = ""
    command: str = ""     # a `cmd:` agent's bash command (given by the operator)
    as_of: str = "2026-12-01"   # its dependencies are resolved as released by this date (reproducible)
    repinned: bool = False      # its package pinned off the catalogue's version (`NAME==VERSION`)

    @property
    def home(self) -> str:
        """The agent's venv in the image, or "" for an agent that installs nothing."""
        return f"{AGENTS_ROOT}/{self.install_name}" if self.requirements else ""

    @property
    def label(self) -> str:
        """How runs and reports name this agent: `NAME`, `NAME==VERSION` when pinned off the catalogue's
        version, `cmd:COMMAND` for the operator's own."""
        if self.command:
            return f"cmd:{self.command}"
        return f"{self.name}=={self.package.split('==', 1)[1]}" if self.repinned else self.name

    @property
    def package(self) -> str:
        """The agent's own pinned requirement (`name==version`), or "" for a `cmd:` agent."""
        return self.requirements[0] if self.requirements else ""

    @property
    def version(self) -> Version | None:
        """The version of the agent's own package, or None for a `cmd:` agent."""
        return Version(self.package.split("==", 1)[1]) if self.package else None

    def with_version(self, version: str) -> AgentSpec:
        """This agent pinned at `version` instead (its own package only)."""
        name = self.package.split("==", 1)[0]
        return replace(self, requirements=(f"{name}=={version}", *self.requirements[1:]), repinned=True)

    def invocation(self, request: AgentRequest) -> AgentInvocation:
        """The argv, environment and files that run this agent on `request`."""
        return self.invoke(self, request)
