"""MCP servers as tools of the agent loop: a server written here with the SDK (every behaviour a server
can have) and a published one from PyPI (mcp-server-time), through a scripted model, real sandboxes
and the real approval gate."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.agent.session import run_session
from harness.agent.trajectory import load_trajectory
from harness.approval.queue import ApprovalQueue
from harness.config import ApprovalConfig, Config, LoopConfig, McpConfig, load
from harness.core.task import Task, load_task
from harness.errors import ConfigError
from harness.mcp.client import McpServers, close_all, result_text, servers_for
from harness.mcp.specs import parse_server, server_spec, tool_name
from harness.messages import ToolResult
from harness.models.scripted import ScriptedModel

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = f"{sys.executable} {Path(__file__).with_name('probe_server.py')}"
TIME = f"{sys.executable} -m mcp_server_time"
LABELS = {"harness.test": "1"}


@pytest.fixture(autouse=True)
def _fresh_servers() -> Any:
    close_all()
    yield
    close_all()


def _config(tmp_path: Path, image: str, servers: dict[str, str], *, mode: str = "deny", policy: str | None = None,
            call_timeout: float = 20.0, trusted: tuple[str, ...] = ()) -> Config:
    policy_file = None
    if policy is not None:
        policy_file = tmp_path / "policy.toml"
        policy_file.write_text(policy)
    cfg = Config()
    return cfg.replace(sandbox=dataclasses.replace(cfg.sandbox, image=image),
                       loop=dataclasses.replace(LoopConfig(), max_turns=10),
                       approval=ApprovalConfig(state_dir=tmp_path / "state", mode=mode,  # type: ignore[arg-type]
                                               policy_file=policy_file, timeout_seconds=60, poll_seconds=0.05),
                       mcp=McpConfig(servers=servers, call_timeout=call_timeout, trusted=trusted))


def _calls(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    turns: list[Any] = [[{"type": "tool_use", "name": n, "input": i}] for n, i in calls]
    return ScriptedModel(turns + [[{"type": "text", "text": "done"}]])


def _results(out: Path) -> list[ToolResult]:
    return [r for m in load_trajectory(out / "trajectory.jsonl") for r in m.tool_results]


@pytest.fixture
def task(sandbox_image: str) -> Task:
    return load_task(REPO_ROOT / "tasks" / "wordcount")


def test_spec_parsing_says_what_is_wrong_with_the_value_and_an_example() -> None:
    assert parse_server("time=python -m mcp_server_time").command == ("python", "-m", "mcp_server_time")
    for bad, said in [("time", "is not NAME=COMMAND"), ("=python x", "is not a name"),
                      ("9lives=python x", "is not a name"), ("t=   ", "is not NAME=COMMAND"),
                      ("t=python 'open", "cannot be split")]:
        with pytest.raises(ConfigError, match=said) as caught:
            parse_server(bad)
        assert "mcp_server_time" in str(caught.value)
    with pytest.raises(ConfigError, match="must map a server name"):
        McpConfig(servers={"t": ["python"]})  # type: ignore[dict-item]
    assert tool_name("my-srv", "read.file/v2") == "mcp_my-srv_read_file_v2"


@pytest.mark.docker
def test_published_server_tools_run_under_the_gate_policy_approved_or_denied(task: Task, sandbox_image: str,
                                                                              tmp_path: Path) -> None:
    policy = ('[[rules]]\nname = "time-reads"\ntool = "mcp_time_get_*"\ndecision = "approve"\n'
              'match = { server = "time" }\n')
    config = _config(tmp_path, sandbox_image, {"time": TIME}, policy=policy, trusted=("time",))   # read-only hints
    model = _calls(("mcp_time_get_current_time", {"timezone": "Europe/Paris"}),
                   ("mcp_time_get_current_time", {"timezone": "Nowhere/Atlantis"}),
                   ("mcp_time_convert_time", {"source_timezone": "UTC", "time": "12:00",
                                              "target_timezone": "Asia/Tokyo"}))
    outcome = run_session(task, model, config, tmp_path / "run", labels=LABELS)
    assert outcome.stop_reason == "end"
    ok, failed, denied = _results(tmp_path / "run")
    assert not ok.is_error and '"timezone": "Europe/Paris"' in ok.content
    assert "structured content: {" in ok.content and '"day_of_week"' in ok.content
    assert failed.is_error and "reported an error" in failed.content and "Nowhere/Atlantis" in failed.content
    assert denied.is_error and denied.error_kind == "approval" and "default-deny" in denied.content
    requests = ApprovalQueue(tmp_path / "state").requests()
    by_status = sorted((r.tool, r.status, r.rule) for r in requests)
    assert by_status == [("mcp_time_convert_time", "denied", "default-deny"),
                         ("mcp_time_get_current_time", "done", "time-reads"),
                         ("mcp_time_get_current_time", "failed", "time-reads")]
    preview = next(r for r in requests if r.tool == "mcp_time_convert_time").preview
    assert "MCP server" in preview and "time" in preview and "Asia/Tokyo" in preview
    # the model's catalog named them with their schemas, descriptions marked as outside the sandbox
    tools = json.loads((tmp_path / "run" / "result.json").read_text())["config"]["mcp"]["servers"]
    assert tools == {"time": TIME}


@pytest.mark.docker
def test_held_call_waits_for_a_human_then_runs_once_and_the_key_replays_it(task: Task, sandbox_image: str,
                                                                           tmp_path: Path) -> None:
    config = _config(tmp_path, sandbox_image, {"probe": PROBE}, mode="queue")
    queue = ApprovalQueue(tmp_path / "state")
    decided: list[int] = []

    def human() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and not decided:
            for r in queue.requests(("pending",)):
                queue.decide(r.id, True, "a human", seen_hash=r.request_hash)
                decided.append(r.id)
            time.sleep(0.05)

    helper = threading.Thread(target=human)
    helper.start()
    model = _calls(("mcp_probe_echo", {"text": "héllo", "key": "echo-1"}),
                   ("mcp_probe_echo", {"text": "héllo", "key": "echo-1"}))
    run_session(task, model, config, tmp_path / "run", labels=LABELS)
    helper.join()
    first, again = _results(tmp_path / "run")
    assert not first.is_error and "echo: héllo" in first.content and '{"length": 5}' in first.content
    assert "already ran once" in again.content and "echo: héllo" in again.content
    assert len(decided) == 1
    log = (tmp_path / "state" / "mcp-logs" / "probe.log").read_text()
    assert log.count("call echo") == 1     # exactly once on the server's side


@pytest.mark.docker
def test_error_hang_and_crash_come_back_as_tool_errors_and_the_run_ends(task: Task, sandbox_image: str,
                                                                         tmp_path: Path) -> None:
    policy = '[[rules]]\nname = "probe"\ntool = "mcp_probe_*"\ndecision = "approve"\n'
    config = _config(tmp_path, sandbox_image, {"probe": PROBE}, policy=policy, call_timeout=2, trusted=("probe",))
    model = _calls(("mcp_probe_fail", {"text": "x"}), ("mcp_probe_hang", {}), ("mcp_probe_echo", {"text": "ok"}),
                   ("mcp_probe_hostile", {}), ("mcp_probe_crash", {}), ("mcp_probe_echo", {"text": "after"}),
                   ("mcp_probe_keyed", {"key": "k"}))
    started = time.monotonic()
    outcome = run_session(task, model, config, tmp_path / "run", labels=LABELS)
    assert outcome.stop_reason == "end" and time.monotonic() - started < 60
    fail, hang, echo, hostile, crash, after, keyed = _results(tmp_path / "run")
    assert fail.is_error and "the probe failed on purpose" in fail.content
    assert hang.is_error and "did not answer hang within 2s" in hang.content
    assert not echo.is_error and "echo: ok" in echo.content      # a hang does not take the server down
    assert "\x1b" not in hostile.content and "\u202e" not in hostile.content and "\\x1b]0;owned" in hostile.content
    assert crash.is_error and "closed its end" in crash.content
    assert after.is_error and "is not available" in after.content
    assert keyed.is_error and keyed.error_kind == "unknown_tool"     # left out: `key` is the gate's


def test_a_server_that_cannot_start_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    spec = server_spec("gone", f"{sys.executable} -c 'import sys; print(\"no such module\", file=sys.stderr); "
                               "sys.exit(2)'")
    with pytest.raises(ConfigError) as caught:
        McpServers([spec], log_dir=tmp_path / "logs", start_timeout=20).start()
    assert "MCP server 'gone'" in str(caught.value) and "no such module" in str(caught.value)
    slow = server_spec("slow", f"{sys.executable} -c 'import time; time.sleep(60)'")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="within 2s"):
        McpServers([slow], log_dir=tmp_path / "logs", start_timeout=2).start()
    assert time.monotonic() - started < 20


def test_servers_are_started_once_per_process_and_get_no_secrets(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-never-passed")
    probe = f"{sys.executable} -c 'import os,sys; print(sorted(os.environ), file=sys.stderr)'"
    spec = server_spec("env", probe)
    with pytest.raises(ConfigError) as caught:
        McpServers([spec], log_dir=tmp_path / "logs", start_timeout=20).start()
    assert "PATH" in str(caught.value) and "ANTHROPIC_API_KEY" not in str(caught.value)
    config = Config().replace(approval=ApprovalConfig(state_dir=tmp_path / "state"),
                              mcp=McpConfig(servers={"probe": PROBE}))
    first = servers_for(config)
    assert first is not None and first is servers_for(config)
    assert result_text(first.call("probe", "echo", {"text": "x"})).startswith("echo: x")
    pids = subprocess.run(["pgrep", "-f", "probe_server.py"], capture_output=True, text=True).stdout.split()
    assert len(pids) >= 1


def test_servers_and_the_token_come_from_the_environment_through_config_only() -> None:
    config, secrets = load({"HARNESS_MCP_SERVERS": json.dumps({"time": TIME}), "HARNESS_MCP_TOKEN": "s3cr3t-mcp-token"})
    assert config.mcp.servers == {"time": TIME} and secrets.mcp_token == "s3cr3t-mcp-token"
    assert "s3cr3t-mcp-token" not in json.dumps(config.to_dict())
    for bad in ("time=python -m x", '["python"]', '{"t": 1}'):
        with pytest.raises(ConfigError, match="HARNESS_MCP_SERVERS") as caught:
            load({"HARNESS_MCP_SERVERS": bad})
        assert "mcp_server_time" in str(caught.value)
