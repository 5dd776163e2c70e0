"""Replay of published mini-swe-agent trajectories (the real package, harness[mini]).

The unit tests drive `ReplayModel` directly; the end-to-end test replays a published trajectory with
mini's own DefaultAgent in a real sandbox on the instance's offline environment image and compares
the submission with the published patch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("minisweagent", reason="the mini extra is not installed: pip install -e '.[mini]'")
from minisweagent.exceptions import FormatError  # noqa: E402

from harness.errors import ConfigError, ScriptExhausted  # noqa: E402
from harness.integrations.replay import ReplayModel, load_recording, run_replay, same_patch  # noqa: E402
from tests.external.published import (  # noqa: E402
    SHORTEST_WITH_SOURCE,
    SWEBENCH,
    TRAJECTORIES,
    published_patch,
    swebench_row,
)


def bash(text: str) -> str:
    return f"THOUGHT: {text}\n\n```bash\n{text}\n```"


def write_trajectory(folder: Path, iid: str, replies: list[str], task: str = "fix it") -> Path:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "you are an agent"},
                                      {"role": "user", "content": task}]
    for n, reply in enumerate(replies):
        messages += [{"role": "assistant", "content": reply,
                      "extra": {"response": {"usage": {"cost": 0.25 * (n + 1)}}}},
                     {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{n}\n</output>"}]
    path = folder / f"{iid}.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "instance_id": iid, "messages": messages,
                                "info": {"exit_status": "Submitted", "config": {}}}))
    return path


def test_the_replay_model_serves_the_recorded_messages_in_order_whatever_it_is_sent(tmp_path: Path) -> None:
    write_trajectory(tmp_path, "demo__repo-1", [bash("echo one"), bash("a") + "\n" + bash("b"), bash("echo three")])
    model = ReplayModel(trajectory_dir=str(tmp_path), instance_id="demo__repo-1")
    first = model.query([{"role": "user", "content": "anything at all"}])
    assert first["content"] == bash("echo one") and first["extra"]["actions"] == [{"command": "echo one"}]
    assert first["extra"]["cost"] == 0.25 and first["extra"]["replay"]["message"] == 1
    with pytest.raises(FormatError) as raised:        # two actions: mini answers with its format error
        model.query([])
    assert raised.value.messages[0]["extra"]["n_actions"] == 2
    assert raised.value.messages[0]["extra"]["cost"] == 0.5             # the call's cost survives the error
    third = model.query([{"role": "user", "content": "something else entirely"}])
    assert third["extra"]["actions"] == [{"command": "echo three"}]
    with pytest.raises(ScriptExhausted, match=r"holds 3 assistant messages, all served, and the agent asked "
                                              r"for message 4"):
        model.query([])


def test_without_an_instance_id_the_recording_is_the_one_whose_task_was_sent(tmp_path: Path) -> None:
    write_trajectory(tmp_path, "demo__repo-1", [bash("echo one")], task="task one")
    write_trajectory(tmp_path, "demo__repo-2", [bash("echo two")], task="task two")
    model = ReplayModel(trajectory_dir=str(tmp_path), cost="zero")
    reply = model.query([{"role": "system", "content": "s"}, {"role": "user", "content": "task two"}])
    assert reply["extra"]["actions"] == [{"command": "echo two"}] and reply["extra"]["cost"] == 0.0
    with pytest.raises(ConfigError, match=r"0 recordings in .* have the task message"):
        ReplayModel(trajectory_dir=str(tmp_path)).query([{"role": "user", "content": "task three"}])


def test_a_bad_key_or_a_file_of_another_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"known keys: .*'trajectory_dir'"):
        ReplayModel(trajectory_dir=str(tmp_path), temperature=0)
    (tmp_path / "x__y-1.traj.json").write_text(json.dumps({"trajectory_format": "other", "messages": []}))
    with pytest.raises(ConfigError, match=r"trajectory_format is 'other'.*no assistant message"):
        ReplayModel(trajectory_dir=str(tmp_path), instance_id="x__y-1")
    with pytest.raises(Exception, match=r"cannot name a folder"):
        ReplayModel(trajectory_dir=str(tmp_path), instance_id="../etc/passwd")


def test_patches_compare_equal_only_when_index_lines_alone_differ() -> None:
    ours = "diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
    theirs = ours.replace("index 1234567..89abcde", "index 1234567890..89abcdef01")
    assert same_patch(ours, theirs)
    assert not same_patch(ours, theirs.replace("+b", "+c"))


@pytest.mark.docker
def test_a_published_trajectory_replays_to_the_published_patch(tmp_path: Path, sandbox_image: str) -> None:
    assert (TRAJECTORIES / f"{SHORTEST_WITH_SOURCE}.traj.json").is_file(), \
        f"the published trajectories are not in {TRAJECTORIES}: set HARNESS_TRAJECTORIES"
    row = swebench_row(SHORTEST_WITH_SOURCE)
    (tmp_path / "instances.jsonl").write_text(json.dumps(row) + "\n")
    recording = load_recording(TRAJECTORIES, SHORTEST_WITH_SOURCE)
    result = run_replay(recording, instances=tmp_path / "instances.jsonl", repos=SWEBENCH / "repos",
                        problem_statement=row["problem_statement"])
    published = published_patch(SHORTEST_WITH_SOURCE)
    assert result.exit_status == "Submitted"
    assert result.task_matches                      # the published config rendered the published task message
    assert result.steps == len(recording.replies) == 21
    assert same_patch(result.submission, published), result.submission
