"""`replay:DIR`: RecordedModel serves a published mini-swe-agent trajectory's assistant messages, in order,
on the real shared trajectories; the factory gives it only to a third-party agent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config import Config, Secrets
from harness.core.task import Task
from harness.errors import ConfigError, ScriptExhausted
from harness.gateway import Gateway, read_records
from harness.messages import user
from harness.models import RecordedModel, Usage, make_model, open_model


def _shared_trajectories() -> Path:
    """$HARNESS_TRAJECTORIES, else shared/trajectories beside the checkout, else /work/shared/trajectories
    (as tests/integrations/test_replay.py finds them, without needing the mini extra)."""
    beside = Path(__file__).resolve().parents[3] / "shared" / "trajectories"
    places = ([Path(os.environ["HARNESS_TRAJECTORIES"])] if os.environ.get("HARNESS_TRAJECTORIES") else []) + [
        beside, Path("/work/shared/trajectories")]
    return next((p for p in places if (p / "django__django-11099.traj.json").exists()), beside)


TRAJECTORIES = _shared_trajectories()
IDS = sorted(p.name.removesuffix(".traj.json") for p in TRAJECTORIES.glob("*.traj.json"))


def _published(instance_id: str) -> list[dict[str, object]]:
    data = json.loads((TRAJECTORIES / f"{instance_id}.traj.json").read_text())
    return [m for m in data["messages"] if m["role"] == "assistant"]


def test_the_shared_trajectories_are_here() -> None:
    assert len(IDS) == 6, f"expected the six published trajectories in {TRAJECTORIES}, found {IDS}"


@pytest.mark.parametrize("instance_id", IDS)
def test_every_recorded_reply_is_served_in_order_with_its_usage_then_it_says_it_ran_out(instance_id: str) -> None:
    published = _published(instance_id)
    model = RecordedModel(TRAJECTORIES, instance_id)
    served = [model.respond([user("anything at all")], []) for _ in published]
    assert [r.message.text for r in served] == [m["content"] for m in published]
    assert all(r.stop_reason == "end_turn" and not r.message.tool_uses for r in served)
    for reply, recorded in zip(served, published, strict=True):
        usage = recorded["extra"]["response"]["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        assert reply.usage == Usage(usage["prompt_tokens"] - cached, usage["completion_tokens"], cached)
    with pytest.raises(ScriptExhausted, match=f"holds {len(published)} assistant messages, all served"):
        model.respond([], [])


def test_the_replies_are_those_the_framework_adapter_replays() -> None:
    pytest.importorskip("minisweagent", reason="the mini extra is not installed: pip install -e '.[mini]'")
    from harness.integrations.replay import load_recording  # noqa: PLC0415 - needs the optional mini extra
    for instance_id in IDS:
        assert RecordedModel(TRAJECTORIES, instance_id).replies and tuple(
            r.text for r in RecordedModel(TRAJECTORIES, instance_id).replies) == load_recording(
                TRAJECTORIES, instance_id).replies


def test_a_missing_malformed_or_escaping_recording_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the recorded trajectory"):
        RecordedModel(tmp_path, "django__django-11099")
    with pytest.raises(ConfigError, match="cannot name a folder"):
        RecordedModel(TRAJECTORIES, "../etc/passwd")
    (tmp_path / "x.traj.json").write_text(json.dumps({"trajectory_format": "other", "messages": [{"role": "user"}]}))
    with pytest.raises(ConfigError, match="trajectory_format is 'other'.*no assistant message"):
        RecordedModel(tmp_path, "x")


def test_the_factory_gives_replay_to_an_agent_with_an_instance_id_and_refuses_it_to_our_loop(tmp_path: Path) -> None:
    spec = f"replay:{TRAJECTORIES}"
    with pytest.raises(ConfigError, match="use it with --agent .*e.g. --agent mini-swe-agent --model replay:"):
        make_model(spec, Config(), Secrets(), instance_id=IDS[0])
    with pytest.raises(ConfigError, match="needs an instance id"):
        make_model(spec, Config(), Secrets(), for_agent=True)
    model = make_model(spec, Config(), Secrets(), for_agent=True, instance_id=IDS[0])
    assert isinstance(model, RecordedModel) and model.name == spec
    task = Task(id=IDS[1], problem_statement="p", repo_dir=tmp_path)
    with open_model(spec, Config(), Secrets(), task=task, for_agent=True) as from_task:
        assert isinstance(from_task, RecordedModel) and from_task.instance_id == IDS[1]


def test_mini_swe_agents_own_litellm_model_reads_a_recording_through_the_gateway(tmp_path: Path) -> None:
    pytest.importorskip("minisweagent", reason="the mini extra is not installed: pip install -e '.[mini]'")
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel  # noqa: PLC0415 - optional extra

    from tests.gateway.conftest import served  # noqa: PLC0415 - beside the optional import
    instance_id = "django__django-11099"
    gateway = Gateway(RecordedModel(TRAJECTORIES, instance_id), record=tmp_path / "calls.jsonl")
    with served(gateway) as url:
        mini = LitellmTextbasedModel(model_name="openai/replay", cost_tracking="ignore_errors",
                                     action_regex=r"```bash\s*\n(.*?)\n```",
                                     model_kwargs={"api_base": f"{url}/v1", "api_key": "dummy", "num_retries": 0})
        first = mini.query([{"role": "system", "content": "You are a coder."},
                            {"role": "user", "content": "Fix the bug."}])
    assert first["content"] == _published(instance_id)[0]["content"]
    assert first["extra"]["actions"][0]["command"].strip()
    assert [r["outcome"] for r in read_records(tmp_path / "calls.jsonl")] == ["answered"]
