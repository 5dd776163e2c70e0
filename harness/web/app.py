"""The web console as an ASGI app (Starlette): runs, trajectories, evaluation reports and approvals.

Protection, in order, on every request (`Guard`, before any route):

1. Host: the Host header must name this server (a DNS-rebinding page gets 421).
2. Sign-in: a random token, given in the URL the command prints (`/?token=...`), is exchanged for a
   session (harness.web.sessions): a random id, not the token, in an HttpOnly SameSite=Strict cookie
   named for this server, ending after 12 h; every page and API call but the static assets needs a
   live one (401).
3. Writes: any method but GET and HEAD also needs the session's CSRF secret (`X-CSRF-Token`, random,
   held server-side, not derived from the cookie), a JSON body, and an Origin header equal to this
   server's origin (403).
4. Every response carries a strict Content-Security-Policy (`script-src 'self'`, nothing from
   outside, no inline script or style), `X-Frame-Options: DENY`, `nosniff`, `no-referrer` and
   `no-store`.

The server binds to 127.0.0.1 unless told otherwise. Every string a view sends was escaped on the
server (`harness.web.runs.safe_tree`, `escape_unsafe`); the page builds its elements with textContent
only, so what a model wrote is never parsed as markup. Assets (script, styles) are served from the
package's `static/` folder; nothing is loaded from anywhere else.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from harness.approval.grants import NotGrantable, derive
from harness.approval.queue import ApprovalQueue
from harness.approval.records import Request as ApprovalRequest
from harness.approval.records import UnknownRequest
from harness.errors import ApprovalError, HarnessError
from harness.web import calls, runs, steps
from harness.web.records import Damaged, NotFound, parse_json
from harness.web.runs import Roots
from harness.web.sessions import Session, Sessions
from harness.web.steps import Trajectories
from sandbox.text import escape_ident, escape_unsafe

STATIC = Path(__file__).with_name("static")
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
       "font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store")]
VIEWS = ("runs", "approvals")
DECISION_CAP = 65_536         # bytes of a POST /api/decide body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class Console:
    """What the app serves and how it checks requests: the approvals queue (None: no approvals view),
    the run roots, the sign-in token, the Host values accepted, the view `/` opens on and the
    sessions signed in."""
    queue: ApprovalQueue | None
    roots: Roots
    token: str
    allowed_hosts: set[str]
    landing: str = "runs"
    trajectories: Trajectories = field(default_factory=Trajectories)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: Sessions = field(default_factory=Sessions)


class BadRequest(HarnessError):
    """A request's parameter is missing or not of the expected form (400)."""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


class Guard:
    """Host check, sign-in and CSRF/Origin checks in front of every route, and the security headers on
    every response (errors included). Pure ASGI, so nothing reaches a route it refused."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], console: Console) -> None:
        self.app, self.console = app, console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":          # the console has none: refused before anything
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [h for h in message.get("headers", [])
                                      if h[0].lower() != b"cache-control"] + SECURITY_HEADERS
            await send(message)

        refusal = self.refuse(scope)
        await (refusal(scope, receive, secured) if refusal is not None else self.app(scope, receive, secured))

    def refuse(self, scope: Scope) -> Response | None:
        console, headers = self.console, Headers(scope=scope)
        host = headers.get("host", "")
        if host not in console.allowed_hosts:
            return _error(421, f"Host {host!r} is not this server; open the URL printed by `harness web`")
        path, query = scope["path"], scope.get("query_string", b"").decode("latin-1")
        if path == "/" and "token=" in query:
            return self.sign_in(query)
        if path.startswith("/static/"):
            return None
        session, why = console.sessions.find(headers.get("cookie", ""))
        if session is None:
            return _error(401, f"{why}: open the URL printed by `harness web` or `harness approvals serve` "
                               "(it carries ?token=...)")
        scope["harness.session"] = session
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin", "")
            if origin != f"http://{host}":
                return _error(403, f"cross-site request refused: Origin {origin!r} is not this page")
            if not hmac.compare_digest(headers.get("x-csrf-token", "").encode(), session.csrf.encode()):
                return _error(403, "missing or wrong X-CSRF-Token; reload the page")
            if headers.get("content-type") != "application/json":
                return _error(400, "a POST carries a JSON body (Content-Type: application/json)")
        return None

    def sign_in(self, query: str) -> Response:
        token = next((v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "token"), "")
        if not hmac.compare_digest(token.encode(), self.console.token.encode()):
            return _error(403, "wrong token; use the URL printed by `harness web` or `harness approvals serve`")
        sessions = self.console.sessions
        response = Response(status_code=303, headers={"Location": "/"})
        response.set_cookie(sessions.cookie, sessions.open().id, max_age=max(1, int(sessions.lifetime)),
                            httponly=True, samesite="strict", path="/")
        return response


# ---------------------------------------------------------------- approvals


def request_view(r: ApprovalRequest) -> dict[str, Any]:
    """A request as the page shows it: every string made safe, the result cut to its head."""
    result = r.result if r.result is None or len(r.result) <= 4000 else r.result[:4000] + "\n[... cut]"
    return {"id": r.id, "tool": escape_ident(r.tool), "key": escape_ident(r.key), "session": escape_ident(r.session),
            "status": escape_ident(r.shown_status), "preview": escape_unsafe(r.preview),
            "hash": escape_ident(r.request_hash),
            "created_at": r.created_at, "decided_at": r.decided_at, "decided_by": escape_unsafe(r.decided_by or ""),
            "reason": escape_unsafe(r.reason or ""), "rule": escape_unsafe(r.rule or ""), "grant_id": r.grant_id,
            "result": None if result is None else escape_unsafe(result)}


def grant_choices(r: ApprovalRequest) -> dict[str, str | None]:
    """The rules a grant made from this pending request would have (escaped), or why none can be made."""
    out: dict[str, str | None] = {}
    for decision in ("approve", "deny"):
        try:
            out[decision] = escape_ident(derive(r.tool, r.args, decision).text())
            out[f"{decision}_why"] = None
        except NotGrantable as exc:
            out[decision], out[f"{decision}_why"] = None, escape_unsafe(exc.why)
    return out


def pending_view(r: ApprovalRequest) -> dict[str, Any]:
    return {**request_view(r), "grant": grant_choices(r)}


GRANT_SCOPES = ("run", "session")
DECISION_EXAMPLE = '{"id": 3, "decision": "approve", "reason": "", "hash": "...", "grant": "run", "rule": "..."}'


def _grant(queue: ApprovalQueue, request_id: int, approve: bool, who: str, reason: str, seen: str, scope: str,
           shown: str) -> ApprovalRequest:
    """Decide and make the grant whose rule the page showed (`shown`, as escaped for the page): a rule that
    differs from what the request derives now is refused, nothing decided."""
    rule = queue.derive_grant(request_id, approve)
    if escape_ident(rule.text()) != shown:
        raise ApprovalError(f"request #{request_id}: the grant's rule is not the one the page showed; reload and "
                            "look at it again; nothing was decided")
    return queue.decide_with_grant(request_id, approve, who, seen_hash=seen, shown_rule=rule,
                                   scope_kind="run" if scope == "run" else "session", reason=reason)[0]


def make_app(console: Console) -> Starlette:
    """The console's ASGI app: 1. the routes (`_routes`: pages, assets and the JSON API), 2. a JSON 404
    for every other path or method, 3. `Guard` in front of them all."""
    app = Starlette(routes=_routes(console), exception_handlers={404: _not_found, 405: _not_found})
    app.add_middleware(Guard, console=console)
    return app


def _routes(console: Console) -> list[Route]:
    assets = {p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*") if p.is_file() and p.suffix in TYPES}

    async def decide(request: Request) -> Response:
        return await _decide(console, request)

    c = console
    return [
        Route("/", lambda r: _page(c, r)),
        Route("/static/{name:path}", lambda r: _asset(assets, r)),
        Route("/api/state", _api(lambda _r: _state(c))),
        Route("/api/decide", decide, methods=["POST"]),
        Route("/api/runs", _api(lambda _r: _runs_view(c))),
        Route("/api/run", _api(lambda r: runs.run_view(c.roots, _param(r, "ref")))),
        Route("/api/steps", _api(lambda r: steps.steps_view(
            c.roots, c.trajectories, _param(r, "ref"), _number(r, "start", 0), _number(r, "limit", runs.STEP_PAGE)))),
        Route("/api/block", _api(lambda r: steps.block_view(
            c.roots, c.trajectories, _param(r, "ref"), _number(r, "line", 0), _number(r, "block", 0)))),
        Route("/api/calls", _api(lambda r: calls.calls_view(runs.run_folder(c.roots, _param(r, "ref"))))),
        Route("/api/eval", _api(lambda r: runs.eval_view(c.roots, _param(r, "ref")))),
        Route("/api/compare", _api(lambda r: runs.compare_view(c.roots, _param(r, "a"), _param(r, "b")))),
    ]


def _queue(console: Console) -> ApprovalQueue:
    if console.queue is None:
        raise NotFound("this server shows no approvals")
    return console.queue


def _page(console: Console, request: Request) -> Response:
    session: Session = request.scope["harness.session"]           # the guard let only a signed-in one in
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    html = html.replace("{{CSRF}}", session.csrf).replace("{{LANDING}}", console.landing)
    return Response(html, media_type="text/html; charset=utf-8")


def _asset(assets: dict[str, Path], request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in assets:
        return _error(404, f"no asset {escape_unsafe(name)!r}")
    return Response(assets[name].read_bytes(), media_type=TYPES[assets[name].suffix])


def _state(console: Console) -> dict[str, Any]:
    with console.lock:
        q = _queue(console)
        return {"version": q.version(),
                "pending": [pending_view(r) for r in reversed(q.requests(("pending",)))],
                "history": [request_view(r) for r in q.requests() if r.status != "pending"][:100]}


@dataclass(frozen=True)
class _Decision:
    """A POST /api/decide body, checked: `scope` is None for a plain decision, else the grant's scope
    and `rule` the grant's rule as the page showed it."""

    request_id: int
    approve: bool
    reason: str
    seen: str
    scope: str | None
    rule: str


async def _decide(console: Console, request: Request) -> Response:
    """POST /api/decide: 1. the body read (capped) and checked, 2. the decision (with a grant when one is
    asked) made under the console's lock, 3. the decided request, or the error: 404 for an unknown
    request, 409 for one the queue refused (decided already, changed since it was shown)."""
    decision = await _read_decision(request)
    if isinstance(decision, Response):
        return decision
    who = f"web:{request.client.host if request.client else '?'}"
    try:
        with console.lock:
            if decision.scope is None:
                decided = _queue(console).decide(decision.request_id, decision.approve, who, decision.reason,
                                                 seen_hash=decision.seen)
            else:
                decided = _grant(_queue(console), decision.request_id, decision.approve, who, decision.reason,
                                 decision.seen, decision.scope, decision.rule)
    except UnknownRequest as exc:
        return _error(404, str(exc))
    except ApprovalError as exc:
        return _error(409, str(exc))
    return JSONResponse(request_view(decided))


async def _read_decision(request: Request) -> _Decision | Response:
    """The decision body, or the 413 / 400 answer saying what is wrong with it."""
    raw = b""
    async for chunk in request.stream():                 # read up to the cap, never the whole body
        raw += chunk
        if len(raw) > DECISION_CAP:
            return _error(413, f"a decision body is at most {DECISION_CAP:,} bytes; expected {DECISION_EXAMPLE}")
    try:
        body = parse_json(raw, "the decision body")
        approve = {"approve": True, "deny": False}[body["decision"]]
        request_id, reason, seen = int(body["id"]), str(body.get("reason", ""))[:2000], str(body["hash"])
        scope = body.get("grant")
        if scope is not None and scope not in GRANT_SCOPES:
            raise ValueError(f"grant {str(scope)[:40]!r} is not one of {list(GRANT_SCOPES)}")
    except (Damaged, ValueError, KeyError, TypeError) as exc:
        return _error(400, f"bad decision body ({escape_unsafe(str(exc))[:300]}); expected {DECISION_EXAMPLE}")
    return _Decision(request_id, approve, reason, seen, scope, str(body.get("rule", "")) if scope is not None else "")


def _runs_view(console: Console) -> dict[str, Any]:
    cut: list[str] = []
    listed = runs.list_runs(console.roots, cut)
    return {"runs": listed, "roots": [escape_unsafe(str(p)) for p in console.roots.paths],
            "cut": [escape_unsafe(c) for c in cut]}


def _param(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None:
        raise BadRequest(f"missing ?{name}=...; e.g. /api/run?ref=0/demo-20261201-101500")
    return value


def _number(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name, str(default))
    if not value.isdigit():
        raise BadRequest(f"?{name}={escape_unsafe(value)!r} is not a number; expected e.g. ?{name}=0")
    return int(value)


def _api(view: Callable[[Request], Any]) -> Callable[[Request], Response]:
    """`view`'s answer as JSON; its BadRequest as a 400 and its NotFound as a 404, the message escaped."""
    def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(view(request))
        except BadRequest as exc:
            return _error(400, escape_unsafe(str(exc)))
        except NotFound as exc:
            return _error(404, escape_unsafe(str(exc)))
    return endpoint


async def _not_found(request: Request, _exc: Exception) -> Response:
    return _error(404, f"no page {escape_unsafe(request.url.path)!r}; the console is /")
