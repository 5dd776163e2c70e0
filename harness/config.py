"""One configuration tree for a run. The only module that reads environment variables.

Each section is a frozen dataclass with explicit defaults. `Config.to_dict()` is written into every
run's output so the run can be reproduced; `Config.from_dict()` rejects unknown keys.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from platformdirs import user_state_dir

from harness.errors import ConfigError
from sandbox.api import Limits

ApprovalMode = Literal["ask", "queue", "deny"]
"""What happens to an outbound request no policy rule decided; harness/approval/wiring.py says each."""
APPROVAL_MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)


def _default_state_dir() -> Path:
    return Path(user_state_dir("harness"))


@dataclass(frozen=True)
class SandboxConfig:
    image: str = "auto"           # "auto": the locally built sandbox image for `python`
    python: str = "3.11"          # interpreter version inside the sandbox image
    base: str = "auto"            # auto | debootstrap | registry: how the base image is made
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class ToolsConfig:
    history_window: int = 5       # observations older than the last N are summarised in the prompt
    output_max_lines: int = 200   # shell observation budget: lines
    output_max_bytes: int = 16_000  # shell observation budget: bytes
    error_lines_max: int = 40     # lines that look like errors, shown first
    command_timeout: float = 120.0  # default timeout of the shell tool, seconds
    view_lines: int = 100         # lines the file viewer shows per call
    search_max_results: int = 50  # matches `search` lists before asking for a narrower pattern
    find_code_k: int = 5          # results `find_code` returns when the call gives no k
    edit_context_lines: int = 3   # lines shown around a change in an edit's result
    lint_python: bool = True      # refuse Python edits that add pyflakes errors
    prewarm_index: bool = True    # analyse the project for find_code from the host's copy while a session starts
    find_code_bm25: bool = True   # find_code's lexical retriever (BM25)
    find_code_dense: bool = True  # its dense retriever (needs harness[retrieval]; without it BM25 alone, saying so)
    find_code_rerank: bool = False  # re-read the fused top 10 with the whole chunk (docs/tools.md: did not pay)
    find_code_rrf_c: int = 10     # c of reciprocal rank fusion: sum of 1 / (c + rank) (docs/tools.md: 10 against 60)
    find_code_fusion: str = "slots"  # slots | file | chunk: how the two lists are fused (docs/tools.md)

    def __post_init__(self) -> None:
        c = self.find_code_rrf_c
        if not isinstance(c, int) or isinstance(c, bool) or c < 1:
            raise ConfigError(f"tools.find_code_rrf_c must be a whole number of at least 1, got {c!r}; "
                              'e.g. {"tools": {"find_code_rrf_c": 10}}')
        fusions = ("slots", "file", "chunk")     # harness.tools.retrieval.hybrid.Fusion
        if self.find_code_fusion not in fusions:
            raise ConfigError(f"tools.find_code_fusion must be one of {', '.join(fusions)}, got "
                              f'{self.find_code_fusion!r}; e.g. {{"tools": {{"find_code_fusion": "slots"}}}}')
        if not (self.find_code_bm25 or self.find_code_dense):
            raise ConfigError("tools.find_code_bm25 and tools.find_code_dense are both off: find_code needs one "
                              'of them; e.g. {"tools": {"find_code_dense": false}} for BM25 alone')


@dataclass(frozen=True)
class LoopConfig:
    max_turns: int = 40           # model calls per attempt; the last turn's calls are still answered
    max_tokens_per_response: int = 8192   # a response cut at this size stops the run as `truncated`
    max_total_tokens: int | None = None   # budget: input + output tokens over the whole run
    max_cost_usd: float | None = None     # budget: needs a price for the model in model.prices
    max_wall_seconds: float | None = None  # budget: wall time of the run, seconds
    max_repeats: int = 4          # the same calls (or an empty reply) this many times in a row: stop as `stuck`
    attempts: int = 1             # Reflexion: attempts while the task's tests fail (1 = no retry)
    test_timeout: float = 600.0   # seconds allowed for the task's test command after an attempt
    agent: str | None = None      # a third-party agent inside the sandbox instead of this loop (`--agent`:
                                  # NAME, NAME==VERSION or cmd:COMMAND, harness.external.parse_agent)


@dataclass(frozen=True)
class ModelConfig:
    spec: str = "auto"            # provider:model, scripted:PATH, gold, empty; auto picks by API key
    tool_format: str = "auto"     # auto | native | react; auto: native, but a local model's own choice
    base_url: str | None = None
    temperature: float | None = None   # None: the provider's default (some models accept no other)
    max_retries: int = 4          # retries of a transient API failure (429, 5xx, timeout, connection)
    retry_initial_seconds: float = 1.0   # backoff: random exponential with jitter from this ...
    retry_max_seconds: float = 60.0      # ... up to this wait between two tries
    request_timeout: float = 600.0       # seconds for one API request
    prices: dict[str, list[float]] = field(default_factory=dict)  # spec -> [USD per M input, output]


@dataclass(frozen=True)
class ApprovalConfig:
    state_dir: Path = field(default_factory=_default_state_dir)   # holds approvals.sqlite3
    mode: ApprovalMode | Literal["auto"] = "auto"   # auto = ask on a terminal, deny otherwise
    policy_file: Path | None = None   # TOML rules that approve/deny by tool and argument patterns
    timeout_seconds: float = 600.0    # a request with no decision after this long expires
    poll_seconds: float = 0.25        # how often a waiting session looks for a decision made elsewhere
    http_timeout: float = 30.0        # seconds for one approved http_request
    http_max_response_bytes: int = 1_000_000   # response bytes read (and stored) per http_request
    pip_index_url: str | None = None  # index for pip_download; None: pip's default (PyPI)
    git_remotes: dict[str, str] = field(default_factory=dict)   # git_push targets: name -> URL
    web_host: str = "127.0.0.1"       # `harness approvals serve` binds here
    web_port: int = 8765
    web_session_hours: float = 12.0   # a sign-in to `harness web` / `approvals serve` lasts this long


@dataclass(frozen=True)
class McpConfig:
    servers: dict[str, str] = field(default_factory=dict)   # name -> command of an MCP server the loop's tools include
    call_timeout: float = 60.0        # seconds one call to an MCP server may take before it is a tool error
    start_timeout: float = 60.0       # seconds a server may take to start and list its tools
    trusted: tuple[str, ...] = ()     # `--mcp-trust NAME`: servers whose read-only tool hints a policy may act on

    def __post_init__(self) -> None:
        example = '{"mcp": {"servers": {"time": "python -m mcp_server_time"}}}'
        if not isinstance(self.servers, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.servers.items()):
            raise ConfigError(f"mcp.servers must map a server name to its command (text), got {self.servers!r}; "
                              f"e.g. {example}")
        given: object = self.trusted      # from a config file: any JSON value
        if not isinstance(given, (list, tuple)) or not all(isinstance(name, str) for name in given):
            raise ConfigError(f"mcp.trusted must be a list of server names, got {self.trusted!r}; "
                              'e.g. {"mcp": {"servers": {"time": "..."}, "trusted": ["time"]}}')
        object.__setattr__(self, "trusted", tuple(self.trusted))
        for name in ("call_timeout", "start_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ConfigError(f"mcp.{name} must be a number of seconds > 0, got {value!r}; e.g. 60")


@dataclass(frozen=True)
class Config:
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    approval: ApprovalConfig = field(default_factory=ApprovalConfig)
    mcp: McpConfig = field(default_factory=McpConfig)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = _jsonable(dataclasses.asdict(self))
        return data

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Config:
        config: Config = _build(Config, data, "config")
        return config

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


@dataclass(frozen=True)
class Secrets:
    """Credentials, read from the environment and never written into run outputs."""

    anthropic_api_key: str | None = None
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    mcp_token: str | None = None      # `harness mcp --http`'s bearer token, when the operator sets it
    model_server_api_key: str | None = None   # `harness model serve`'s API key (HARNESS_MODEL_SERVER_API_KEY)


def load(environ: Mapping[str, str] | None = None) -> tuple[Config, Secrets]:
    """The default configuration, adjusted by HARNESS_* environment variables, and the secrets."""
    env = os.environ if environ is None else environ
    cfg = Config()
    if env.get("HARNESS_STATE_DIR"):
        cfg = cfg.replace(approval=dataclasses.replace(cfg.approval, state_dir=Path(env["HARNESS_STATE_DIR"])))
    if env.get("HARNESS_MODEL"):
        cfg = cfg.replace(model=dataclasses.replace(cfg.model, spec=env["HARNESS_MODEL"]))
    cfg = cfg.replace(approval=_approval_env(cfg.approval, env))
    if env.get("HARNESS_SANDBOX_BASE"):
        cfg = cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, base=env["HARNESS_SANDBOX_BASE"]))
    if env.get("HARNESS_MCP_SERVERS"):
        cfg = cfg.replace(mcp=dataclasses.replace(cfg.mcp, servers=_mcp_servers(env["HARNESS_MCP_SERVERS"])))
    secrets = Secrets(anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
                      openai_api_key=env.get("OPENAI_API_KEY") or None,
                      openai_base_url=env.get("OPENAI_BASE_URL") or None,
                      mcp_token=env.get("HARNESS_MCP_TOKEN") or None,
                      model_server_api_key=env.get("HARNESS_MODEL_SERVER_API_KEY") or None)
    return cfg, secrets


def _mcp_servers(text: str) -> dict[str, str]:
    """HARNESS_MCP_SERVERS: a JSON object of server name -> command."""
    example = 'HARNESS_MCP_SERVERS=\'{"time": ".venv/bin/python -m mcp_server_time"}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"HARNESS_MCP_SERVERS is not JSON ({exc.msg}): {text[:200]!r}; expected an object of "
                          f"name -> command, e.g. {example}") from exc
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"HARNESS_MCP_SERVERS must be a JSON object of name -> command (text), got {text[:200]!r}; "
                          f"e.g. {example}")
    return value


_URL_WITH_PASSWORD = re.compile(r"[a-z+]+://[^/@]*:[^/@]*@")


def _approval_env(approval: ApprovalConfig, env: Mapping[str, str]) -> ApprovalConfig:
    """HARNESS_APPROVE, HARNESS_APPROVAL_POLICY, HARNESS_PIP_INDEX_URL and HARNESS_GIT_REMOTES
    ("origin=git@host:me/repo.git backup=/srv/git/repo.git": name=URL pairs separated by spaces)."""
    changes: dict[str, Any] = {}
    if env.get("HARNESS_APPROVE"):
        changes["mode"] = env["HARNESS_APPROVE"]
    if env.get("HARNESS_APPROVAL_POLICY"):
        changes["policy_file"] = Path(env["HARNESS_APPROVAL_POLICY"])
    if env.get("HARNESS_PIP_INDEX_URL"):
        if _URL_WITH_PASSWORD.match(env["HARNESS_PIP_INDEX_URL"]):
            raise ConfigError("HARNESS_PIP_INDEX_URL holds a password; the config is written into run outputs, "
                              "so keep the index's credentials in ~/.netrc or pip's keyring on the host, e.g. "
                              "HARNESS_PIP_INDEX_URL=https://pypi.example.org/simple")
        changes["pip_index_url"] = env["HARNESS_PIP_INDEX_URL"]
    if env.get("HARNESS_GIT_REMOTES"):
        pairs = env["HARNESS_GIT_REMOTES"].split()
        bad = [p for p in pairs if "=" not in p or p.startswith("=")]
        if bad:
            raise ConfigError(f"HARNESS_GIT_REMOTES: {bad} are not name=URL; expected e.g. "
                              "\"origin=git@example.org:me/repo.git backup=/srv/git/repo.git\"")
        remotes = dict(p.split("=", 1) for p in pairs)
        with_secret = sorted(n for n, url in remotes.items() if _URL_WITH_PASSWORD.match(url))
        if with_secret:
            raise ConfigError(f"HARNESS_GIT_REMOTES: the URL of {with_secret} holds a password; the config is "
                              "written into run outputs, so keep credentials in git's credential helper or ssh "
                              "agent on the host, e.g. origin=https://github.com/me/repo.git")
        changes["git_remotes"] = remotes
    return dataclasses.replace(approval, **changes)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _build(cls: type, data: Mapping[str, Any], where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(data).__name__}: {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where}; expected some of {sorted(fields)}, "
                          f"e.g. {{\"{next(iter(fields))}\": ...}}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        ftype = fields[name].type
        sub = {"SandboxConfig": SandboxConfig, "ToolsConfig": ToolsConfig, "LoopConfig": LoopConfig,
               "ModelConfig": ModelConfig, "ApprovalConfig": ApprovalConfig, "McpConfig": McpConfig,
               "Limits": Limits}.get(str(ftype))
        if sub is not None:
            kwargs[name] = _build(sub, value, f"{where}.{name}")
        elif name in ("state_dir", "policy_file") and value is not None:
            kwargs[name] = Path(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)
