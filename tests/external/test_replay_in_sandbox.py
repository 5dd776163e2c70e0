"""A published mini-swe-agent 1.15.0 run replayed INSIDE the sandbox, through the CLI, and the refusals
around it.

`harness eval --agent mini-swe-agent==1.15.0 --model replay:DIR` installs the real mini-swe-agent 1.15.0
into the instance's offline environment image (whose python3 is 3.9: the agent gets a Python 3.11 of its
own), runs its own `mini` command with the recorded run's settings, serves the recorded assistant
messages through the gateway, and grades the patch the harness extracts. The first run builds the
django__django-11099 environment and the agent's image (minutes); after that the test takes about a
minute (the replay, then Django's tests twice: the session's verdict and the grading).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.integrations.replay import load_recording, parse_recording, same_patch
from tests.external.published import SHORTEST_WITH_SOURCE, SWEBENCH, TRAJECTORIES, published_patch, swebench_row

HARNESS = [sys.executable, "-m", "harness.cli.main"]
AGENT = "mini-swe-agent==1.15.0"


def instances_file(folder: Path, *ids: str) -> Path:
    path = folder / "instances.jsonl"
    path.write_text("".join(json.dumps(swebench_row(i)) + "\n" for i in ids))
    return path


def evaluate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, "eval", "--repos", str(SWEBENCH / "repos"), "--workers", "1",
                           "--out", str(tmp_path / "out"), "--label", "harness.test=1", "--json", *args],
                          capture_output=True, text=True, timeout=3600)


@pytest.mark.docker
@pytest.mark.slow
def test_a_published_1x_run_replays_inside_the_sandbox_to_the_published_patch_and_verdict(tmp_path: Path) -> None:
    assert (TRAJECTORIES / f"{SHORTEST_WITH_SOURCE}.traj.json").is_file(), \
        f"the published trajectories are not in {TRAJECTORIES}: set HARNESS_TRAJECTORIES"
    run = evaluate(tmp_path, "--instances", str(instances_file(tmp_path, SHORTEST_WITH_SOURCE)), "--agent", AGENT,
                   "--model", f"replay:{TRAJECTORIES}")
    assert run.returncode == 0, run.stderr[-3000:]
    entry = json.loads(run.stdout)["instances"][SHORTEST_WITH_SOURCE]
    folder = tmp_path / "out" / "instances" / SHORTEST_WITH_SOURCE
    recording = load_recording(TRAJECTORIES, SHORTEST_WITH_SOURCE)
    assert same_patch((folder / "patch.diff").read_text(), published_patch(SHORTEST_WITH_SOURCE))
    assert entry["status"] == "resolved"                       # the official verdict (verdicts.json)
    assert entry["turns"] == len(recording.replies) == 21 and entry["stop_reason"] == "end"
    mine = json.loads((folder / "mini.traj.json").read_text())     # mini's own trajectory, copied out
    assert mine["info"]["mini_version"] == "1.15.0" and mine["info"]["exit_status"] == "Submitted"
    assert same_patch(mine["info"]["submission"], published_patch(SHORTEST_WITH_SOURCE))
    replayed = parse_recording(mine, folder / "mini.traj.json", SHORTEST_WITH_SOURCE)
    assert replayed.task_message == recording.task_message      # the recorded templates, the problem as sent
    assert replayed.replies == recording.replies
    ran, recorded = replayed.config["agent"], recording.config["agent"]     # the recorded settings, as recorded,
    kept = [k for k in recorded if k != "cost_limit"]
    assert {k: ran[k] for k in kept} == {k: recorded[k] for k in kept}
    assert ran["cost_limit"] == 0 and ran["mode"] == "yolo"                 # but no price and no confirmation


def test_a_replay_is_refused_to_our_own_loop_and_for_an_instance_without_a_recording(tmp_path: Path) -> None:
    instances = str(instances_file(tmp_path, SHORTEST_WITH_SOURCE, "django__django-16139"))
    ours = evaluate(tmp_path, "--instances", instances, "--model", f"replay:{TRAJECTORIES}")
    assert ours.returncode == 2 and "use it with --agent" in ours.stderr, ours.stderr[-2000:]
    missing = evaluate(tmp_path, "--instances", instances, "--agent", AGENT, "--model", f"replay:{TRAJECTORIES}")
    assert missing.returncode == 2, missing.stderr[-2000:]
    # only the instance without a recording is named; the one with its recording is not
    assert f"1 instance(s) have none in {TRAJECTORIES}: django__django-16139;" in missing.stderr
    assert not (tmp_path / "out" / "report.json").exists()      # refused before any work
