"""The loopback relay: a client inside the sandbox talks HTTP to its own 127.0.0.1:PORT and a handler on
the host answers (real containers, real clients inside: urllib, http.client, raw sockets)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from sandbox import _protocol as protocol
from sandbox.agent_sweep import container_processes
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import RelayError, SandboxError
from sandbox.loopback import HttpRequest, HttpResponse
from sandbox.relay import MAX_BODY, MAX_FRAME, Relay
from tests.sandbox.conftest import make_spec, probe_json, run_python


class Recorder:
    """A handler that remembers every request and answers with `answer(request)` (an echo by default)."""

    def __init__(self, answer: object = None) -> None:
        self.requests: list[HttpRequest] = []
        self.lock = threading.Lock()
        self.answer = answer

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with self.lock:
            self.requests.append(request)
        if callable(self.answer):
            result: HttpResponse = self.answer(request)
            return result
        return HttpResponse(201, "Made Here", (("X-Seen-Method", request.method), ("X-Seen-Target", request.target),
                                               ("Content-Type", "application/octet-stream")), request.body[::-1])


@pytest.fixture(scope="module")
def box(sandbox_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(make_spec(sandbox_image)) as sandbox:
        yield sandbox


def relay_processes(box: DockerSandbox) -> list[str]:
    """The relay processes of the container, as the daemon lists them (every user's)."""
    return [str(p) for p in container_processes(box._client, box.container.id)   # type: ignore[arg-type]
            if "/opt/harness/channel relay" in p.command]


def test_a_urllib_client_inside_gets_the_handlers_status_headers_and_body(box: DockerSandbox) -> None:
    handler = Recorder()
    with box.serve_loopback(18001, handler) as relay:
        seen = probe_json(box, """
            import json, urllib.request
            req = urllib.request.Request("http://127.0.0.1:18001/v1/chat/completions?x=1", data=b"hello relay",
                                         headers={"Content-Type": "application/json", "X-Trace": "abc"})
            with urllib.request.urlopen(req, timeout=10) as r:
                print(json.dumps([r.status, r.reason, dict(r.headers), r.read().decode()]))
        """)
        assert relay.guarded and relay.alive
    status, reason, headers, body = seen
    assert (status, reason, body) == (201, "Made Here", "yaler olleh")
    assert headers["X-Seen-Method"] == "POST" and headers["X-Seen-Target"] == "/v1/chat/completions?x=1"
    assert headers["Content-Length"] == "11"
    [request] = handler.requests
    assert (request.method, request.target, request.body) == ("POST", "/v1/chat/completions?x=1", b"hello relay")
    assert request.header("x-trace") == "abc" and request.header("content-type") == "application/json"
    assert request.header("Host") == "127.0.0.1:18001"
    assert relay.stats().requests == 1 and relay.stats().bytes_in == 11 and relay.stats().bytes_out == 11


def test_pips_vendored_requests_inside_gets_the_answer_over_keep_alive(box: DockerSandbox) -> None:
    handler = Recorder(lambda r: HttpResponse(200, "OK", (("Content-Type", "application/json"),),
                                              json.dumps({"n": len(r.body)}).encode()))
    with box.serve_loopback(18002, handler):
        seen = probe_json(box, """
            import json
            from pip._vendor import requests
            s = requests.Session()
            print(json.dumps([s.post("http://127.0.0.1:18002/v1/x", data=b"a" * n, timeout=10).json()["n"]
                              for n in (0, 1, 5000, 100000)]))
        """)
    assert seen == [0, 1, 5000, 100000]
    assert [len(r.body) for r in handler.requests] == [0, 1, 5000, 100000]


HTTPX_PACKAGES = ("httpx", "httpcore", "h11", "anyio", "sniffio", "idna", "certifi")


def test_httpx_inside_as_the_openai_sdk_uses_it_gets_the_answer(box: DockerSandbox, tmp_path: Path) -> None:
    """httpx (pure Python: copied in from the host's environment, the sandbox's Python being the same 3.11)."""
    packages = tmp_path / "packages"
    for name in HTTPX_PACKAGES:
        shutil.copytree(Path(importlib.import_module(name).__file__ or "").parent, packages / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(importlib.import_module("typing_extensions").__file__ or "", packages)
    box.copy_in(packages, "/tmp/packages")
    handler = Recorder(lambda r: HttpResponse(200, "OK", (("Content-Type", "application/json"),),
                                              json.dumps({"object": "list", "got": r.body.decode()}).encode()))
    with box.serve_loopback(18018, handler):
        seen = probe_json(box, """
            import json, sys
            sys.path.insert(0, "/tmp/packages")
            import httpx
            with httpx.Client(base_url="http://127.0.0.1:18018/v1", timeout=10) as client:
                print(json.dumps([client.post("/chat/completions", json={"n": i}).json()["got"] for i in range(3)]))
        """)
    assert seen == ['{"n":0}', '{"n":1}', '{"n":2}'] or seen == ['{"n": 0}', '{"n": 1}', '{"n": 2}']
    assert [r.target for r in handler.requests] == ["/v1/chat/completions"] * 3
    assert all(r.header("Connection") != "close" for r in handler.requests)     # one keep-alive connection


def test_a_chunked_request_body_reaches_the_handler_decoded(box: DockerSandbox) -> None:
    handler = Recorder()
    with box.serve_loopback(18003, handler):
        seen = probe_json(box, """
            import http.client, json
            c = http.client.HTTPConnection("127.0.0.1", 18003, timeout=10)
            c.request("POST", "/chunked", body=iter([b"first,", b"", b"second," * 10000, b"third"]),
                      encode_chunked=True)
            r = c.getresponse()
            print(json.dumps([r.status, len(r.read())]))
        """)
    body = b"first," + b"second," * 10000 + b"third"
    assert seen == [201, len(body)]
    [request] = handler.requests
    assert request.body == body and request.header("Transfer-Encoding") == "chunked"


def test_connect_and_proxy_style_requests_reach_the_handler_which_refuses_them(box: DockerSandbox) -> None:
    handler = Recorder(lambda r: HttpResponse(403, "Tunnels are refused by the harness", (), b"no\n"))
    with box.serve_loopback(18004, handler):
        seen = probe_json(box, """
            import json, socket
            out = []
            for raw in (b"CONNECT pypi.org:443 HTTP/1.1\\r\\nHost: pypi.org:443\\r\\n\\r\\n",
                        b"GET http://pypi.org/simple/ HTTP/1.1\\r\\nHost: pypi.org\\r\\n\\r\\n"):
                s = socket.create_connection(("127.0.0.1", 18004), timeout=10)
                s.sendall(raw)
                data = b""
                while b"no\\n" not in data:
                    data += s.recv(4096)
                out.append(data.decode())
            print(json.dumps(out))
        """)
    assert [r.target for r in handler.requests] == ["pypi.org:443", "http://pypi.org/simple/"]
    assert [r.method for r in handler.requests] == ["CONNECT", "GET"]
    assert seen[0].startswith("HTTP/1.1 403 Tunnels are refused by the harness\r\n")
    assert "Connection: close" in seen[0]      # no tunnel is ever opened: a CONNECT's answer ends its connection


LOAD = """
import hashlib, http.client, json, os, random
rng = random.Random(7)
conns = [http.client.HTTPConnection("127.0.0.1", 18005, timeout=30) for _ in range(3)]
rows = []
for i in range(1000):
    body = os.urandom(rng.randint(0, 256 * 1024))
    c = conns[i % 3]
    c.request("POST", f"/call/{i}", body=body, headers={"X-Call": str(i)})
    r = c.getresponse()
    got = r.read()
    rows.append([i, r.status, hashlib.sha256(body).hexdigest(), hashlib.sha256(got).hexdigest(),
                 r.getheader("X-Body-Sha256"), len(got)])
open("/tmp/load.json", "w").write(json.dumps(rows))
print(json.dumps(len(rows)))
"""


def test_a_thousand_calls_of_random_sizes_lose_no_call_and_no_byte(box: DockerSandbox) -> None:
    seen: dict[int, str] = {}

    def answer(request: HttpRequest) -> HttpResponse:
        call = int(request.header("X-Call") or -1)
        seen[call] = hashlib.sha256(request.body).hexdigest()
        out = os.urandom(int.from_bytes(request.body[:3] or b"\0", "big") % (256 * 1024))
        return HttpResponse(200, "OK", (("X-Body-Sha256", hashlib.sha256(out).hexdigest()),), out)

    with box.serve_loopback(18005, Recorder(answer)) as relay:
        assert probe_json(box, LOAD, timeout=600) == 1000
        stats = relay.stats()
    rows = json.loads(box.read_file("/tmp/load.json").data)
    assert [row[0] for row in rows] == list(range(1000)) and sorted(seen) == list(range(1000))
    assert all(row[1] == 200 for row in rows)
    assert [row[2] for row in rows] == [seen[i] for i in range(1000)]      # every request, byte for byte
    assert all(row[3] == row[4] for row in rows)                            # every answer, byte for byte
    assert stats.requests == 1000 and stats.handler_errors == 0 and stats.refused == 0
    assert stats.bytes_out == sum(row[5] for row in rows)


def test_concurrent_clients_are_in_flight_at_once(box: DockerSandbox) -> None:
    barrier = threading.Barrier(6, timeout=20)   # passes only when 6 requests wait on the host together

    def answer(request: HttpRequest) -> HttpResponse:
        barrier.wait()
        return HttpResponse(200, "OK", (), request.body)

    with box.serve_loopback(18006, Recorder(answer), workers=8):
        seen = probe_json(box, """
            import json, threading, urllib.request
            out = {}
            def call(i):
                with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:18006/", data=str(i).encode()),
                                            timeout=30) as r:
                    out[i] = r.read().decode()
            threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            print(json.dumps(out))
        """, timeout=60)
    assert seen == {str(i): str(i) for i in range(12)}


def test_the_agent_can_neither_kill_the_relay_nor_take_its_port(box: DockerSandbox) -> None:
    with box.serve_loopback(18007, Recorder()) as relay:
        seen = probe_json(box, f"""
            import errno, json, os, signal, socket, subprocess
            out = {{"uid": os.getuid()}}
            try:
                os.kill({relay.pid}, signal.SIGKILL)
                out["kill"] = "killed"
            except OSError as exc:
                out["kill"] = errno.errorcode[exc.errno]
            own = subprocess.Popen(["sleep", "60"])
            os.kill(own.pid, signal.SIGKILL)                  # the positive control: its own process
            out["own"] = own.wait()
            for host in ("127.0.0.1", "0.0.0.0"):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                try:
                    s.bind((host, 18007))
                    s.listen()
                    out[host] = "bound"
                except OSError as exc:
                    out[host] = errno.errorcode[exc.errno]
                s.close()
            s = socket.socket()
            s.bind(("127.0.0.1", 18017))                       # the positive control: a free port
            out["free"] = s.getsockname()[1]
            print(json.dumps(out))
        """)
        kill = box.exec(f"kill -9 {relay.pid}", timeout=10)
        assert relay.alive and relay_processes(box)
    assert seen == {"uid": 1000, "kill": "EPERM", "own": -9, "127.0.0.1": "EADDRINUSE", "0.0.0.0": "EADDRINUSE",
                    "free": 18017}
    assert kill.exit_code == 1 and "Operation not permitted" in kill.stderr.text


def test_the_relay_outlives_the_channels_leftover_sweep_and_a_channel_restart(box: DockerSandbox) -> None:
    call = ("python3 -c \"import urllib.request as u; "
            "print(u.urlopen(u.Request('http://127.0.0.1:18008/', data=b'abc'), timeout=10).read().decode())\"")
    with box.serve_loopback(18008, Recorder()) as relay:
        first = box.exec(call, timeout=30)
        box.exec("sleep 100 & disown; true", timeout=10)   # a leftover: swept when the command returns
        box.restart_channel()                                # every process of the agent is killed from outside
        second = box.exec(call, timeout=30)
        assert relay.alive and len(relay_processes(box)) == 1
    assert first.stdout.text == second.stdout.text == "cba\n"


def test_a_taken_port_is_refused_clearly(box: DockerSandbox) -> None:
    with box.serve_loopback(18009, Recorder()):
        with pytest.raises(RelayError, match=r"cannot listen on 127.0.0.1:18009: Address already in use"):
            box.serve_loopback(18009, Recorder())
    with pytest.raises(RelayError, match=r"loopback port 0 is not a port number"):
        box.serve_loopback(0, Recorder())


def test_oversized_and_malformed_requests_are_answered_inside_without_reaching_the_handler(box: DockerSandbox) -> None:
    handler = Recorder()
    with box.serve_loopback(18010, handler) as relay:
        seen = probe_json(box, f"""
            import json, socket, urllib.error, urllib.request
            out = []
            try:
                urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:18010/", data=b"x" * ({MAX_BODY} + 1)),
                                       timeout=30)
            except urllib.error.HTTPError as exc:
                out.append([exc.code, exc.read().decode()])
            for raw in (b"NOT A REQUEST LINE\\r\\n\\r\\n", b"GET / HTTP/1.1\\r\\nX: " + b"y" * 70000 + b"\\r\\n\\r\\n",
                        b"POST / HTTP/1.1\\r\\nContent-Length: 5\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"):
                s = socket.create_connection(("127.0.0.1", 18010), timeout=10)
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                out.append(data.decode().split("\\r\\n")[0])
            with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:18010/", data=b"fine"),
                                        timeout=10) as r:          # the positive control
                out.append([r.status, r.read().decode()])
            print(json.dumps(out))
        """, timeout=60)
        stats = relay.stats()
    assert seen[0][0] == 413 and f"exceeds the relay's {MAX_BODY}" in seen[0][1]
    assert seen[1:4] == ["HTTP/1.1 400 Bad Request", "HTTP/1.1 431 Request Header Fields Too Large",
                         "HTTP/1.1 400 Bad Request"]
    assert seen[4] == [201, "enif"]
    assert [r.body for r in handler.requests] == [b"fine"]
    assert stats.refused == 4 and stats.requests == 1


def test_a_handler_that_raises_or_answers_a_forged_header_gives_500_without_detail(box: DockerSandbox) -> None:
    def answer(request: HttpRequest) -> HttpResponse:
        if request.target == "/raise":
            raise RuntimeError("secret detail")
        return HttpResponse(200, "OK", (("X-Split", "a\r\nSet-Cookie: forged"),), b"")

    with box.serve_loopback(18011, Recorder(answer)) as relay:
        seen = probe_json(box, """
            import json, urllib.error, urllib.request
            out = []
            for path in ("/raise", "/forge"):
                try:
                    urllib.request.urlopen("http://127.0.0.1:18011" + path, timeout=10)
                except urllib.error.HTTPError as exc:
                    out.append([exc.code, exc.read().decode(), exc.headers.get("Set-Cookie")])
            print(json.dumps(out))
        """)
        assert relay.stats().handler_errors == 2 and relay.alive
    assert seen == [[500, "internal error\n", None], [500, "internal error\n", None]]


def test_a_hostile_request_frame_is_refused_field_by_field(box: DockerSandbox) -> None:
    with box.serve_loopback(18012, Recorder()) as relay:
        good = {"kind": "request", "id": 7, "method": "GET", "target": "/", "headers": [["Host", "x"]], "data": b""}
        assert relay._request(dict(good))[1].target == "/"
        for bad in ({"id": True}, {"id": -1}, {"method": "G T"}, {"target": "/a b"}, {"headers": [["a:b", "c"]]},
                    {"headers": [["a", 1]]}, {"data": "!!not base64"}, {"data": b"x" * (MAX_BODY + 1)},
                    {"extra": 1}, {"id": 7}):
            with pytest.raises(protocol.FrameError, match="a request frame is malformed"):
                relay._request({**good, **bad})
        assert relay.alive


def test_a_frame_the_host_cannot_read_ends_the_relay_with_a_clear_error(box: DockerSandbox,
                                                                       docker_client: docker.DockerClient) -> None:
    relay = box.serve_loopback(18019, Recorder())
    # the next frame the host reads announces more than a request frame may hold (as a broken relay would)
    relay._stdout += protocol.HEADER.pack(MAX_FRAME + 1)
    seen = probe_json(box, """
        import json, urllib.error, urllib.request
        try:
            urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:18019/", data=b"x"), timeout=20)
        except urllib.error.HTTPError as exc:
            print(json.dumps([exc.code, exc.read().decode()]))
    """)
    assert not relay.alive and f"a frame of {MAX_FRAME + 1} bytes exceeds the relay's {MAX_FRAME}" in relay.error
    assert seen[0] == 503 and "closed before the host answered" in seen[1]
    relay.close()
    assert not docker_client.api.exec_inspect(relay.exec_id)["Running"] and relay_processes(box) == []
    assert box.exec("true").ok                                           # the sandbox goes on


def test_close_ends_the_relay_its_exec_and_its_port(box: DockerSandbox, docker_client: docker.DockerClient) -> None:
    reach = "import socket; socket.create_connection(('127.0.0.1', 18013), timeout=5); print('connected')"
    relay = box.serve_loopback(18013, Recorder())
    assert run_python(box, reach).stdout.text == "connected\n"          # the positive control
    assert len(relay_processes(box)) == 1
    relay.close()
    relay.close()                                                        # idempotent
    assert not relay.alive and not docker_client.api.exec_inspect(relay.exec_id)["Running"]
    assert relay_processes(box) == []
    assert "ConnectionRefusedError" in run_python(box, reach).stderr.text


def test_closing_the_sandbox_closes_its_relays(sandbox_image: str, docker_client: docker.DockerClient) -> None:
    sandbox = DockerSandbox(make_spec(sandbox_image))
    with sandbox:
        relay = sandbox.serve_loopback(18014, Recorder())
        exec_id = relay.exec_id
        assert docker_client.api.exec_inspect(exec_id)["Running"]
    assert not relay.alive and sandbox.relays == []
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.exec_inspect(exec_id)        # gone with its container
    with pytest.raises(SandboxError, match="the sandbox is closed"):
        sandbox.serve_loopback(18015, Recorder())


def test_a_relay_started_directly_needs_a_running_container(docker_client: docker.DockerClient) -> None:
    with pytest.raises(RelayError, match="could not be started in container harness-no-s"):
        Relay(docker_client, "harness-no-such-container", 18016, Recorder(), env={})
