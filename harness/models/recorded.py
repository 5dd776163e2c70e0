"""`replay:DIR`: a model serving the assistant messages of a published mini-swe-agent trajectory.

`RecordedModel` reads `DIR/<instance_id>.traj.json` (mini-swe-agent's published format,
`trajectory_format: mini-swe-agent-1`) and answers each call with the next recorded assistant message,
in order and whatever it is sent, as a text `ModelResponse` with the call's recorded usage. It is for a
third-party agent run through the gateway (the agent parses each message into its own action), never
for the harness's own loop, whose tools the recorded text does not call. Running out raises
`ScriptExhausted`. `info` is the trajectory's `info` as recorded (the agent's version, `mini_version`,
and the run's settings, `config`), which the runner hands to the replaying agent. Read with the
standard library only: no mini-swe-agent import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import checks
from harness.errors import ConfigError, ScriptExhausted, TaskError, UnsafePathError
from harness.messages import Message, TextBlock
from harness.models.base import ModelResponse, Usage

TRAJECTORY_FORMATS = ("mini-swe-agent-1", "mini-swe-agent-1.1")


@dataclass(frozen=True)
class RecordedReply:
    text: str
    usage: Usage
    raw: dict[str, Any] | None     # the provider's recorded response, when the file holds it


def load_replies(directory: Path | str, instance_id: str) -> tuple[Path, tuple[RecordedReply, ...], dict[str, Any]]:
    """The recorded assistant messages of `directory/<instance_id>.traj.json`, in order, and its `info`.

    Raises:
        ConfigError: the id cannot name a file, or the file is missing, not JSON, or not a
            mini-swe-agent-1 trajectory with assistant messages.
    """
    try:
        iid = checks.identifier(instance_id, "replay model")
    except TaskError as exc:
        raise ConfigError(str(exc)) from exc
    path = Path(directory) / f"{iid}.traj.json"
    try:
        data = json.loads(checks.read_beneath(Path(directory), path.name))
    except (OSError, ValueError, UnsafePathError) as exc:
        raise ConfigError(f"cannot read the recorded trajectory {path}: {exc}; expected mini-swe-agent's "
                          "published trajectory file (trajectory_format: mini-swe-agent-1), e.g. "
                          "--model replay:trajectories/ with trajectories/django__django-11099.traj.json") from exc
    replies = parse_replies(data, path)
    return path, replies, dict(data["info"]) if isinstance(data.get("info"), dict) else {}


def parse_replies(data: object, path: Path) -> tuple[RecordedReply, ...]:
    """Every problem of the file's shape named at once."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object with 'messages', got {type(data).__name__}")
    problems = []
    if data.get("trajectory_format") not in TRAJECTORY_FORMATS:
        problems.append(f"trajectory_format is {data.get('trajectory_format')!r}, expected one of "
                        f"{list(TRAJECTORY_FORMATS)}")
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        problems.append("'messages' is not a list of objects")
        messages = []
    replies = [m for m in messages if m.get("role") == "assistant"]
    bad = [n for n, m in enumerate(replies, start=1) if not isinstance(m.get("content"), str)]
    if bad:
        problems.append(f"assistant messages {bad[:5]} have no text content")
    if not replies:
        problems.append("no assistant message is recorded")
    if problems:
        raise ConfigError(f"{path} is not a replayable mini-swe-agent trajectory: {'; '.join(problems)}")
    return tuple(_reply(m) for m in replies)


def _reply(message: dict[str, Any]) -> RecordedReply:
    extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
    response = extra.get("response") if isinstance(extra, dict) else None
    response = response if isinstance(response, dict) else None
    u = response.get("usage") if response else None
    return RecordedReply(str(message["content"]), _usage(u) if isinstance(u, dict) else Usage(), response)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(u: dict[str, Any]) -> Usage:
    """A recorded OpenAI-shaped usage (mini records litellm's) as harness Usage: input without cached tokens."""
    details = u.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    prompt = _count(u.get("prompt_tokens"))
    return Usage(input_tokens=max(0, prompt - cached), output_tokens=_count(u.get("completion_tokens")),
                 cache_read_tokens=min(cached, prompt))


class RecordedModel:
    """Serves the recorded replies in order, one per call, whatever the messages say."""

    def __init__(self, directory: Path | str, instance_id: str, name: str | None = None) -> None:
        self.path, self.replies, self.info = load_replies(directory, instance_id)
        self.name = name or f"replay:{directory}"
        self.instance_id = instance_id
        self.served = 0

    @property
    def left(self) -> int:
        return len(self.replies) - self.served

    def respond(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelResponse:
        if self.served >= len(self.replies):
            raise ScriptExhausted(
                f"the recording {self.path} holds {len(self.replies)} assistant messages, all served, and the "
                f"agent asked for message {self.served + 1}: the replayed run went on where the published one "
                "ended; compare the replay's observations with the recorded ones to find where it diverged")
        reply = self.replies[self.served]
        self.served += 1
        return ModelResponse(Message("assistant", (TextBlock(reply.text),)), "end_turn", reply.usage, reply.raw)
