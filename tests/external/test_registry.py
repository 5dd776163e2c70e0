"""The catalogue of third-party agents: parsing --agent, and the argv, environment and files of each."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from harness.errors import ConfigError
from harness.external import (
    CATALOGUE,
    TASK_FILE,
    AgentRequest,
    RecordedRun,
    base_environment,
    check_replay,
    parse_agent,
)
from harness.external.commands import (
    AIDER_CONFIG,
    AIDER_METADATA,
    MINI_CONFIG,
    MINI_TRAJECTORY,
    yaml_string,
    yaml_value,
)
from tests.conftest import REPO_ROOT

HOSTILE = ("Fix it.\n-t --yolo --model=evil $(touch /tmp/pwned) `id` \"quoted\" 'single' \\ back\\slash\n"
           "tab\there \x00nul \x07bell \x85nel \u2028ls \ufeffbom é ünïcödé 😀 \U0001f9ea end: {a: b} # not a comment")


def request(task: str = HOSTILE, **kw: object) -> AgentRequest:
    return AgentRequest(task=task, model="gpt-4o-mini", base_url="http://127.0.0.1:8400/v1", **kw)  # type: ignore[arg-type]


def test_each_catalogue_name_parses_to_its_pinned_entry() -> None:
    mini = parse_agent("mini-swe-agent")
    assert mini.requirements == ("mini-swe-agent==2.4.6",)
    assert mini.entry == "/opt/agents/mini-swe-agent/bin/mini" and mini.home == "/opt/agents/mini-swe-agent"
    assert parse_agent("mini-swe-agent-tools").install_name == "mini-swe-agent"    # one image for both formats
    aider = parse_agent("aider")
    assert aider.requirements == ("aider-chat==0.86.2",) and aider.entry == "/opt/agents/aider/bin/aider"
    assert {spec.protocol for spec in CATALOGUE.values()} == {"openai"}


def test_mini_is_pinned_at_the_version_of_the_mini_extra() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert parse_agent("mini-swe-agent").package in extras["mini"]


def test_name_with_a_version_pins_the_agents_own_package() -> None:
    assert parse_agent("aider==0.85.1").requirements == ("aider-chat==0.85.1",)
    assert parse_agent(" mini-swe-agent == 2.4.5 ").requirements == ("mini-swe-agent==2.4.5",)


def test_cmd_agent_keeps_the_operators_command_and_installs_nothing() -> None:
    spec = parse_agent("cmd:python3 agent.py --task \"$HARNESS_TASK_FILE\"")
    assert spec.command == "python3 agent.py --task \"$HARNESS_TASK_FILE\"" and spec.requirements == ()
    run = spec.invocation(request())
    assert run.argv == ("/bin/bash", "-c", spec.command)
    assert run.files == {TASK_FILE: HOSTILE} and run.env["HARNESS_TASK_FILE"] == TASK_FILE


@pytest.mark.parametrize("text", ["minisweagent", "claude-code", "", "==1.0"])
def test_an_unknown_name_lists_the_known_ones_and_an_example(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_agent(text)
    said = str(err.value)
    assert "aider, mini-swe-agent, mini-swe-agent-tools" in said and "cmd:COMMAND" in said and "e.g." in said


def test_a_malformed_version_or_an_empty_command_is_refused_with_an_example() -> None:
    with pytest.raises(ConfigError, match=r"'latest' is not a version of aider-chat.*e\.g\. aider==0\.86\.2"):
        parse_agent("aider==latest")
    with pytest.raises(ConfigError, match="expected a bash command after 'cmd:'"):
        parse_agent("cmd:   ")


def test_a_request_reports_every_invalid_field_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        AgentRequest(task="t", model="--rm -rf", base_url="http://evil.example/v1", api_key="a b", workdir="rel",
                     step_limit=-1)
    said = str(err.value)
    for part in ("model '--rm -rf'", "base_url 'http://evil.example/v1'", "api_key 'a b'", "workdir 'rel'",
                 "step_limit -1"):
        assert part in said
    assert request().gateway == "http://127.0.0.1:8400"      # a valid one


def test_the_task_text_is_never_an_argument_of_any_agent() -> None:
    for name in CATALOGUE:
        run = CATALOGUE[name].invocation(request())
        assert not any("Fix it" in arg or "pwned" in arg for arg in run.argv), name
        assert run.files[TASK_FILE] == HOSTILE and run.cwd == "/testbed"


def test_mini_runs_yolo_and_exits_with_its_settings_in_a_yaml_file_that_reads_back_exactly() -> None:
    run = parse_agent("mini-swe-agent").invocation(request(step_limit=40))
    assert run.argv == ("/opt/agents/mini-swe-agent/bin/mini", "--yolo", "--exit-immediately",
                        "-c", "mini_textbased.yaml", "-c", MINI_CONFIG, "-o", MINI_TRAJECTORY)
    config = yaml.safe_load(run.files[MINI_CONFIG])
    assert config["run"]["task"] == HOSTILE
    assert config["agent"] == {"mode": "yolo", "confirm_exit": False, "cost_limit": 0, "step_limit": 40}
    assert config["model"] == {"model_name": "openai/gpt-4o-mini", "model_class": "litellm_textbased",
                               "cost_tracking": "ignore_errors",
                               "model_kwargs": {"api_base": "http://127.0.0.1:8400/v1", "api_key": "dummy"}}
    assert config["environment"] == {"cwd": "/testbed"}
    assert run.env["MSWEA_CONFIGURED"] == "true" and run.env["MSWEA_COST_TRACKING"] == "ignore_errors"
    assert run.outputs == (MINI_TRAJECTORY,)
    tools = parse_agent("mini-swe-agent-tools").invocation(request())
    assert "mini.yaml" in tools.argv and yaml.safe_load(tools.files[MINI_CONFIG])["model"]["model_class"] == "litellm"


@pytest.mark.parametrize("text", ["", "plain", "\"", "\\", "\n", "\r\n\t", "\x00\x1f\x7f\x80\x9f\xa0\xff",
                                  "\ud7ff\ue000\ufffd\ufffe", "\U00010000\U0010ffff", "- item", "key: value",
                                  "'", "%TAG", "!!python/object:os.system", "&a *a", "null", "true", "0x10"])
def test_yaml_string_reads_back_as_the_same_string(text: str) -> None:
    assert yaml.safe_load(f"v: {yaml_string(text)}\n") == {"v": text}


def test_aider_takes_the_message_file_and_flags_that_neither_ask_nor_reach_the_network() -> None:
    run = parse_agent("aider").invocation(request())
    assert run.argv[:5] == ("/bin/bash", "-c", run.argv[2], "aider", "/opt/agents/aider/bin/aider")
    flags = run.argv[5:]
    for flag in ("--model=openai/gpt-4o-mini", "--openai-api-base=http://127.0.0.1:8400/v1",
                 "--openai-api-key=dummy", f"--message-file={TASK_FILE}", "--yes-always", "--no-auto-commits",
                 "--no-check-update", "--no-analytics", "--no-show-release-notes", "--no-pretty", "--no-stream",
                 "--no-gitignore", "--no-detect-urls", "--edit-format=diff", f"--config={AIDER_CONFIG}",
                 f"--model-metadata-file={AIDER_METADATA}", "--env-file=/dev/null"):
        assert flag in flags
    assert all(flag.startswith("--") for flag in flags)       # every value is joined to its option by "="
    metadata = json.loads(run.files[AIDER_METADATA])
    assert metadata["openai/gpt-4o-mini"]["litellm_provider"] == "openai"
    assert yaml.safe_load(run.files[AIDER_CONFIG]) == {}


def test_every_agent_gets_the_gateway_as_endpoint_and_proxy_and_no_network_switches() -> None:
    env = base_environment(request())
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:8400/v1" and env["OPENAI_API_KEY"] == "dummy"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8400" and env["ANTHROPIC_API_KEY"] == "dummy"
    assert env["HTTPS_PROXY"] == env["https_proxy"] == env["HTTP_PROXY"] == "http://127.0.0.1:8400"
    assert env["NO_PROXY"] == "127.0.0.1,localhost"
    assert env["PIP_RETRIES"] == "1" and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert "PATH" not in env and "HOME" not in env          # the sandbox's own stay


TRAJECTORY_INFO = {"mini_version": "1.15.0", "config": {
    "agent": {"system_template": "You are a helpful assistant.", "instance_template": "<pr>\n{{task}}\n</pr>",
              "timeout_template": "timed out", "format_error_template": "one ```bash block, found {{actions|length}}",
              "action_observation_template": "<returncode>{{output.returncode}}</returncode>\n"
                                             "<output>\n{{ output.output -}}\n</output>",
              "step_limit": 250, "cost_limit": 3.0},
    "model": {"model_name": "google/gemini-3-pro-preview", "model_kwargs": {"temperature": 0.0}},
    "environment": {"image": "swebench/x", "cwd": "/testbed", "env": {"PAGER": "cat", "TQDM_DISABLE": "1"},
                    "timeout": 60, "executable": "docker"}}}


def recorded(info: dict[str, object] = TRAJECTORY_INFO) -> RecordedRun:
    return RecordedRun.from_info(info, replies=21, source="x.traj.json")


def test_mini_1x_reads_its_task_from_the_file_into_its_only_config_and_never_from_the_harness_argv() -> None:
    run = parse_agent("mini-swe-agent==1.15.0").invocation(request())
    assert run.argv[:5] == ("/bin/bash", "-c", run.argv[2], "mini", "/opt/agents/mini-swe-agent/bin/mini")
    assert run.argv[5:] == ("--yolo", "--exit-immediately", "-o", MINI_TRAJECTORY, "-c", "mini.yaml",
                            "--model=openai/gpt-4o-mini", "--cost-limit=0")
    assert run.files == {TASK_FILE: HOSTILE} and run.env["MSWEA_SILENT_STARTUP"] == "1"
    assert "Fix it" not in " ".join(run.argv)


@pytest.mark.parametrize("task", [HOSTILE.replace("\x00", ""), "ends with newlines\n\n", "-t --yolo", ""])
def test_the_1x_wrapper_hands_mini_the_task_file_byte_for_byte(tmp_path: Path, task: str) -> None:
    run = parse_agent("mini-swe-agent==1.15.0").invocation(request(task=task))
    (tmp_path / "task.md").write_text(task)
    probe = "import sys; sys.stdout.write(repr(sys.argv[-1]))"
    argv = [*run.argv[:4], sys.executable, "-c", probe]      # the wrapper, with a probe in mini's place
    said = subprocess.run(argv, env={"HARNESS_TASK_FILE": str(tmp_path / "task.md"), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True).stdout
    assert said == repr("--task=" + task)


def test_a_1x_replay_gets_the_recorded_agent_settings_in_its_one_config_file() -> None:
    run = parse_agent("mini-swe-agent==1.15.0").invocation(request(recorded=recorded()))
    assert run.argv[5:] == ("--yolo", "--exit-immediately", "-o", MINI_TRAJECTORY, "-c", MINI_CONFIG)
    config = yaml.safe_load(run.files[MINI_CONFIG])
    agent = dict(TRAJECTORY_INFO["config"]["agent"])  # type: ignore[call-overload]
    assert config["agent"] == {**agent, "mode": "yolo", "confirm_exit": False, "cost_limit": 0}
    assert config["env"] == {"cwd": "/testbed", "env": {"PAGER": "cat", "TQDM_DISABLE": "1"}, "timeout": 60}
    assert config["model"] == {"model_name": "openai/gpt-4o-mini", "model_class": "litellm",
                               "cost_tracking": "ignore_errors",
                               "model_kwargs": {"api_base": "http://127.0.0.1:8400/v1", "api_key": "dummy"}}
    limited = parse_agent("mini-swe-agent==1.15.0").invocation(request(recorded=recorded(), step_limit=5))
    assert yaml.safe_load(limited.files[MINI_CONFIG])["agent"]["step_limit"] == 5


def test_a_recording_is_replayed_only_by_its_own_major_version_with_text_actions() -> None:
    for name in ("mini-swe-agent", "mini-swe-agent-tools"):
        with pytest.raises(ConfigError, match=r"made by mini-swe-agent 1\.15\.0.*use --agent mini-swe-agent==1\.15\.0"):
            check_replay(parse_agent(name), recorded())
    check_replay(parse_agent("mini-swe-agent==1.14.2"), recorded())      # the same major version: accepted
    check_replay(parse_agent("mini-swe-agent"), None)                    # no replay: nothing to check
    check_replay(parse_agent("aider"), recorded())                       # other agents get the messages as they are
    with pytest.raises(ConfigError, match=r"text actions only.*use --agent mini-swe-agent==1\.15\.0"):
        parse_agent("mini-swe-agent-tools==1.15.0")


def test_unreadable_recorded_settings_are_named_all_at_once() -> None:
    bad = {"mini_version": "one", "config": {"agent": [], "environment": {"env": {"A B": 1}, "timeout": "60"}}}
    with pytest.raises(ConfigError) as err:
        recorded(bad)
    said = str(err.value)
    for part in ("x.traj.json", "mini_version is 'one'", "config.agent is list", "environment.env is",
                 "timeout is '60'"):
        assert part in said
    assert recorded({"mini_version": "1.15.0", "config": {"agent": {}}}).timeout == 60     # defaults


@pytest.mark.parametrize("value", [{"a": [1, 2.5, True, None, "x\ny"]}, {"nested": {"k": "ü 😀"}}, [], {}])
def test_yaml_value_reads_back_as_the_same_value(value: object) -> None:
    assert yaml.safe_load(f"v: {yaml_value(value)}\n") == {"v": value}
    with pytest.raises(ConfigError, match="finite"):
        yaml_value(float("nan"))
