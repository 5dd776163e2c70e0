"""The local model server's own process: llama-cpp-python's OpenAI-compatible app behind our front door.

`python -P -m harness.models.llama_serve [--cors-origin ORIGIN] -- <llama_cpp.server options>` is what
`LocalServer` starts. llama_cpp.server on its own answers every Origin with credentials allowed
(`allow_origins=["*"], allow_credentials=True`), so any page the operator's browser opens could call
the model and read its answers. Here the app is built by llama_cpp.server's own `create_app`, its CORS
middleware is taken out, and in front of it, in this order:

1. the Host header must name this server (`127.0.0.1:PORT` or `localhost:PORT`): a DNS-rebinding
   page, whose requests carry its own name, gets 421;
2. CORS only when `--cors-origin` names one origin (or `*`): that origin alone, never with
   credentials; by default none, so a page of another origin cannot read an answer;
3. with an API key (`HARNESS_MODEL_SERVER_API_KEY` in this process's environment, which
   `harness model serve` sets from `--api-key-file` or the operator's own variable), every request
   needs `Authorization: Bearer KEY` (401), whatever its path (the docs pages included).

The key never appears on a command line (other users see those in /proc).
"""

from __future__ import annotations

import argparse
import hmac
import json
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from harness.config import load

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]
ORIGIN = re.compile(r"^(\*|https?://[A-Za-z0-9.-]+(:\d{1,5})?|https?://\[[0-9A-Fa-f:]+\](:\d{1,5})?)$")
ORIGIN_EXAMPLE = "e.g. --cors-origin http://localhost:3000"


def check_origin(origin: str) -> str:
    """`origin` if it is `*` or scheme://host[:port] (no path, no trailing slash), else a ValueError saying so."""
    if not ORIGIN.match(origin):
        raise ValueError(f"--cors-origin {origin!r} is not an origin; expected scheme://host[:port] with no path "
                         f"(or *), {ORIGIN_EXAMPLE}")
    return origin


async def _refuse(send: Callable[[Message], Awaitable[None]], status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class HostCheck:
    """421 unless the Host header names this server; lifespan and other scopes pass."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app, self.hosts = app, {f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()}

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope.get("headers") or []).get(b"host", b"")
            if host not in self.hosts:
                await _refuse(send, 421, f"Host {host.decode('latin-1')!r} is not this server")
                return
        await self.app(scope, receive, send)


class KeyCheck:
    """401 unless the request carries `Authorization: Bearer KEY`."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app, self.expected = app, f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _refuse(send, 401, "missing or wrong API key: send Authorization: Bearer <the key of "
                                         "harness model serve --api-key-file>")
                return
        await self.app(scope, receive, send)


def front(app: Any, port: int, api_key: str | None, cors_origin: str | None) -> ASGIApp:
    """`app` (llama_cpp.server's FastAPI app) without its CORS middleware, behind ours."""
    from starlette.middleware.cors import CORSMiddleware  # noqa: PLC0415 - the `local` extra's web stack

    app.user_middleware = [m for m in app.user_middleware if m.cls is not CORSMiddleware]
    app.middleware_stack = None                        # rebuilt without it on the first request
    served: ASGIApp = app
    if api_key:
        served = KeyCheck(served, api_key)
    if cors_origin:
        served = CORSMiddleware(served, allow_origins=[cors_origin], allow_credentials=False,
                                allow_methods=["GET", "POST", "OPTIONS"],
                                allow_headers=["Authorization", "Content-Type"])
    return HostCheck(served, port)


def main(argv: list[str] | None = None) -> None:
    """Parse our options and llama_cpp.server's (after `--`), build the app, serve it with uvicorn."""
    import uvicorn  # noqa: PLC0415 - the `local` extra: only in the server's process
    from llama_cpp.server.app import create_app  # noqa: PLC0415
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args  # noqa: PLC0415
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings  # noqa: PLC0415

    argv = sys.argv[1:] if argv is None else argv
    ours, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else ([], argv)
    options = argparse.ArgumentParser(prog="harness.models.llama_serve")
    options.add_argument("--cors-origin", type=check_origin)
    mine = options.parse_args(ours)
    parser = argparse.ArgumentParser(prog="llama_cpp.server")
    add_args_from_model(parser, Settings)
    args = parser.parse_args(rest)
    server_settings: Any = parse_model_from_args(ServerSettings, args)    # (typed as returning the class)
    model_settings: Any = parse_model_from_args(ModelSettings, args)
    app = create_app(server_settings=server_settings, model_settings=[model_settings])
    api_key = load()[1].model_server_api_key
    uvicorn.run(front(app, server_settings.port, api_key, mine.cors_origin), host=server_settings.host,
                port=server_settings.port, log_level="info")


if __name__ == "__main__":
    main()
