"""make_model: one factory from a spec string to a Model."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import Config, Secrets
from harness.core.task import load_task
from harness.errors import ConfigError
from harness.models.factory import make_model, resolve_auto, tool_format
from harness.models.local import LOCAL_MODELS

REPO_ROOT = Path(__file__).resolve().parents[2]
NO_KEYS = Secrets()


def _react(config: Config) -> Config:
    return config.replace(model=dataclasses.replace(config.model, tool_format="react"))


def test_auto_prefers_anthropic_then_openai_then_says_what_to_set() -> None:
    cfg = Config()
    assert resolve_auto("auto", cfg, Secrets(anthropic_api_key="a", openai_api_key="o")).startswith("anthropic:")
    assert resolve_auto("auto", cfg, Secrets(openai_api_key="o")).startswith("openai:")
    assert resolve_auto("auto", cfg, Secrets(openai_base_url="http://localhost:8000/v1")).startswith("openai:")
    with pytest.raises(ConfigError, match="no model given and no API key found: set ANTHROPIC_API_KEY"):
        resolve_auto("auto", cfg, NO_KEYS)
    assert resolve_auto("scripted:x.json", cfg, NO_KEYS) == "scripted:x.json"


def test_provider_specs_make_their_adapters() -> None:
    cfg = Config()
    assert make_model("anthropic:claude-x", cfg, Secrets(anthropic_api_key="k")).name == "anthropic:claude-x"
    local = cfg.replace(model=dataclasses.replace(cfg.model, base_url="http://127.0.0.1:9/v1"))
    assert make_model("openai:qwen", local, NO_KEYS).name == "openai:qwen"     # a local server needs no key
    assert make_model("scripted:wordcount-fix", cfg, NO_KEYS).name == "scripted:wordcount-fix"
    assert make_model("scripted:wordcount-fix", _react(cfg), NO_KEYS).name == "scripted:wordcount-fix+react"


def test_missing_key_and_unknown_provider_are_explained() -> None:
    with pytest.raises(ConfigError, match=r"anthropic:claude-x needs an API key: set ANTHROPIC_API_KEY"):
        make_model("anthropic:claude-x", Config(), NO_KEYS)
    with pytest.raises(ConfigError, match=r"openai:gpt-x needs OPENAI_API_KEY, or a server: --base-url"):
        make_model("openai:gpt-x", Config(), NO_KEYS)
    with pytest.raises(ConfigError, match=r"unknown model provider 'gemini' in 'gemini:pro'; expected one of: "
                                          r"anthropic:claude"):
        make_model("gemini:pro", Config(), NO_KEYS)
    with pytest.raises(ConfigError, match=r"model spec 'claude' is not PROVIDER:NAME"):
        make_model("claude", Config(), NO_KEYS)
    bad = Config().replace(model=dataclasses.replace(Config().model, tool_format="xml"))
    with pytest.raises(ConfigError, match=r"tool format 'xml' is unknown; expected one of "
                                          r"\['auto', 'native', 'react'\]"):
        make_model("scripted:wordcount-fix", bad, NO_KEYS)


def test_gold_needs_a_task_with_a_reference_fix_and_empty_does_not() -> None:
    task = load_task(REPO_ROOT / "tasks" / "wordcount")
    assert make_model("gold", Config(), NO_KEYS, task=task).name == "gold"
    assert make_model("gold", _react(Config()), NO_KEYS, task=task).name == "gold"   # never wrapped
    with pytest.raises(ConfigError, match="the 'gold' model replays a task's reference fix and this task has none"):
        make_model("gold", Config(), NO_KEYS, task=dataclasses.replace(task, gold_patch=None))
    assert make_model("empty", Config(), NO_KEYS).name


@pytest.mark.parametrize("sdk,spec,install", [("anthropic", "anthropic:m", 'pip install "harness[anthropic]"'),
                                              ("openai", "openai:m", 'pip install "harness[openai]"')])
def test_missing_sdk_fails_with_the_exact_pip_install_line(sdk: str, spec: str, install: str) -> None:
    code = (f"import sys; sys.modules[{sdk!r}] = None\n"       # as if the SDK were not installed
            "from harness.config import Config, Secrets\nfrom harness.models.factory import make_model\n"
            f"make_model({spec!r}, Config(), Secrets(anthropic_api_key='k', openai_api_key='k'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 1
    assert f"ConfigError: the {sdk} SDK is not installed; run: {install}" in proc.stderr


def test_auto_tool_format_is_native_except_where_a_local_model_measured_otherwise() -> None:
    cfg = Config()
    assert cfg.model.tool_format == "auto"
    assert tool_format("scripted:wordcount-fix", cfg) == "native"
    assert make_model("scripted:wordcount-fix", cfg, NO_KEYS).name == "scripted:wordcount-fix"
    assert tool_format("local:gemma3-270m", cfg) == LOCAL_MODELS["gemma3-270m"].default_format
    assert tool_format("local:gemma3-270m", _react(cfg)) == "react"     # an explicit choice wins
