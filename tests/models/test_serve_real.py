"""`harness model serve` against the real llama.cpp server with the packaged Gemma 3 270M weights: no
CORS unless one origin is named (never with credentials), an optional API key every request needs, the
Host checked; with plain `llama_cpp.server` as the control that shows the probe sees the leak (it
echoes any Origin with credentials allowed). Needs the `local` extra; without it these fail, saying
what to install. One model load per server, a few seconds each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.models.local import LOCAL_MODELS, missing_modules, model_file
from harness.models.local_server import INSTALL, free_port

pytestmark = pytest.mark.slow
EVIL, ALLOWED, KEY = "http://evil.example", "http://localhost:3000", "k3y-for-this-test-only"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = missing_modules(LOCAL_MODELS["gemma3-270m"])
    if missing:
        pytest.fail(f"the `local` extra is not installed (missing: {', '.join(missing)}); install it with: {INSTALL}",
                    pytrace=False)
    return model_file("gemma3-270m", tmp_path_factory.mktemp("models"))


def _start(argv: list[str], ready: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    seen = []
    for line in proc.stdout or []:
        seen.append(line)
        if ready in line:
            return proc
    raise AssertionError(f"{argv} exited with {proc.wait()}:\n{''.join(seen)[-3000:]}")


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture(scope="module")
def servers(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Four real servers on the same weights: `harness model serve` by default, with a key and one CORS
    origin, with `--cors-origin '*'`, and plain llama_cpp.server (the control). Yields name -> base URL."""
    key_file = tmp_path_factory.mktemp("key") / "model-key"
    key_file.write_text(KEY + "\n")
    ports = {name: free_port() for name in ("default", "keyed", "any", "plain")}
    serve = [sys.executable, "-m", "harness.cli.main", "model", "serve", "--model-path", str(gguf)]
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_MODEL_SERVER_API_KEY"}
    procs = []
    try:
        procs.append(_start([*serve, "--port", str(ports["default"])], "serving", env))
        procs.append(_start([*serve, "--port", str(ports["keyed"]), "--api-key-file", str(key_file),
                             "--cors-origin", ALLOWED], "serving", env))
        procs.append(_start([*serve, "--port", str(ports["any"]), "--cors-origin", "*"], "serving", env))
        procs.append(_start([sys.executable, "-P", "-m", "llama_cpp.server", "--model", str(gguf), "--host",
                             "127.0.0.1", "--port", str(ports["plain"]), "--n_ctx", "512"], "Uvicorn running", env))
        yield {name: f"http://127.0.0.1:{port}" for name, port in ports.items()} | {"pids": " ".join(
            str(p.pid) for p in procs)}
    finally:
        for proc in procs:
            _stop(proc)


def _ask(url: str, method: str = "GET", headers: dict[str, str] | None = None,
         data: bytes | None = None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}


def _preflight(base: str, origin: str) -> dict[str, str]:
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization,content-type"}
    return _ask(base + "/v1/chat/completions", "OPTIONS", headers)[1]


def test_plain_llama_server_echoes_any_origin_with_credentials_the_control(servers: dict[str, str]) -> None:
    headers = _preflight(servers["plain"], EVIL)
    assert headers.get("access-control-allow-origin") == EVIL
    assert headers.get("access-control-allow-credentials") == "true"
    assert _ask(servers["plain"] + "/v1/models", headers={"Origin": EVIL})[1].get("access-control-allow-origin") \
        in (EVIL, "*")


def test_model_serve_answers_no_other_origin_by_default(servers: dict[str, str]) -> None:
    status, headers = _ask(servers["default"] + "/v1/models", headers={"Origin": EVIL})
    assert status == 200 and "access-control-allow-origin" not in headers   # served, but no page may read it
    headers = _preflight(servers["default"], EVIL)
    assert "access-control-allow-origin" not in headers and "access-control-allow-credentials" not in headers
    assert _ask(servers["default"] + "/v1/models", headers={"Host": "rebound.example"})[0] == 421


def test_model_serve_with_a_key_refuses_every_request_without_it_and_allows_one_origin(
        servers: dict[str, str]) -> None:
    base = servers["keyed"]
    chat = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}'
    for path, method, data in (("/v1/models", "GET", None), ("/docs", "GET", None), ("/openapi.json", "GET", None),
                               ("/v1/chat/completions", "POST", chat)):
        for wrong in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            status, _ = _ask(base + path, method, {**wrong, "Content-Type": "application/json"}, data)
            assert status == 401, (path, wrong, status)
    good = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    assert _ask(base + "/v1/models", headers=good)[0] == 200                       # the control: the key works
    assert _ask(base + "/v1/chat/completions", "POST", good, chat)[0] == 200
    allowed = _preflight(base, ALLOWED)
    assert allowed.get("access-control-allow-origin") == ALLOWED and "access-control-allow-credentials" not in allowed
    assert "access-control-allow-origin" not in _preflight(base, EVIL)
    status, headers = _ask(base + "/v1/models", headers={**good, "Origin": ALLOWED})
    assert status == 200 and headers.get("access-control-allow-origin") == ALLOWED
    assert "access-control-allow-credentials" not in headers
    for pid in servers["pids"].split():                  # the key is on no command line of the server's group
        group = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _group(p) == int(pid)]
        for proc in group:
            assert KEY not in (proc / "cmdline").read_bytes().decode(errors="replace")


def _group(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def test_model_serve_refuses_a_bad_origin_or_key_file_with_an_example(gguf: Path, tmp_path: Path) -> None:
    serve = [sys.executable, "-m", "harness.cli.main", "model", "serve", "--model-path", str(gguf)]
    done = subprocess.run([*serve, "--cors-origin", "http://localhost:3000/path"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "is not an origin; expected scheme://host[:port]" in done.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    done = subprocess.run([*serve, "--api-key-file", str(empty)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "holds no key" in done.stderr and "e.g. --api-key-file" in done.stderr


def test_any_origin_is_never_allowed_with_credentials(servers: dict[str, str]) -> None:
    for headers in (_preflight(servers["any"], EVIL), _ask(servers["any"] + "/v1/models", headers={"Origin": EVIL})[1]):
        assert headers.get("access-control-allow-origin") == "*" and "access-control-allow-credentials" not in headers
