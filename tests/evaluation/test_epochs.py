"""`harness eval --epochs N` on real runs of the shipped tasks (real Docker, real grading) with the scripted
plan that ships in the package (harness/data/scripts/epochs-mixed.json), whose outcome differs between
epochs: the pass counts, pass@k and flipped instances computed by hand, the files of every attempt, a
run killed mid-way and resumed with no attempt graded twice or lost, a third-party agent on every
epoch, and `harness eval compare` on real evaluation folders."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core import stats
from harness.errors import ConfigError
from harness.models.scripted import load_script, resolve_script

from .conftest import TASKS

REPO_ROOT = TASKS.parent
MIXED = ["wordcount", "pagination", "cart"]
# what epochs-mixed.json plans for 3 epochs: the statuses of epochs 1, 2, 3
PLANNED = {"wordcount": ["resolved", "empty_patch", "resolved"], "pagination": ["resolved"] * 3,
           "cart": ["unresolved", "empty_patch", "resolved"]}


def harness(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout)


def mixed_command(out: Path, label: str) -> list[str]:
    return ["eval", *[str(TASKS / t) for t in MIXED], "--model", "scripted:epochs-mixed", "--epochs", "3",
            "--workers", "2", "--out", str(out), "--label", "harness.test=1", "--label", f"eval.test.run={label}"]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def statuses(report: dict[str, Any]) -> dict[str, list[str | None]]:
    return {iid: row["statuses"] for iid, row in report["attempts"]["per_instance"].items()}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("epochs") / "mixed"
    done = harness(*mixed_command(out, f"mixed-{os.getpid()}"), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads(done.stdout)


@pytest.fixture(scope="module")
def gold(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    """The gold patches of the three tasks and envconfig graded (no agent, one epoch)."""
    out = tmp_path_factory.mktemp("epochs") / "gold"
    done = harness("eval", *[str(TASKS / t) for t in [*MIXED, "envconfig"]], "--predictions", "gold",
                   "--workers", "2", "--out", str(out), "--label", "harness.test=1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_three_epochs_give_the_planned_pass_counts_pass_at_k_and_flipped_instances(
        mixed: tuple[Path, dict[str, Any]]) -> None:
    _, report = mixed
    attempts = report["attempts"]
    assert statuses(report) == PLANNED
    assert {i: (r["passed"], r["graded"]) for i, r in attempts["per_instance"].items()} == {
        "wordcount": (2, 3), "pagination": (3, 3), "cart": (1, 3)}
    assert (attempts["attempts_total"], attempts["attempts_done"], attempts["attempts_resolved"]) == (9, 9, 6)
    # by hand: pass@1 = (2/3 + 1 + 1/3) / 3; pass@2 = (1 + 1 + (1 - C(2,2)/C(3,2))) / 3; pass@3 = 1
    assert attempts["pass_at_k"] == {"1": 0.666667, "2": 0.888889, "3": 1.0}
    assert attempts["pass_at_1"] == 0.666667 and attempts["flipped_ids"] == ["cart", "wordcount"]
    # s^2 = (0 + 1/9 + 1/9) / 3 = 2/27, so n_eff = (2/9) / (2/81) = 9: Wilson's interval for 6 of 9
    assert attempts["effective_n"] == 9.0 and attempts["ci_method"] == "wilson-clustered"
    assert attempts["pass_at_1_ci"] == stats.wilson(2 / 3, 9).as_list()
    assert attempts["left_out"] == {} and attempts["instances_counted"] == 3
    # SWE-bench's keys are epoch 1's
    assert report["epochs"] == 3 and report["total_instances"] == 3
    assert report["resolved_ids"] == ["pagination", "wordcount"] and report["unresolved_ids"] == ["cart"]
    assert {i: r["status"] for i, r in report["instances"].items()} == {i: s[0] for i, s in PLANNED.items()}
    assert report["totals"]["cost_usd"] is None and attempts["totals"]["cost_usd"] is None   # unknown, never 0
    assert attempts["totals"]["cost_unknown"] == 9 and attempts["totals"]["turns"] > report["totals"]["turns"]


def test_every_attempt_has_its_own_folder_record_and_predictions_line(mixed: tuple[Path, dict[str, Any]]) -> None:
    out, _ = mixed
    sessions = set()
    for iid, planned in PLANNED.items():
        assert sorted(p.name for p in (out / "instances" / iid).iterdir()) == ["epoch-1", "epoch-2", "epoch-3"]
        for epoch, status in enumerate(planned, 1):
            folder = out / "instances" / iid / f"epoch-{epoch}"
            done = json.loads((folder / "done").read_text())
            assert (done["instance_id"], done["epoch"], done["status"]) == (iid, epoch, status)
            assert sorted(p.name for p in folder.glob("test_output*")) == ["test_output.txt"]   # graded once
            sessions.add(json.loads((folder / "result.json").read_text())["session"])
    assert len(sessions) == 9                                          # nine sessions, nine sandboxes
    gave_up = (out / "instances" / "wordcount" / "epoch-2" / "trajectory.jsonl").read_text()
    assert "could not find the cause" in gave_up
    assert (out / "predictions.jsonl").read_text() == (out / "predictions.epoch-1.jsonl").read_text()
    for epoch in (1, 2, 3):
        predicted = {p["instance_id"]: p for p in lines(out / f"predictions.epoch-{epoch}.jsonl")}
        assert sorted(predicted) == sorted(MIXED)
        assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in predicted.values())
        empty = sorted(i for i, p in predicted.items() if not p["model_patch"])
        assert empty == sorted(i for i, s in PLANNED.items() if s[epoch - 1] == "empty_patch"), epoch
    assert "return ranked[:n]" in predicted["wordcount"]["model_patch"]


def done_stamps(out: Path) -> dict[str, int]:
    return {str(p.parent.relative_to(out / "instances")): p.stat().st_mtime_ns
            for p in (out / "instances").glob("*/epoch-*/done")}


def test_a_multi_epoch_run_killed_mid_way_resumes_with_no_attempt_graded_twice_or_lost(
        mixed: tuple[Path, dict[str, Any]], tmp_path: Path, docker_client: Any) -> None:
    out, label = tmp_path / "out", f"killed-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", *mixed_command(out, label)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while not (out / "instances").is_dir() or len(done_stamps(out)) < 4:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never finished four attempts"
        time.sleep(0.05)
    proc.kill()
    proc.communicate(timeout=60)
    before = done_stamps(out)
    assert 4 <= len(before) < 9, before
    graded_before = {k: (out / "instances" / k / "test_output.txt").stat().st_mtime_ns for k in before}

    resumed = harness(*mixed_command(out, label), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {len(before)} attempt(s) already finished, {9 - len(before)} to run" in resumed.stderr
    assert {k: v for k, v in done_stamps(out).items() if k in before} == before     # none graded again
    assert {k: (out / "instances" / k / "test_output.txt").stat().st_mtime_ns for k in before} == graded_before
    assert len(done_stamps(out)) == 9                                                  # none lost
    for key in done_stamps(out):
        assert sorted(p.name for p in (out / "instances" / key).glob("test_output*")) == ["test_output.txt"], key
    report = json.loads((out / "report.json").read_text())
    assert statuses(report) == statuses(mixed[1]) == PLANNED
    for epoch in (1, 2, 3):
        assert [(p["instance_id"], p["model_patch"]) for p in lines(out / f"predictions.epoch-{epoch}.jsonl")] == [
            (p["instance_id"], p["model_patch"]) for p in lines(mixed[0] / f"predictions.epoch-{epoch}.jsonl")]
    assert "pass@1 0.667 (95% CI 0.354 to 0.879, wilson-clustered" in resumed.stdout
    assert "pass@2 0.889  pass@3 1.000" in resumed.stdout
    assert "flipped between epochs (2): cart, wordcount" in resumed.stdout
    assert docker_client.api.containers(all=True, filters={"label": f"eval.test.run={label}"}) == []


def test_resume_with_another_number_of_epochs_is_refused(mixed: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(mixed[0]), str(out)], check=True)
    refused = harness(*mixed_command(out, "refused"), "--resume", "--epochs", "2")
    assert refused.returncode == 2
    assert (f"--resume: {out} was run with --epochs 3, not 2; resume with --epochs 3, or use another --out for "
            "another number") in refused.stderr
    assert json.loads((out / "report.json").read_text())["attempts"] == mixed[1]["attempts"]     # untouched


def test_epochs_with_given_predictions_or_out_of_range_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    refused = harness("eval", str(TASKS / "wordcount"), "--predictions", "gold", "--epochs", "2", "--out",
                      str(tmp_path / "p"))
    assert refused.returncode == 2
    assert ("--epochs 2 reruns the agent on each instance, and --predictions runs no agent: the same patch graded "
            "again measures the tests, not the agent (--grade-runs 2 does that)") in refused.stderr
    for bad in ("0", "101"):
        refused = harness("eval", str(TASKS / "wordcount"), "--model", "gold", "--epochs", bad, "--out",
                          str(tmp_path / "n"))
        assert refused.returncode == 2
        assert f"--epochs {bad} is not a number of attempts per instance; expected 1 to 100, e.g. --epochs 5" in (
            refused.stderr)
    assert not (tmp_path / "p").exists() and not (tmp_path / "n").exists()


def test_compare_two_real_evaluations_paired_by_instance(mixed: tuple[Path, dict[str, Any]], gold: Path) -> None:
    done = harness("eval", "compare", str(mixed[0]), str(gold), "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["a"]["epochs"] == 3 and got["b"]["epochs"] == 1 and got["b"]["model"] == "gold"
    assert got["paired_instances"] == 3 and got["left_out"] == {"envconfig": "only in B"}
    assert (got["pass_at_1_a"], got["pass_at_1_b"], got["difference"]) == (0.666667, 1.0, 0.333333)
    # by hand: d = (cart 2/3, pagination 0, wordcount 1/3); W = 5, d' = 1/5, v = (5/9 + 1)/5 - 1/25 = 61/225
    half = stats.Z95 * math.sqrt(61 / 225 / 5)
    assert got["ci"] == [round(0.2 - half, 6), round(0.2 + half, 6)] and got["verdict"] == "no significant difference"
    assert got["changed"] == [{"instance_id": "cart", "a": "1/3", "b": "1/1", "change": "fixed"},
                              {"instance_id": "wordcount", "a": "2/3", "b": "1/1", "change": "fixed"}]
    reverse = harness("eval", "compare", str(gold), str(mixed[0]))
    assert reverse.returncode == 0, reverse.stderr
    assert f"B - A  -0.333  (95% CI {-0.2 - half:+.3f} to {-0.2 + half:+.3f}" in reverse.stdout
    assert "no significant difference (the interval holds 0)" in reverse.stdout
    assert "left out: 1 instance(s): envconfig (only in A)" in reverse.stdout
    assert "  cart  1/1 -> 1/3  broken" in reverse.stdout


def test_compare_exits_1_when_b_is_significantly_worse_and_2_for_bad_input(gold: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("".join(json.dumps({"instance_id": t, "model_name_or_path": "nothing", "model_patch": ""}) + "\n"
                             for t in [*MIXED, "envconfig"]))
    done = harness("eval", *[str(TASKS / t) for t in [*MIXED, "envconfig"]], "--predictions", str(empty),
                   "--out", str(tmp_path / "empty"), "--label", "harness.test=1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    worse = harness("eval", "compare", str(gold), str(tmp_path / "empty"), "--json")
    assert worse.returncode == 1, worse.stderr
    got = json.loads(worse.stdout)
    # d = -1 four times: W = 6, d' = -2/3, v = 5/6 - 4/9 = 7/18; the interval is below 0
    assert got["verdict"] == "worse" and got["ci"][1] == round(-2 / 3 + stats.Z95 * math.sqrt(7 / 18 / 6), 6) < 0
    better = harness("eval", "compare", str(tmp_path / "empty"), str(gold))
    assert better.returncode == 0 and "B is better (the interval is above 0)" in better.stdout   # control
    for args, said in (([str(gold), str(tmp_path)], f"{tmp_path} holds no report.json (a regular file)"),
                       ([str(gold)], "harness eval compare takes two evaluation folders, got 1"),
                       ([str(gold), str(gold), "--model", "gold"], "takes only two folders and --json, not --model")):
        refused = harness("eval", "compare", *args)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr


def test_a_third_party_agent_runs_each_epoch_with_its_own_script(tmp_path: Path, docker_client: Any) -> None:
    out = tmp_path / "agent"
    done = harness("eval", str(TASKS / "wordcount"), "--agent", "tiny", "--model", "scripted:epochs-mixed",
                   "--epochs", "2", "--out", str(out), "--label", "harness.test=1", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert statuses(report) == {"wordcount": ["resolved", "empty_patch"]}
    assert report["attempts"]["flipped_ids"] == ["wordcount"] and report["attempts"]["pass_at_k"]["2"] == 1.0
    for epoch in (1, 2):
        result = json.loads((out / "instances" / "wordcount" / f"epoch-{epoch}" / "result.json").read_text())
        assert result["agent"] == "tiny"
        assert (out / "instances" / "wordcount" / f"epoch-{epoch}" / "calls.jsonl").is_file()


def test_a_scripted_plan_picks_each_attempts_script_and_refuses_what_it_does_not_cover(tmp_path: Path) -> None:
    picked = [load_script("epochs-mixed", instance_id="cart", attempt=k).source for k in (1, 2, 3, 4)]
    assert [s.rsplit(" ", 1)[-1] for s in picked] == ["'cart-wrong')", "'give-up')", "'cart-fix')", "'cart-wrong')"]
    shipped = load_script("epochs-mixed", instance_id="wordcount", attempt=1)
    assert shipped.source.endswith("wordcount-bash.json") and shipped.name == "scripted:" + str(
        resolve_script("epochs-mixed"))
    with pytest.raises(ConfigError, match=r"names a script for each attempt at \['cart', 'pagination', "
                                          r"'wordcount'\], not at 'envconfig'; add it to \"attempts\""):
        load_script("epochs-mixed", instance_id="envconfig")
    with pytest.raises(ConfigError, match="picks a script for each instance and attempt; use it with a task"):
        load_script("epochs-mixed")
    broken = tmp_path / "plan.json"
    broken.write_text(json.dumps({"attempts": {"x": ["nowhere"]}}))
    with pytest.raises(ConfigError, match="scripted model file 'nowhere' not found"):
        load_script(str(broken), instance_id="x")
    broken.write_text(json.dumps({"attempts": {"x": []}}))
    with pytest.raises(ConfigError, match="must map instance ids to non-empty lists of script names"):
        load_script(str(broken), instance_id="x")
    # preflight makes the model of every task: a plan missing one is refused before anything is written
    refused = harness("eval", str(TASKS / "wordcount"), str(TASKS / "envconfig"), "--model", "scripted:epochs-mixed",
                      "--epochs", "2", "--out", str(tmp_path / "out"))
    assert refused.returncode == 2 and "not at 'envconfig'" in refused.stderr and not (tmp_path / "out").exists()
