"""Sign-in sessions over real HTTP: the token the command prints is exchanged for a random session id
(never the token) under a cookie named for this server, with its own CSRF secret, and an end."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.web.server import make_web_server
from tests.web.hostile_run import write_hostile_run
from tests.web.signin import sign_in, sign_in_cookie

TOKEN = "the-printed-token-0123456789"
REFUSED = "missing or wrong X-CSRF-Token; reload the page"


def _call(url: str, headers: dict[str, str], method: str = "GET", data: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_cookie_carries_a_random_session_id_never_the_token(tmp_path: Path) -> None:
    write_hostile_run(tmp_path / "runs" / "r", steps=1)
    with make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN) as server:
        set_cookie, cookie = sign_in_cookie(server.url)
        name, _, value = cookie.partition("=")
        assert TOKEN not in set_cookie and value != TOKEN and len(value) >= 40
        assert name.startswith(f"harness_{server.port}_") and name == server.console.sessions.cookie
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie.replace("Strict", "strict")
        assert "Max-Age=43200" in set_cookie                                  # 12 h by default
        assert _call(server.base + "/api/runs", {"Cookie": cookie})[0] == 200
        again = sign_in_cookie(server.url)[1]                                  # a second browser: its own session
        assert again != cookie and _call(server.base + "/api/runs", {"Cookie": again})[0] == 200
        status, body = _call(server.base + "/api/runs", {"Cookie": f"{name}={TOKEN}"})
        assert status == 401 and "not signed in" in body                       # the token itself is no session
        assert _call(server.base + "/api/runs", {"Cookie": f"harness_approvals={TOKEN}"})[0] == 401   # the old cookie


def test_a_cookie_of_another_ports_server_is_not_accepted(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN) as a, \
            make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN) as b:    # the same token, even
        from_a = sign_in_cookie(a.url)[1]
        assert _call(a.base + "/api/runs", {"Cookie": from_a})[0] == 200        # control: it works where it belongs
        status, body = _call(b.base + "/api/runs", {"Cookie": from_a})
        assert status == 401 and "not signed in" in body
        renamed = f"{b.console.sessions.cookie}={from_a.partition('=')[2]}"     # A's id under B's cookie name
        status, body = _call(b.base + "/api/runs", {"Cookie": renamed})
        assert status == 401 and "unknown here" in body
        assert _call(b.base + "/api/runs", {"Cookie": sign_in_cookie(b.url)[1]})[0] == 200


def test_an_expired_session_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN, session_seconds=1) as server:
        set_cookie, cookie = sign_in_cookie(server.url)
        assert "Max-Age=1" in set_cookie
        assert _call(server.base + "/api/runs", {"Cookie": cookie})[0] == 200
        time.sleep(1.3)
        status, body = _call(server.base + "/api/runs", {"Cookie": cookie})
        assert status == 401 and "your sign-in expired" in body
        assert _call(server.base + "/api/runs", {"Cookie": sign_in_cookie(server.url)[1]})[0] == 200


def test_every_state_changing_request_needs_the_sessions_own_csrf_secret(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN) as server:
        mine, other = sign_in(server.url), sign_in(server.url)
        cookie = mine["Cookie"].partition("=")[2]
        assert mine["X-CSRF-Token"] != other["X-CSRF-Token"]
        derived = {hmac.new(TOKEN.encode(), b"csrf", hashlib.sha256).hexdigest(),        # the old rule
                   hmac.new(cookie.encode(), b"csrf", hashlib.sha256).hexdigest(),
                   hashlib.sha256(cookie.encode()).hexdigest(), cookie, TOKEN}
        assert mine["X-CSRF-Token"] not in derived
        json_body = {"Content-Type": "application/json"}
        for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            for path in ("/api/decide", "/api/runs", "/"):
                for wrong in ("", other["X-CSRF-Token"], *derived):
                    headers = {**mine, **json_body, "X-CSRF-Token": wrong}
                    status, body = _call(server.base + path, headers, method, b"{}")
                    assert (status, json.loads(body)["error"]) == (403, REFUSED), (method, path, wrong)
                status, body = _call(server.base + path, {**mine, **json_body}, method, b"{}")   # its own passes
                assert status in (400, 404), (method, path, status, body)
        status, body = _call(server.base + "/api/decide", {**mine, **json_body}, "POST", b"{}")
        assert status == 400 and "bad decision body" in body


def test_a_decision_body_is_read_up_to_its_cap_and_parsed_by_the_bounded_reader(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    with make_web_server(None, [tmp_path / "runs"], port=0, token=TOKEN) as server:
        headers = {**sign_in(server.url), "Content-Type": "application/json"}
        status, body = _call(server.base + "/api/decide", headers, "POST", b" " * 70_000 + b"{}")
        assert status == 413 and "at most 65,536 bytes" in body
        status, body = _call(server.base + "/api/decide", headers, "POST", b"[" * 60_000 + b"]" * 60)
        assert status == 400 and "nested deeper than 64 levels" in body              # before: a RecursionError, 500
        status, body = _call(server.base + "/api/decide", headers, "POST", b"{}")    # control: a small body is read
        assert status == 400 and "bad decision body ('decision')" in body
