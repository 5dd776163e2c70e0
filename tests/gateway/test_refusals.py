"""Everything that is not a model call is refused at once, with the explanation where clients show it."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from harness.gateway import REFUSED_REASON, Gateway, read_records
from harness.models.scripted import ScriptedModel
from sandbox.loopback import HttpRequest
from tests.gateway.conftest import served


def _request(url: str, method: str, target: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, target, headers=headers or {})
    return conn.getresponse()


def test_a_connect_tunnel_is_refused_with_the_explanation_in_its_reason_phrase(
        scripted: ScriptedModel, tmp_path: Path) -> None:
    gateway = Gateway(scripted, record=tmp_path / "calls.jsonl")
    with served(gateway) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
            answer = s.makefile("rb").read().decode()
        assert _request(url, "GET", "/v1/models").status == 200        # the same server answers a model route
    assert answer.startswith(f"HTTP/1.0 403 {REFUSED_REASON}\r\n")
    assert "docs/approvals.md" in answer and "Refused: CONNECT pypi.org:443" in answer
    records = read_records(tmp_path / "calls.jsonl")
    assert [(r["method"], r["route"], r["status"], r["outcome"]) for r in records] == [
        ("CONNECT", "pypi.org:443", 403, "refused"), ("GET", "/v1/models", 200, "answered")]
    assert gateway.totals.refused == 1 and scripted.calls == 0


def test_a_proxy_request_and_other_paths_are_refused_and_never_reach_the_model(scripted: ScriptedModel) -> None:
    with served(Gateway(scripted)) as url:
        proxied = _request(url, "GET", "http://pypi.org/simple/")
        body = proxied.read().decode()
        other = _request(url, "POST", "/v1/embeddings")
        anthropic_style = _request(url, "POST", "/v1/messages/count_tokens", {"anthropic-version": "2023-06-01"})
        wrong_method = _request(url, "GET", "/v1/chat/completions")
        shapes = [json.loads(r.read()) for r in (other, anthropic_style, wrong_method)]
    assert (proxied.status, proxied.reason) == (403, REFUSED_REASON)
    assert proxied.getheader("Content-Type", "").startswith("text/plain") and "no network" in body
    assert [r.status for r in (other, anthropic_style, wrong_method)] == [403, 403, 403]
    assert shapes[0]["error"]["type"] == "permission_error" and "docs/approvals.md" in shapes[0]["error"]["message"]
    assert shapes[1]["type"] == "error" and shapes[1]["error"]["type"] == "permission_error"
    assert scripted.calls == 0


def test_a_model_call_sent_through_the_proxy_variable_to_the_loopback_itself_is_served(
        scripted: ScriptedModel) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    gateway = Gateway(scripted)
    for target in ("http://127.0.0.1:8080/v1/chat/completions", "http://localhost/v1/chat/completions?x=1"):
        assert gateway.handle(HttpRequest("POST", target, (), body)).status == 200
    for target in ("http://127.0.0.1.evil.org/v1/chat/completions", "http://localhost@evil.org/v1/chat/completions",
                   "https://127.0.0.1/v1/chat/completions", "http://10.0.0.1/v1/chat/completions"):
        assert gateway.handle(HttpRequest("POST", target, (), body)).status == 403, target
    assert scripted.calls == 2


def test_the_openai_sdk_with_every_proxy_variable_set_to_the_gateway_still_reaches_the_model(
        scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with served(Gateway(scripted, record=tmp_path / "calls.jsonl")) as url:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="dummy", max_retries=0, timeout=10)
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Looking."
    assert [r["route"] for r in read_records(tmp_path / "calls.jsonl")] == [f"{url}/v1/chat/completions"]  # proxied


def _pip_download(url: str, dest: Path, env_extra: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("PIP_")}
    env.update(HTTPS_PROXY=url, HTTP_PROXY=url, PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               **env_extra)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-d", str(dest),
                           "six==1.16.0"], env=env, capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - started


def test_pip_through_a_proxy_pointing_at_the_gateway_fails_fast_showing_why(scripted: ScriptedModel,
                                                                            tmp_path: Path) -> None:
    with served(Gateway(scripted)) as url:
        quick, quick_seconds = _pip_download(url, tmp_path / "a", {"PIP_RETRIES": "1"})
        default, default_seconds = _pip_download(url, tmp_path / "b", {})
    print(f"pip download through the gateway: {quick_seconds:.1f} s with PIP_RETRIES=1, "
          f"{default_seconds:.1f} s with pip's default 5 retries")
    for proc in (quick, default):
        assert proc.returncode == 1
        assert f"Tunnel connection failed: 403 {REFUSED_REASON}" in proc.stderr
        assert "No matching distribution found for six==1.16.0" in proc.stderr
    assert quick_seconds < 30, f"pip took {quick_seconds:.1f} s to fail with PIP_RETRIES=1 (a hang, not a refusal)"
