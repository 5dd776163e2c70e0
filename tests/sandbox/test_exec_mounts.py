"""The agent's project, /tmp and /home/agent are executable; setuid files and device nodes there stay powerless.

Docker mounts a tmpfs `noexec` unless told `exec`; a project's own scripts (`./run.sh`, django's
`./tests/runtests.py`) and extensions built in place must run from /workspace. The negative controls use
`/dev/shm`, a tmpfs Docker keeps `noexec`: the same probe fails there, so each test sees noexec when present.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest

from sandbox.docker_sandbox import DockerSandbox, container_options
from tests.sandbox.conftest import make_spec, probe_json

REPO = Path(__file__).resolve().parents[2]
HARNESS = str(REPO / ".venv" / "bin" / "harness")
WRITABLE = ("/workspace", "/tmp", "/home/agent")
NOEXEC_CONTROL = "/dev/shm"                # Docker's own tmpfs, left noexec,nosuid,nodev
RUN_SH = "#!/bin/sh\necho \"run.sh ran in $(pwd) with $*\"\nexit 7\n"


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


@pytest.fixture
def script_project(tmp_path: Path) -> Path:
    """A project whose test runners are executables, as django's and sympy's are."""
    root = tmp_path / "project"
    _write(root / "run.sh", RUN_SH, 0o755)
    _write(root / "tests" / "runtests.py", "#!/usr/bin/env python3\nimport sys\nprint('runtests', sys.argv[1:])\n"
           "sys.exit(3)\n", 0o755)
    _write(root / "not_executable.sh", RUN_SH, 0o644)
    return root


def test_a_script_in_the_project_runs_and_its_output_and_exit_code_come_back(sandbox_image: str,
                                                                              script_project: Path) -> None:
    with DockerSandbox(make_spec(sandbox_image, project_dir=script_project)) as box:
        assert box.exec("stat -c %a run.sh", timeout=10).stdout.text == "755\n"   # the mode came in with it
        run = box.exec("./run.sh a b", timeout=10)
        assert (run.exit_code, run.stdout.text, run.stderr.text) == (7, "run.sh ran in /workspace with a b\n", "")
        django_style = box.exec("./tests/runtests.py admin_views", timeout=20)
        assert (django_style.exit_code, django_style.stdout.text) == (3, "runtests ['admin_views']\n")
        # controls: a file without the x bit, and the same script on a noexec mount, are refused (126)
        plain = box.exec("./not_executable.sh", timeout=10)
        assert plain.exit_code == 126 and "Permission denied" in plain.stderr.text, plain
        shm = box.exec(f"cp run.sh {NOEXEC_CONTROL}/run.sh && {NOEXEC_CONTROL}/run.sh", timeout=10)
        assert shm.exit_code == 126 and "Permission denied" in shm.stderr.text, shm


@pytest.mark.parametrize(("folder", "exit_code"), [("/tmp", 5), ("/tmp/build/bin", 5), ("/home/agent/.local/bin", 5),
                                                   (NOEXEC_CONTROL, 126)])
def test_a_script_written_at_run_time_runs_in_tmp_and_home(shared_box: DockerSandbox, folder: str,
                                                           exit_code: int) -> None:
    # pip falls back to `--user` (site-packages is read-only): its console scripts land in ~/.local/bin
    script = f"{folder}/tool-{exit_code}"
    made = shared_box.exec(f"mkdir -p {folder} && printf '#!/bin/sh\\necho from $0\\nexit 5\\n' > {script} "
                           f"&& chmod 0755 {script}", timeout=10)
    assert made.exit_code == 0, made
    run = shared_box.exec(script, timeout=10)
    assert run.exit_code == exit_code, run
    if exit_code == 5:
        assert run.stdout.text == f"from {script}\n"
    else:
        assert "Permission denied" in run.stderr.text and run.stdout.text == ""


def _compile_shared_object(dest: Path) -> None:
    gcc = shutil.which("gcc")
    assert gcc, "gcc is not on the host's PATH; install it (apt-get install gcc) to build the test's shared object"
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = dest.with_suffix(".c")
    source.write_text("int harness_answer(int x) { return x * 7; }\n")
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(dest), str(source)], check=True, timeout=120)


def test_a_shared_object_in_the_project_loads_with_ctypes(sandbox_image: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    _compile_shared_object(project / "ext" / "libanswer.so")
    with DockerSandbox(make_spec(sandbox_image, project_dir=project)) as box:
        got = probe_json(box, f"""
            import ctypes, json, shutil
            out = {{}}
            for path in ("/workspace/ext/libanswer.so", "/tmp/libanswer.so", "{NOEXEC_CONTROL}/libanswer.so"):
                if path != "/workspace/ext/libanswer.so":
                    shutil.copy("/workspace/ext/libanswer.so", path)
                try:
                    out[path] = ctypes.CDLL(path).harness_answer(6)
                except OSError as exc:
                    out[path] = str(exc)
            print(json.dumps(out))
        """)
    assert got["/workspace/ext/libanswer.so"] == 42
    assert got["/tmp/libanswer.so"] == 42
    # control: the loader's mmap(PROT_EXEC) is refused on a noexec mount
    assert "failed to map segment from shared object" in got[f"{NOEXEC_CONTROL}/libanswer.so"], got


def _mount_options(mountinfo: str) -> dict[str, tuple[str, set[str]]]:
    """Mount point -> (filesystem type, per-mount options) from /proc/self/mountinfo (proc(5))."""
    mounts: dict[str, tuple[str, set[str]]] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        after = fields[fields.index("-") + 1:]        # optional fields end at the lone "-"
        mounts[fields[4]] = (after[0], set(fields[5].split(",")))
    return mounts


def test_mountinfo_shows_nosuid_and_nodev_everywhere_and_no_noexec(shared_box: DockerSandbox) -> None:
    mounts = _mount_options(shared_box.exec("cat /proc/self/mountinfo", timeout=10).stdout.text)
    for point in WRITABLE:
        fstype, options = mounts[point]
        assert fstype == "tmpfs" and {"rw", "nosuid", "nodev"} <= options, (point, options)
        assert "noexec" not in options, (point, options)
    # control: the parser does see noexec where Docker put it
    assert {"nosuid", "nodev", "noexec"} <= mounts[NOEXEC_CONTROL][1]


def test_container_options_ask_for_exec_nosuid_and_nodev_on_every_tmpfs(sandbox_image: str) -> None:
    tmpfs = container_options(make_spec(sandbox_image))["tmpfs"]
    assert sorted(tmpfs) == sorted(WRITABLE)
    for point, options in tmpfs.items():
        words = options.split(",")
        assert {"rw", "exec", "nosuid", "nodev"} <= set(words) and "noexec" not in words, (point, options)


def _exec_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HARNESS, "exec", *args], capture_output=True, text=True, timeout=300, cwd=REPO)


def test_harness_exec_runs_the_projects_script_and_exits_with_its_code(script_project: Path) -> None:
    done = _exec_cli("--dir", str(script_project), "--", "./run.sh", "x")
    assert done.returncode == 7, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[exit 7 · ") and lines[1] == "run.sh ran in /workspace with x", done.stdout


def test_harness_exec_of_a_file_without_the_x_bit_exits_126(script_project: Path) -> None:
    done = _exec_cli("--dir", str(script_project), "--", "./not_executable.sh")
    assert done.returncode == 126, done.stderr
    assert "Permission denied" in done.stdout, done.stdout


def _start(client: docker.DockerClient, image: str, nosuid: bool, no_new_privileges: bool) -> Any:
    """A container with the sandbox's options, less the protections asked off (off only for the controls)."""
    opts = container_options(make_spec(image))
    if not nosuid:
        opts["tmpfs"] = {point: options.replace("nosuid", "suid") for point, options in opts["tmpfs"].items()}
    if not no_new_privileges:
        opts["security_opt"] = []
    return client.containers.run(image, ["sleep", "infinity"], detach=True, **opts)


def _sh(container: Any, user: str, script: str) -> str:
    code, output = container.exec_run(["sh", "-c", script], user=user)
    text: str = output.decode()
    assert code == 0, (script, code, text)
    return text


@pytest.mark.parametrize(("nosuid", "no_new_privileges", "euid"), [
    (True, True, "1000"),       # the sandbox as it runs
    (True, False, "1000"),      # nosuid alone holds
    (False, True, "1000"),      # no-new-privileges alone holds
    (False, False, "0"),        # control: with both off the same file does give root
])
def test_a_setuid_root_binary_in_the_workspace_does_not_gain_root(docker_client: docker.DockerClient,
                                                                  sandbox_image: str, nosuid: bool,
                                                                  no_new_privileges: bool, euid: str) -> None:
    container = _start(docker_client, sandbox_image, nosuid, no_new_privileges)
    try:
        # the agent opens a folder; root (no capabilities, as an operator's `docker exec -u 0`) drops a
        # setuid-root copy of `id` into it: the one way such a file can reach the agent's tree
        _sh(container, "1000:1000", "mkdir /workspace/drop && chmod 0777 /workspace/drop")
        _sh(container, "0:0", "cp /usr/bin/id /workspace/drop/rootid && chmod 4755 /workspace/drop/rootid")
        assert _sh(container, "1000:1000", "stat -c '%u %a' /workspace/drop/rootid") == "0 4755\n"
        ids = _sh(container, "1000:1000", "/workspace/drop/rootid -ru; /workspace/drop/rootid -u")
        assert ids.split() == ["1000", euid], ids
    finally:
        container.remove(force=True, v=True)

