"""Replay of published mini-swe-agent trajectories: a model mini's config can name (`model_class`).

`ReplayModel` serves, for one instance, the assistant messages recorded in
`<trajectory_dir>/<instance_id>.traj.json` (mini-swe-agent's published format, `trajectory_format:
mini-swe-agent-1`) in order, whatever it is sent; mini's own agent parses each into its action and
runs it in its environment, so a published run is reproduced command for command without a model API:

    model:
      model_class: harness.integrations.replay.ReplayModel
      trajectory_dir: trajectories/          # DIR/<instance_id>.traj.json
      instance_id: django__django-11099      # or: the recording whose task message is the one sent

When the recording runs out (the replayed run went further than the published one), `query` raises
`ScriptExhausted` saying so. `run_replay` runs one recording with mini's `DefaultAgent` in a harness
sandbox on the instance's offline environment (`HarnessEnvironment`), with the published run's
config translated for mini 2.x (`mini_config`), and compares each observation with the recorded one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments import get_environment
from minisweagent.exceptions import FormatError
from minisweagent.models import GLOBAL_MODEL_STATS, get_model
from minisweagent.models.utils.actions_text import format_observation_messages, parse_regex_actions
from pydantic import BaseModel, ConfigDict, ValidationError

from harness import checks
from harness.errors import ConfigError, ScriptExhausted

TRAJECTORY_FORMATS = ("mini-swe-agent-1", "mini-swe-agent-1.1")
ACTION_REGEX_V1 = r"```bash\s*\n(.*?)\n```"
"""The action regex of mini 1.x's agent (its default; published 1.x configs do not repeat it)."""
EXCEPTION_LINE = ("{% if output.exception_info -%}\n<exception>{{output.exception_info}}</exception>\n"
                  "{% endif -%}\n")
"""mini 2.x reports a timeout in the observation (1.x rendered a separate timeout template)."""


@dataclass(frozen=True)
class Recording:
    """One published trajectory: its assistant messages in order, their recorded costs, the task
    message it was sent, the run's config (`info.config`) and its submission."""

    path: Path
    instance_id: str
    replies: tuple[str, ...]
    costs: tuple[float | None, ...]
    task_message: str
    observations: tuple[str, ...]
    config: dict[str, Any] = field(repr=False)
    submission: str = field(repr=False)


def load_recording(directory: Path | str, instance_id: str) -> Recording:
    """`directory/<instance_id>.traj.json`, read without following a link below `directory`.

    Raises:
        ConfigError: the file is missing, not JSON, or not a mini-swe-agent-1 trajectory.
    """
    iid = checks.identifier(instance_id, "replay model")
    name = f"{iid}.traj.json"
    try:
        data = json.loads(checks.read_beneath(Path(directory), name))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the recorded trajectory {Path(directory) / name}: {exc}; expected "
                          "mini-swe-agent's published trajectory file (trajectory_format: mini-swe-agent-1)") from exc
    return parse_recording(data, Path(directory) / name, iid)


def parse_recording(data: object, path: Path, instance_id: str) -> Recording:
    """A `Recording` from a parsed trajectory file; every problem of its shape named at once."""
    problems = []
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object with 'messages', got {type(data).__name__}")
    if data.get("trajectory_format") not in TRAJECTORY_FORMATS:
        problems.append(f"trajectory_format is {data.get('trajectory_format')!r}, expected one of {TRAJECTORY_FORMATS}")
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        problems.append("'messages' is not a list of objects")
        messages = []
    bad = [n for n, m in enumerate(messages) if not isinstance(m.get("content"), str)]
    if bad:
        problems.append(f"messages {bad[:5]} have no text content")
    replies = [m for m in messages if m.get("role") == "assistant"]
    if not replies:
        problems.append("no assistant message is recorded")
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    if problems:
        raise ConfigError(f"{path} is not a replayable mini-swe-agent trajectory: {'; '.join(problems)}")
    info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
    if info.get("exit_status") == "Submitted" and messages[-1].get("role") == "user":
        users = users[:-1]                       # mini 1.x recorded the submission as a last user message
    return Recording(path, instance_id, tuple(str(m["content"]) for m in replies),
                     tuple(_recorded_cost(m) for m in replies), users[0] if users else "", tuple(users[1:]),
                     dict(info.get("config") or {}), str(info.get("submission") or ""))


def _recorded_cost(message: dict[str, Any]) -> float | None:
    """The call's recorded cost: the provider's `usage.cost` (OpenRouter), else mini's `extra.cost`."""
    extra = message.get("extra")
    extra = extra if isinstance(extra, dict) else {}
    response = extra.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    cost = usage.get("cost") if isinstance(usage, dict) else extra.get("cost")
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


class ReplayModelConfig(BaseModel):
    """The keys mini's `model:` section may hold for `ReplayModel`; any other key is refused."""

    model_config = ConfigDict(extra="forbid")
    trajectory_dir: str
    instance_id: str = ""                       # empty: the recording whose task message is the one sent
    model_name: str = "replay"
    cost: Literal["recorded", "zero"] = "recorded"   # recorded: cost limits stop where the published run's did
    action_regex: str = ACTION_REGEX_V1
    format_error_template: str = "{{ error }}"
    observation_template: str = (EXCEPTION_LINE + "<returncode>{{output.returncode}}</returncode>\n"
                                 "<output>\n{{output.output}}</output>")
    multimodal_regex: str = ""
    model_kwargs: dict[str, Any] = {}           # mini's configs set these for API models; nothing is called
    set_cache_control: str | None = None
    cost_tracking: str = "default"


class ReplayModel:
    """mini's `Model` protocol (`query`, `format_message`, `format_observation_messages`,
    `get_template_vars`, `serialize`) serving a recorded trajectory's assistant messages in order."""

    def __init__(self, **kwargs: Any) -> None:
        try:
            self.config = ReplayModelConfig(**kwargs)
        except ValidationError as exc:
            raise ConfigError(f"harness.integrations.replay.ReplayModel: {exc}; known keys: "
                              f"{sorted(ReplayModelConfig.model_fields)}; e.g. model: {{model_class: "
                              "harness.integrations.replay.ReplayModel, trajectory_dir: trajectories/, "
                              "instance_id: django__django-11099}") from exc
        self.recording: Recording | None = (load_recording(self.config.trajectory_dir, self.config.instance_id)
                                            if self.config.instance_id else None)
        self.served = 0

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """The next recorded assistant message, its action parsed as mini's text-based models do.

        Raises:
            FormatError: the recorded message holds zero or several actions (mini answers it and asks again).
            ScriptExhausted: every recorded message was served.
        """
        recording = self.recording = self.recording or self._find_recording(messages)
        if self.served >= len(recording.replies):
            raise ScriptExhausted(
                f"the recording {recording.path} holds {len(recording.replies)} assistant messages, all served, "
                f"and the agent asked for message {self.served + 1}: the replayed run went on where the published "
                f"one ended (the last message served was {recording.replies[-1][-200:]!r}); compare the replay's "
                "observations with the recorded ones to find where it diverged")
        content, recorded = recording.replies[self.served], recording.costs[self.served]
        self.served += 1
        cost = (recorded or 0.0) if self.config.cost == "recorded" else 0.0
        GLOBAL_MODEL_STATS.add(cost)
        extra = {"cost": cost, "timestamp": time.time(),
                 "replay": {"file": str(recording.path), "message": self.served, "of": len(recording.replies),
                            "recorded_cost": recorded}}
        try:
            actions = parse_regex_actions(content, action_regex=self.config.action_regex,
                                          format_error_template=self.config.format_error_template)
        except FormatError as exc:
            exc.messages[0]["extra"].update(extra)     # mini's contract: the call's cost survives the error
            raise
        return {"role": "assistant", "content": content, "extra": {"actions": actions, **extra}}

    def _find_recording(self, messages: list[dict[str, Any]]) -> Recording:
        """Without `instance_id`: the one recording in the folder whose task message is the one sent."""
        sent = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        folder = Path(self.config.trajectory_dir)
        found = [r for p in sorted(folder.glob("*.traj.json"))
                 if (r := load_recording(folder, p.name.removesuffix(".traj.json"))).task_message == sent]
        if len(found) != 1:
            raise ConfigError(f"{len(found)} recordings in {folder} have the task message the agent sent "
                              f"({str(sent)[:120]!r}...); name one with model.instance_id, e.g. "
                              "instance_id: django__django-11099")
        return found[0]

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    def format_observation_messages(self, message: dict[str, Any], outputs: list[dict[str, Any]],
                                    template_vars: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        observed: list[dict[str, Any]] = format_observation_messages(
            outputs, observation_template=self.config.observation_template, template_vars=template_vars,
            multimodal_regex=self.config.multimodal_regex)
        return observed

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.config.model_dump()

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"model": self.config.model_dump(mode="json"),
                                    "model_type": f"{type(self).__module__}.{type(self).__name__}"}}}


def mini_config(recording: Recording, *, instances: Path | str, repos: Path | str | None) -> dict[str, Any]:
    """The published run's config (`info.config`, mini 1.x) as mini 2.x takes it, on the harness.

    What changed from 1.x: the action regex, format-error and observation templates moved from the
    agent to the model; the observation starts with mini 2.x's exception line (1.x rendered a timeout
    template instead); `max_consecutive_format_errors` is 0 (1.x had no such limit); commands run with
    `bash -c` (mini 2.x's interpreter; 1.x ran `bash -lc`, whose login profile resets PATH); the
    environment is `HarnessEnvironment` on the instance's offline image, its cwd, env and timeout the
    published ones.
    """
    agent, env = recording.config.get("agent", {}), recording.config.get("environment", {})
    model = recording.config.get("model", {})
    return {
        "agent": {"system_template": agent["system_template"], "instance_template": agent["instance_template"],
                  "step_limit": agent.get("step_limit", 0), "cost_limit": agent.get("cost_limit", 3.0),
                  "max_consecutive_format_errors": 0},
        "model": {"model_class": f"{__name__}.ReplayModel", "trajectory_dir": str(recording.path.parent),
                  "instance_id": recording.instance_id, "model_name": model.get("model_name", "replay"),
                  "action_regex": agent.get("action_regex", ACTION_REGEX_V1),
                  "format_error_template": agent.get("format_error_template", "{{ error }}"),
                  "observation_template": EXCEPTION_LINE + agent["action_observation_template"]},
        "environment": {"environment_class": "harness.integrations.mini.HarnessEnvironment",
                        "cwd": env.get("cwd", "/testbed"), "env": dict(env.get("env", {})),
                        "timeout": env.get("timeout", 60), "interpreter": ["bash", "-c"],
                        "instances": str(instances), "instance_id": recording.instance_id,
                        "repos": str(repos) if repos else None},
    }


@dataclass(frozen=True)
class ReplayResult:
    """One replay: mini's exit status and submission, the model calls served, the wall time, and the
    first observation that differs from the recorded one (its 1-based step, recorded and replayed text)."""

    instance_id: str
    exit_status: str
    submission: str
    steps: int
    seconds: float
    task_matches: bool
    first_difference: tuple[int, str, str] | None
    messages: list[dict[str, Any]] = field(repr=False)


def run_replay(recording: Recording, *, instances: Path | str, repos: Path | str | None,
               problem_statement: str, output_path: Path | None = None) -> ReplayResult:
    """Replay `recording` with mini's `DefaultAgent`, its model and environment made by mini's own
    factories from `mini_config`; the sandbox is removed at the end."""
    config = mini_config(recording, instances=instances, repos=repos)
    started = time.monotonic()
    model = get_model(config=config["model"])
    env = get_environment(dict(config["environment"]))
    try:
        agent = DefaultAgent(model, env, **config["agent"], output_path=output_path)
        info = agent.run(problem_statement)
    finally:
        env.close()   # type: ignore[attr-defined]   # HarnessEnvironment.close; mini's protocol has none
    users = [str(m.get("content")) for m in agent.messages if m.get("role") == "user"]
    return ReplayResult(recording.instance_id, str(info.get("exit_status", "")), str(info.get("submission", "")),
                        int(getattr(model, "served", agent.n_calls)), time.monotonic() - started,
                        users[:1] == [recording.task_message], first_difference(recording.observations, users[1:]),
                        agent.messages)


def first_difference(recorded: tuple[str, ...] | list[str], replayed: list[str]) -> tuple[int, str, str] | None:
    """The first observation (1-based) where the replay's differs from the recording's, or None."""
    for n, (theirs, ours) in enumerate(zip(recorded, replayed, strict=False), start=1):
        if theirs != ours:
            return n, theirs, ours
    if len(recorded) != len(replayed):
        n = min(len(recorded), len(replayed))
        return n + 1, "".join(recorded[n:n + 1]), "".join(replayed[n:n + 1])
    return None


def without_index_lines(patch: str) -> str:
    """`patch` without its `index <blob>..<blob>` lines (abbreviation lengths differ between clones)."""
    return "".join(line for line in patch.splitlines(keepends=True) if not line.startswith("index "))


def same_patch(a: str, b: str) -> bool:
    """Whether two unified diffs are the same change, index lines aside."""
    return without_index_lines(a) == without_index_lines(b)


__all__ = ["ReplayModel", "ReplayModelConfig", "ReplayResult", "Recording", "load_recording", "mini_config",
           "run_replay", "same_patch"]
