"""`harness approvals serve`: the web page listing pending requests (approve/deny) and the history.

Protection, in order: the server binds to 127.0.0.1 by default; the Host header must name this
server (DNS rebinding); a random token, given once in the URL, becomes an HttpOnly SameSite=Strict
cookie required by every page and API call; a decision (POST) also needs the CSRF token from the
page, a JSON body, and an Origin header equal to this server's origin. The page has a strict
Content-Security-Policy and builds every element with textContent: model-written text is never
parsed as HTML. All strings leave the server already passed through `safe_text` or `safe_ident`. A
decision names the hash of the request the page showed and is refused (409) if the request differs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.approval.queue import ApprovalQueue
from harness.approval.records import Request, UnknownRequest
from harness.errors import ApprovalError
from harness.tools.outbound.preview import safe_ident, safe_text

STATIC = Path(__file__).with_name("static")
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css"}
COOKIE = "harness_approvals"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


class ApprovalWebServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, queue: ApprovalQueue, host: str, port: int, token: str, extra_hosts: list[str]) -> None:
        super().__init__((host, port), _Handler)
        self.queue, self.token, self.lock = queue, token, threading.Lock()
        self.csrf = hmac.new(token.encode(), b"csrf", hashlib.sha256).hexdigest()
        self.port = self.server_address[1]
        names = {host, "127.0.0.1", "localhost"} | {h.split(":")[0] for h in extra_hosts}
        self.allowed_hosts = {f"{n}:{self.port}" for n in names} | set(extra_hosts)

    @property
    def url(self) -> str:
        bound = str(self.server_address[0])
        host = "127.0.0.1" if bound in ("0.0.0.0", "") else bound
        return f"http://{host}:{self.port}/?token={self.token}"


def make_server(queue: ApprovalQueue, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                extra_hosts: list[str] | None = None) -> ApprovalWebServer:
    return ApprovalWebServer(queue, host, port, token or secrets.token_urlsafe(24), list(extra_hosts or []))


def request_view(r: Request) -> dict[str, Any]:
    """A request as the page shows it: every string made safe, the result cut to its head."""
    result = r.result if r.result is None or len(r.result) <= 4000 else r.result[:4000] + "\n[... cut]"
    return {"id": r.id, "tool": safe_ident(r.tool), "key": safe_ident(r.key), "session": safe_ident(r.session),
            "status": safe_ident(r.shown_status), "preview": safe_text(r.preview), "hash": safe_ident(r.request_hash),
            "created_at": r.created_at, "decided_at": r.decided_at, "decided_by": safe_text(r.decided_by or ""),
            "reason": safe_text(r.reason or ""), "rule": safe_text(r.rule or ""),
            "result": None if result is None else safe_text(result)}


class _Handler(BaseHTTPRequestHandler):
    server: ApprovalWebServer

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": ctype, "Content-Length": str(len(body)), "Cache-Control": "no-store",
                            "Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
                            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                            **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _host_ok(self) -> bool:
        if self.headers.get("Host", "") in self.server.allowed_hosts:
            return True
        self._error(421, f"Host {self.headers.get('Host')!r} is not this server; open {self.server.url.split('?')[0]}")
        return False

    def _authed(self) -> bool:
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        value = cookie[COOKIE].value if COOKIE in cookie else ""
        return hmac.compare_digest(value.encode(), self.server.token.encode())

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._host_ok():
            return
        parts = urlsplit(self.path)
        token = parse_qs(parts.query).get("token", [""])[0]
        if parts.path == "/" and token:
            if not hmac.compare_digest(token.encode(), self.server.token.encode()):
                return self._error(403, "wrong token; use the URL printed by `harness approvals serve`")
            cookie = f"{COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"
            return self._send(303, b"", "text/plain", {"Location": "/", "Set-Cookie": cookie})
        if parts.path.startswith("/static/") and parts.path[8:] in STATIC_FILES:
            name = parts.path[8:]
            return self._send(200, (STATIC / name).read_bytes(), STATIC_FILES[name])
        if not self._authed():
            return self._error(401, "not signed in: open the URL printed by `harness approvals serve` "
                                    "(it carries ?token=...)")
        if parts.path == "/":
            page = (STATIC / "index.html").read_text().replace("{{CSRF}}", self.server.csrf)
            return self._send(200, page.encode(), "text/html; charset=utf-8")
        if parts.path == "/api/state":
            return self._json(200, self._state())
        self._error(404, f"no page {parts.path!r}; the page is /")

    def _state(self) -> dict[str, Any]:
        with self.server.lock:
            queue = self.server.queue
            return {"version": queue.version(),
                    "pending": [request_view(r) for r in reversed(queue.requests(("pending",)))],
                    "history": [request_view(r) for r in queue.requests() if r.status != "pending"][:100]}

    def do_POST(self) -> None:  # noqa: N802
        if not self._host_ok():
            return
        if not self._authed():
            return self._error(401, "not signed in")
        origin = self.headers.get("Origin", "")
        if origin != f"http://{self.headers.get('Host')}":
            return self._error(403, f"cross-site request refused: Origin {origin!r} is not this page")
        if not hmac.compare_digest(self.headers.get("X-CSRF-Token", "").encode(), self.server.csrf.encode()):
            return self._error(403, "missing or wrong X-CSRF-Token; reload the page")
        if urlsplit(self.path).path != "/api/decide" or self.headers.get("Content-Type") != "application/json":
            return self._error(400, "POST /api/decide with a JSON body {id, decision, reason, hash}")
        try:
            body = json.loads(self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 65536)))
            approve = {"approve": True, "deny": False}[body["decision"]]
            with self.server.lock:
                decided = self.server.queue.decide(int(body["id"]), approve, f"web:{self.client_address[0]}",
                                                   str(body.get("reason", ""))[:2000], seen_hash=str(body["hash"]))
        except (ValueError, KeyError, TypeError) as exc:
            return self._error(400, f"bad decision body ({exc}); expected "
                                    '{"id": 3, "decision": "approve", "reason": "", "hash": "..."}')
        except UnknownRequest as exc:
            return self._error(404, str(exc))
        except ApprovalError as exc:
            return self._error(409, str(exc))
        self._json(200, request_view(decided))
