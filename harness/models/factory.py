"""One place that turns a model spec into a Model.

Specs: ``anthropic:MODEL``, ``openai:MODEL``, ``local:NAME`` (a packaged model served on this machine,
harness.models.local), ``scripted:PATH`` (a file, or a script shipped in harness/data/scripts),
``gold`` and ``empty`` (reference models for evaluation, need a task; a scripted plan gives each
attempt at a task its own script, `scripted.load_script`), ``replay:DIR`` (a published
mini-swe-agent trajectory's messages, DIR/<instance_id>.traj.json, harness.models.recorded: only for a
third-party agent, `for_agent=True`, and with an `instance_id`), and ``auto``: Anthropic when
ANTHROPIC_API_KEY is set, else OpenAI when OPENAI_API_KEY (or a base URL) is. With
``model.tool_format = "react"`` the model is wrapped in the ReAct text protocol; ``"auto"`` is native
tool calls, except for local models (`tool_format`).

`open_model` is how a run gets its model: a `local:` model's server is started on the way in and
stopped on the way out, whatever ends the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from harness.config import Config, Secrets
from harness.core.task import Task
from harness.errors import ConfigError
from harness.models import gold
from harness.models.anthropic import AnthropicModel
from harness.models.base import Model
from harness.models.local import LocalModel, local_spec
from harness.models.openai import OpenAIModel
from harness.models.react import ReActModel
from harness.models.recorded import RecordedModel
from harness.models.scripted import load_script

DEFAULT_ANTHROPIC = "claude-sonnet-4-5"
DEFAULT_OPENAI = "gpt-4.1"
EXAMPLES = ("anthropic:claude-sonnet-4-5, openai:gpt-4.1, local:gemma3-270m, scripted:path/to/script.json, "
            "gold, empty, replay:DIR (with --agent)")
TOOL_FORMATS = ("auto", "native", "react")


def resolve_auto(spec: str, config: Config, secrets: Secrets) -> str:
    """`auto` made concrete from the keys present, or the spec unchanged."""
    if spec != "auto":
        return spec
    if secrets.anthropic_api_key:
        return f"anthropic:{DEFAULT_ANTHROPIC}"
    if secrets.openai_api_key or secrets.openai_base_url or config.model.base_url:
        return f"openai:{DEFAULT_OPENAI}"
    raise ConfigError("no model given and no API key found: set ANTHROPIC_API_KEY or OPENAI_API_KEY "
                      "(or OPENAI_BASE_URL for a local server), or pass --model, e.g. "
                      "--model scripted:wordcount-fix (the scripted demo run that ships with harness)")


def tool_format(spec: str, config: Config) -> str:
    """config.model.tool_format made concrete: "auto" is native, except for a local model, whose spec
    names the format that measured better (harness.models.local, docs/loop.md)."""
    chosen = config.model.tool_format
    if chosen not in TOOL_FORMATS:
        raise ConfigError(f"tool format {chosen!r} is unknown; expected one of {list(TOOL_FORMATS)}, "
                          "e.g. --tool-format react")
    if chosen != "auto":
        return chosen
    provider, _, name = spec.partition(":")
    return local_spec(name).default_format if provider == "local" else "native"


def make_model(spec: str, config: Config, secrets: Secrets, *, task: Task | None = None,
               instance_id: str | None = None, for_agent: bool = False, attempt: int = 1) -> Model:
    """The Model for `spec`, wrapped for ReAct when the tool format (`tool_format`) is "react".

    `for_agent`: the model serves a third-party agent through the gateway rather than our own loop
    (only such a model may be `replay:DIR`, which needs `instance_id`, by default the task's id).
    `attempt`: which attempt at the task this is (`harness eval --epochs`; a scripted plan's choice).
    """
    spec = resolve_auto(spec, config, secrets)
    if spec.startswith("replay:"):
        return _replay(spec, for_agent, instance_id or (task.id if task else None))
    fmt = tool_format(spec, config)
    config = config.replace(model=dataclasses.replace(config.model, tool_format=fmt))
    model = _make(spec, config, secrets, task, attempt)
    if fmt == "react" and spec not in ("gold", "empty"):
        return ReActModel(model)
    return model


@contextmanager
def open_model(spec: str, config: Config, secrets: Secrets, *, task: Task | None = None,
               say: Callable[[str], None] = lambda _m: None, instance_id: str | None = None,
               for_agent: bool = False, attempt: int = 1) -> Iterator[Model]:
    """`make_model` for the length of a `with` block: a local model's server runs only inside it."""
    with running(make_model(spec, config, secrets, task=task, instance_id=instance_id, for_agent=for_agent,
                            attempt=attempt), say) as model:
        yield model


@contextmanager
def running(model: Model, say: Callable[[str], None] = lambda _m: None) -> Iterator[Model]:
    """`model`, with its local server (if it has one) started on the way in and stopped on the way out."""
    local = model.inner if isinstance(model, ReActModel) else model
    if not isinstance(local, LocalModel):
        yield model
        return
    try:
        local.start(say)
        yield model
    finally:
        local.close()


def _make(spec: str, config: Config, secrets: Secrets, task: Task | None, attempt: int) -> Model:
    if spec in ("gold", "empty"):
        return _reference(spec, task)
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise ConfigError(f"model spec {spec!r} is not PROVIDER:NAME; expected one of: {EXAMPLES}")
    max_tokens = config.loop.max_tokens_per_response
    if provider == "scripted":
        return load_script(name, name=spec, instance_id=task.id if task else None, attempt=attempt)
    if provider == "anthropic":
        if not secrets.anthropic_api_key:
            raise ConfigError(f"{spec} needs an API key: set ANTHROPIC_API_KEY (e.g. export "
                              "ANTHROPIC_API_KEY=sk-ant-...)")
        return AnthropicModel(name, api_key=secrets.anthropic_api_key, config=config.model,
                              max_tokens=max_tokens, base_url=config.model.base_url)
    if provider == "openai":
        base_url = config.model.base_url or secrets.openai_base_url
        if not secrets.openai_api_key and not base_url:
            raise ConfigError(f"{spec} needs OPENAI_API_KEY, or a server: --base-url "
                              "http://localhost:8000/v1 (vLLM, llama.cpp, Ollama)")
        return OpenAIModel(name, api_key=secrets.openai_api_key, config=config.model, max_tokens=max_tokens,
                           base_url=base_url)
    if provider == "local":
        return LocalModel(name, config)
    raise ConfigError(f"unknown model provider {provider!r} in {spec!r}; expected one of: {EXAMPLES}")


def replay_for(directory: str, instance_id: str) -> RecordedModel:
    """The `replay:DIR` model of one instance: DIR/<instance_id>.traj.json's assistant messages."""
    return RecordedModel(directory, instance_id, name=f"replay:{directory}")


def _replay(spec: str, for_agent: bool, instance_id: str | None) -> Model:
    directory = spec.partition(":")[2]
    if not for_agent:
        raise ConfigError(f"{spec}: replay serves a recorded third-party agent's messages; use it with --agent "
                          f"..., e.g. --agent mini-swe-agent --model {spec} (the recording calls no tool of our own "
                          "loop)")
    if not directory:
        raise ConfigError(f"model spec {spec!r} names no folder; expected replay:DIR holding "
                          "<instance_id>.traj.json, e.g. replay:trajectories/")
    if not instance_id:
        raise ConfigError(f"{spec} needs an instance id to pick DIR/<instance_id>.traj.json; run it on one "
                          "instance or task, e.g. --instance django__django-11099")
    return replay_for(directory, instance_id)


def _reference(spec: str, task: Task | None) -> Model:
    if spec == "empty":
        return gold.EmptyModel()
    if task is None or not task.gold_patch:
        raise ConfigError("the 'gold' model replays a task's reference fix and this task has none "
                          "(no gold.patch in the task directory); use it with a task that has gold.patch")
    return gold.GoldModel(task.gold_patch)
