"""Hostile instances, predictions and task files, run as an attacker would write them.

Each attack is run as written, through the real command line where it was found: a path that climbs out
of the source cache, options smuggled into git through base_commit, a model patch that swaps the tests
for a link to a host folder, a patch that GNU patch stops half way, an id with a trailing newline, a
decompression bomb. Every refusal is checked for its message (value, what was expected, an example)
and for the host being unchanged; every probe has a positive control showing it is live.
"""

from __future__ import annotations

import gzip
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core import sources
from harness.core.sources import MAX_SOURCE_FILES, extract_tarball
from harness.core.task import check_meta, load_task
from harness.errors import TaskError, UnsafePathError
from harness.evaluation.grading import grade_patch
from harness.evaluation.instance_files import load_instances, load_predictions

from .conftest import TASKS, TEST_LABELS

HARNESS = [sys.executable, "-m", "harness.cli.main"]
ROW = {"instance_id": "acme__proj-1", "repo": "acme/proj", "problem_statement": "fix it",
       "FAIL_TO_PASS": ["tests/test_x.py::test_y"], "PASS_TO_PASS": [], "requirements": ["pytest==8.3.5"],
       "test_cmd": "python -m pytest -rA", "python": "3.11"}


def _snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under `root` with its kind and content (a link's target, a file's bytes)."""
    found: dict[str, tuple[str, bytes]] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            full = Path(base, name)
            rel = str(full.relative_to(root))
            if full.is_symlink():
                found[rel] = ("link", os.readlink(full).encode())
            elif full.is_dir():
                found[rel] = ("dir", b"")
            else:
                found[rel] = ("file", full.read_bytes())
    return found


def _fake_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / "documents").mkdir()
    (home / "documents" / "thesis.txt").write_text("four years of work\n")
    (home / ".cache" / "harness" / "sources").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    return home, env


def _write_instances(path: Path, **fields: object) -> Path:
    path.write_text(json.dumps({**ROW, **fields}) + "\n")
    return path


def _tarball(path: Path, files: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _eval_instances(tmp_path: Path, instances: Path, repos: Path,
                    env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, "eval", "--instances", str(instances), "--repos", str(repos), "--model",
                           "empty", "--out", str(tmp_path / "out"), "--label", "harness.test=1"],
                          env=env, capture_output=True, text=True, timeout=300)


# ---- 8: base_commit climbing out of the source cache ------------------------------------------------

def test_base_commit_climbing_to_the_home_folder_is_refused_and_the_home_is_untouched(tmp_path):
    home, env = _fake_home(tmp_path)
    repos = tmp_path / "repos"
    _tarball(repos / "acme__proj-1.tar.gz", {"proj/tests/test_x.py": b"def test_y():\n    pass\n"})
    instances = _write_instances(tmp_path / "instances.jsonl", base_commit="/../../../..")
    before = _snapshot(home)

    proc = _eval_instances(tmp_path, instances, repos, env)

    assert proc.returncode == 2, proc.stderr
    assert "base_commit '/../../../..' is not a git commit id; expected 7 to 40 lowercase hex digits, e.g. " \
           "\"e3a3e6a4c8c6f0a1b2d3e4f5a6b7c8d9e0f1a2b3\"" in proc.stderr
    assert _snapshot(home) == before
    assert not (tmp_path / "out").exists()


def test_a_hex_base_commit_is_extracted_inside_the_cache_of_that_same_home(tmp_path, monkeypatch):
    """Positive control: the fake home is where the source cache is, so the attack above aimed at it."""
    home, env = _fake_home(tmp_path)
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
    repos = tmp_path / "repos"
    _tarball(repos / "acme__proj-1.tar.gz", {"proj/tests/test_x.py": b"def test_y():\n    pass\n"})
    instances = _write_instances(tmp_path / "instances.jsonl", base_commit="0123456789abcdef0123")

    (task,) = load_instances(instances, repos)

    assert task.repo_dir == home / ".cache" / "harness" / "sources" / "acme__proj-1-0123456789ab"
    assert (task.repo_dir / "tests" / "test_x.py").read_text() == "def test_y():\n    pass\n"
    assert (home / "documents" / "thesis.txt").read_text() == "four years of work\n"


def test_extraction_refuses_a_destination_outside_its_root_before_removing_anything(tmp_path):
    home, _ = _fake_home(tmp_path)
    root = home / ".cache" / "harness" / "sources"
    (root / "x-").mkdir()
    tarball = _tarball(tmp_path / "x.tar.gz", {"a.py": b"A = 1\n"})
    before = _snapshot(home)

    with pytest.raises(UnsafePathError, match=r"path '\.\./\.\./\.\.' is not a relative path inside"):
        extract_tarball(tarball, root / "x-/../../../..", root)

    assert _snapshot(home) == before
    extract_tarball(tarball, root / "x-ok", root)          # control: inside the root it works
    assert (root / "x-ok" / "a.py").read_text() == "A = 1\n"


@pytest.mark.parametrize("field, value, expected", [
    ("instance_id", "../../escape", "instance_id '../../escape' cannot name a folder"),
    ("instance_id", "abc\n", "instance_id 'abc\\n' cannot name a folder"),
    ("repo", "../..", "repo '../..' is not owner/name"),
    ("repo", "acme/..", "repo 'acme/..' is not owner/name"),
])
def test_every_instance_field_that_becomes_a_path_is_checked_at_load_time(tmp_path, field, value, expected):
    instances = _write_instances(tmp_path / "instances.jsonl", base_commit="0123456789abcdef0123",
                                 **{field: value})
    with pytest.raises(TaskError) as caught:
        load_instances(instances, tmp_path / "repos")
    assert expected in str(caught.value) and "e.g." in str(caught.value)


def test_a_task_id_with_a_trailing_newline_is_refused_and_a_plain_one_accepted():
    meta = json.loads((TASKS / "cart" / "task.json").read_text())
    problems = check_meta({**meta, "id": "cart\n"}, "task.json")
    assert problems == ["task.json: id 'cart\\n' cannot name a folder; expected letters, digits, '_', '.' and "
                        "'-' (starting with a letter or digit, at most 200), e.g. \"django__django-11099\""]
    assert check_meta({**meta, "id": "cart"}, "task.json") == []


def test_a_python_version_with_a_trailing_newline_is_refused_and_a_plain_one_accepted():
    meta = json.loads((TASKS / "cart" / "task.json").read_text())
    problems = check_meta({**meta, "python": "3.11\n"}, "task.json")
    assert len(problems) == 1 and "'3.11\\n'" in problems[0], problems
    assert check_meta({**meta, "python": "3.11"}, "task.json") == []


def test_a_prediction_for_an_id_that_cannot_name_a_folder_is_refused(tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": "../x", "model_name_or_path": "m", "model_patch": ""}) + "\n")
    with pytest.raises(TaskError, match=r"prediction #1: instance_id '\.\./x' cannot name a folder"):
        load_predictions(preds)


# ---- 3: options smuggled into git through base_commit -----------------------------------------------

@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that records the path of every request."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()


def _clone(repos: Path) -> Path:
    clone = repos / "acme__proj"
    (clone / "tests").mkdir(parents=True)
    (clone / "tests" / "test_x.py").write_text("def test_y():\n    pass\n")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    return clone


def test_base_commit_output_option_does_not_reach_git_and_the_file_is_unchanged(tmp_path):
    home, env = _fake_home(tmp_path)
    clone = _clone(tmp_path / "repos")
    target = home / "documents" / "thesis.txt"
    control = tmp_path / "control.txt"
    control.write_text("four years of work\n")
    # control: the option as the old code passed it really truncates a file
    proc = subprocess.run(["git", "-C", str(clone), "archive", "--format=tar", f"--output={control}"],
                          capture_output=True)
    assert proc.returncode == 129 and control.read_bytes() == b""

    instances = _write_instances(tmp_path / "instances.jsonl", base_commit=f"--output={target}")
    proc = _eval_instances(tmp_path, instances, tmp_path / "repos", env)

    assert proc.returncode == 2, proc.stderr
    assert f"base_commit '--output={target}' is not a git commit id; expected 7 to 40 lowercase hex" in proc.stderr
    assert target.read_text() == "four years of work\n"


def test_base_commit_remote_option_makes_no_request(tmp_path, counting_server):
    url, seen = counting_server
    _, env = _fake_home(tmp_path)
    clone = _clone(tmp_path / "repos")
    # control: the option as the old code passed it makes git call the server
    subprocess.run(["git", "-C", str(clone), "archive", "--format=tar", f"--remote={url}/control"],
                   capture_output=True, timeout=60)
    assert seen and seen[0].startswith("/control")
    seen.clear()

    instances = _write_instances(tmp_path / "instances.jsonl", base_commit=f"--remote={url}/x")
    proc = _eval_instances(tmp_path, instances, tmp_path / "repos", env)

    assert proc.returncode == 2, proc.stderr
    assert f"base_commit '--remote={url}/x' is not a git commit id" in proc.stderr
    assert seen == []


# ---- smaller: a decompression bomb ------------------------------------------------------------------

def test_a_tarball_with_more_members_than_the_cap_is_refused_with_the_cap_named(tmp_path):
    root = tmp_path / "sources"
    root.mkdir()
    bomb = tmp_path / "bomb.tar.gz"                      # one empty member, repeated: 50 MB of tar, 200 KB gzipped
    header = tarfile.TarInfo("f").tobuf(tarfile.GNU_FORMAT)
    with gzip.open(bomb, "wb", compresslevel=1) as out:
        out.write(header * (MAX_SOURCE_FILES + 1) + bytes(1024))

    with pytest.raises(TaskError) as caught:
        extract_tarball(bomb, root / "bomb", root)

    message = str(caught.value)
    assert f"holds more than {MAX_SOURCE_FILES} members" in message and "MAX_SOURCE_FILES" in message
    assert "raise both pairs of caps" in message
    assert list(root.iterdir()) == []                      # nothing extracted, nothing partial


def test_a_tarball_whose_content_exceeds_the_size_cap_is_refused_before_writing(tmp_path):
    root = tmp_path / "sources"
    root.mkdir()
    big = tmp_path / "big.tar.gz"
    with tarfile.open(big, "w:gz", compresslevel=1) as tar:               # 600 MiB of zeros: a few hundred KiB gzipped
        info = tarfile.TarInfo("zeros.bin")
        info.size = 600 * 1024 * 1024

        class Zeros(io.RawIOBase):
            def readable(self) -> bool:
                return True

            def readinto(self, buf: bytearray) -> int:    # type: ignore[override]
                buf[:] = bytes(len(buf))
                return len(buf)
        tar.addfile(info, io.BufferedReader(Zeros()))

    with pytest.raises(TaskError, match=rf"more than {sources.MAX_SOURCE_BYTES} bytes once extracted "
                                        r"\(member 'zeros.bin' reaches 629145600\)"):
        extract_tarball(big, root / "big", root)
    assert list(root.iterdir()) == []


# ---- 2: a model patch that swaps the tests for a link to a host folder -------------------------------

def _patch_from(tmp_path: Path, change: str) -> str:
    """A git diff of the cart project after `change` (a shell snippet run in a copy of it)."""
    work = tmp_path / "work"
    subprocess.run(["cp", "-r", str(TASKS / "cart" / "repo"), str(work)], check=True)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    subprocess.run(["bash", "-c", change], cwd=work, check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    return subprocess.run(git + ["diff", "--cached", "HEAD"], capture_output=True, text=True, check=True).stdout


def test_a_model_patch_linking_tests_to_a_host_folder_changes_nothing_on_the_host(tmp_path, docker_client):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "test_cart.py").write_text("precious host file\n")
    stat_before = os.stat(victim / "test_cart.py")
    before = _snapshot(victim)
    patch = _patch_from(tmp_path, f"rm -r tests && ln -s {victim} tests")
    assert "new file mode 120000" in patch and str(victim) in patch          # the attack as written
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": "cart", "model_name_or_path": "attacker", "model_patch": patch}) + "\n")

    proc = subprocess.run([*HARNESS, "eval", str(TASKS / "cart"), "--predictions", str(preds), "--out",
                           str(tmp_path / "out"), "--json", "--label", "harness.test=1"],
                          capture_output=True, text=True, timeout=900)

    assert proc.returncode in (0, 1), proc.stderr
    assert _snapshot(victim) == before
    assert os.stat(victim / "test_cart.py").st_ino == stat_before.st_ino
    assert os.stat(victim / "test_cart.py").st_mtime_ns == stat_before.st_mtime_ns
    report = json.loads(proc.stdout)
    assert report["unresolved_ids"] == ["cart"] and report["error_instances"] == 0   # graded on the real tests
    cart = json.loads((tmp_path / "out" / "instances" / "cart" / "report.json").read_text())["cart"]
    assert "tests/test_cart.py::test_total_without_coupon" in cart["tests_status"]["PASS_TO_PASS"]["success"]
    applied = (tmp_path / "out" / "instances" / "cart" / "patch_apply.txt").read_text()
    assert "Applied patch tests cleanly." in applied        # control: the link was made, in the sandbox


def test_patch_stopping_half_way_after_its_dry_run_leaves_nothing_on_the_host(tmp_path, sandbox_image):
    victim = tmp_path / "victim"
    victim.mkdir()
    patch = (f"diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n"
             f"+{victim}\n\\ No newline at end of file\n"
             "diff --git a/link/evil.txt b/link/evil.txt\nnew file mode 100644\n--- /dev/null\n"
             "+++ b/link/evil.txt\n@@ -0,0 +1 @@\n+pwned\n")
    task = load_task(TASKS / "cart")
    temp_before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("harness-grade-*"))

    grade = grade_patch(task, patch, sandbox_image, labels=TEST_LABELS)

    assert not grade.patch_applied and grade.runs == []
    out = grade.patch_output
    assert "error: affected file 'link/evil.txt' is beyond a symbolic link" in out       # git refused it whole
    assert "patching symbolic link link\nInvalid file name link/evil.txt -- skipping patch" in out  # half way
    assert list(victim.iterdir()) == []
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("harness-grade-*")) == temp_before
