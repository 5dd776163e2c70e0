"""`harness eval` checks what it can before any work: each problem gives its exit code (2 bad input, 3
environment) and its message, every problem is listed at once, and no container is started, no output
folder written. Positive control: a valid evaluation of a shipped task passes preflight and runs."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.config import load
from harness.core.task import load_task
from harness.evaluation.instance_files import export_instances
from harness.evaluation.preflight import check_model, check_server

from .conftest import TASKS

PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _containers(docker_client, label: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [c["Id"] for c in docker_client.api.containers(all=True, filters={"label": f"eval.test.run={label}"})]


def _eval(args: list[str], out: Path, capsys: pytest.CaptureFixture[str], docker_client,  # type: ignore[no-untyped-def]
          ) -> tuple[int, str]:
    """`harness eval ARGS` in this process; its exit code and stderr, checking no container of it was
    ever there and nothing was written into `out`."""
    label = f"preflight-{os.getpid()}-{out.name}"
    capsys.readouterr()
    code = main(["eval", *args, "--out", str(out), "--label", "harness.test=1", "--label",
                 f"eval.test.run={label}", "--json"])
    err = capsys.readouterr().err
    assert _containers(docker_client, label) == []
    return code, err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])         # closed again on return: nothing listens there


def test_openai_model_without_key_or_server_is_refused_before_any_build(tmp_path, docker_client, capsys, no_keys):
    out = tmp_path / "out"
    code, err = _eval([str(TASKS / "wordcount"), "--model", "openai:gpt-4.1"], out, capsys, docker_client)
    assert code == 2, err
    assert "preflight: 1 problem(s) found before any environment was built" in err
    assert "--model openai:gpt-4.1: openai:gpt-4.1 needs OPENAI_API_KEY, or a server: --base-url" in err
    assert not out.exists()


def test_model_server_that_does_not_answer_is_an_environment_error(tmp_path, docker_client, capsys, no_keys):
    port = _closed_port()
    out = tmp_path / "out"
    code, err = _eval([str(TASKS / "wordcount"), "--model", "openai:m", "--base-url", f"http://127.0.0.1:{port}/v1"],
                      out, capsys, docker_client)
    assert code == 3, err
    assert f"the model server of --model openai:m at http://127.0.0.1:{port}/v1 is not reachable (Connection " \
           f"refused connecting to 127.0.0.1:{port}" in err
    assert not out.exists()


def test_a_listening_model_server_passes_and_is_sent_nothing(no_keys):
    config, secrets = load({})
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
        assert check_server(url, "server") == []
        conn, _ = server.accept()
        conn.settimeout(1.0)
        with conn:
            assert conn.recv(100) == b""         # connected and closed: not a byte, no key
    config = config.replace(model=dataclasses.replace(config.model, base_url=url))
    assert [p.code for p in check_model("openai:m", [], config, secrets)] == [3]   # the server is gone now


def test_docker_unreachable_is_an_environment_error(tmp_path, docker_client, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    out = tmp_path / "out"
    code, err = _eval([str(TASKS / "wordcount"), "--model", "gold"], out, capsys, docker_client)
    monkeypatch.delenv("DOCKER_HOST")
    assert code == 3, err
    assert "Docker is not available: cannot reach the Docker daemon" in err
    assert not out.exists()


def test_every_problem_is_listed_at_once_and_bad_input_wins(tmp_path, docker_client, capsys, monkeypatch, no_keys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    out = tmp_path / "out"
    code, err = _eval([str(TASKS / "wordcount"), "--model", "anthropic:claude-sonnet-4-5"], out, capsys,
                      docker_client)
    monkeypatch.delenv("DOCKER_HOST")
    assert code == 2, err
    assert "preflight: 2 problem(s)" in err
    assert "needs an API key: set ANTHROPIC_API_KEY" in err and "Docker is not available" in err


def test_gold_needs_a_gold_patch_for_every_task(tmp_path, docker_client, capsys):
    bare = tmp_path / "tasks" / "cart"
    shutil.copytree(TASKS / "cart", bare)
    (bare / "gold.patch").unlink()
    code, err = _eval([str(bare), str(TASKS / "wordcount"), "--model", "gold"], tmp_path / "out", capsys,
                      docker_client)
    assert code == 2, err
    assert "--model gold replays each task's gold patch, and 1 task(s) have none: cart" in err


def test_a_missing_scripted_model_file_is_refused(tmp_path, docker_client, capsys):
    code, err = _eval([str(TASKS / "wordcount"), "--model", f"scripted:{tmp_path}/none.json"], tmp_path / "out",
                      capsys, docker_client)
    assert code == 2, err
    assert "none.json' not found (as a path, nor shipped in harness/data/scripts/)" in err


def test_not_enough_disk_says_the_estimate_the_free_space_and_how_to_skip(tmp_path, docker_client, capsys):
    out = tmp_path / "out"
    code, err = _eval([str(TASKS / "wordcount"), "--model", "gold", "--disk-reserve", "1000000"], out, capsys,
                      docker_client)
    assert code == 3, err
    assert "not enough disk for this evaluation: the environments to build" in err
    assert "Docker's data root /" in err and "GiB free" in err
    assert "--disk-reserve 0" in err and "--skip-disk-check" in err and "harness sandbox prune" in err
    assert not out.exists()


def test_a_valid_evaluation_passes_preflight_and_runs(tmp_path, docker_client, capsys):
    """Positive control: the same command (and the huge reserve, with the check skipped) runs."""
    out = tmp_path / "out"
    code, _ = _eval([str(TASKS / "wordcount"), "--model", "gold", "--disk-reserve", "1000000", "--skip-disk-check"],
                    out, capsys, docker_client)
    assert code == 0
    assert json.loads((out / "report.json").read_text())["resolved_ids"] == ["wordcount"]


def _exported(tmp_path: Path, names: list[str]) -> tuple[Path, Path]:
    rows, repos = tmp_path / "rows.jsonl", tmp_path / "sources"
    export_instances([load_task(TASKS / n) for n in names], rows, repos)
    return rows, repos


def test_every_bad_line_of_the_instance_file_is_reported_at_once(tmp_path, docker_client, capsys):
    rows, repos = _exported(tmp_path, ["cart"])
    good = rows.read_text().splitlines()[0]
    rows.write_text(f"{good}\n{{not json\n[1, 2]\n\n{good[:20]}\n")
    code, err = _eval(["--instances", str(rows), "--repos", str(repos), "--model", "gold"], tmp_path / "out",
                      capsys, docker_client)
    assert code == 2, err
    assert f"3 bad line(s) in {rows}" in err
    for number in (2, 3, 5):
        assert f"{rows}:{number} is" in err


def test_every_instance_without_a_source_in_repos_is_named(tmp_path, docker_client, capsys):
    rows, repos = _exported(tmp_path, ["cart", "wordcount", "pagination"])
    (repos / "cart.tar.gz").unlink()
    (repos / "pagination.tar.gz").unlink()
    code, err = _eval(["--instances", str(rows), "--repos", str(repos), "--model", "gold"], tmp_path / "out",
                      capsys, docker_client)
    assert code == 2, err
    assert "2 instance(s) have no source" in err
    assert f"no source for instance cart in {repos}" in err and f"no source for instance pagination in {repos}" in err
    assert "instance wordcount" not in err


def test_a_repo_url_mirror_that_does_not_exist_is_refused_before_cloning(tmp_path, docker_client, capsys):
    rows, _ = _exported(tmp_path, ["cart", "wordcount"])
    code, err = _eval(["--instances", str(rows), "--repo-url", f"file://{tmp_path}/mirrors/{{repo}}.git",
                       "--model", "gold"], tmp_path / "out", capsys, docker_client)
    assert code == 2, err
    assert f"the mirror of local/cart, file://{tmp_path}/mirrors/local/cart.git, is not a folder" in err
    assert "local/wordcount" in err
    assert "cloning" not in err
