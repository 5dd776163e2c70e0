"""`http_request`: one HTTP request sent from the host after approval. Redirects are not followed
(a redirect would be a request nobody approved); the response comes back as the observation.

The preview shows every header and the body the model sent, unmasked. A request to a URL the
operator holds a credential for (`harness.tools.outbound.credentials`) gets that credential's headers from
the host at execution: the stored request names the credential, the preview hides its value and says
where it comes from, and a model header of the same name is refused.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.config import Config
from harness.errors import ToolArgumentsError, ToolError
from harness.tools.base import ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from harness.tools.outbound.credentials import (
    Credential,
    credential_for,
    credential_named,
    load_credentials,
)
from harness.tools.outbound.preview import body_preview, field_lines, has_non_ascii, operator_value
from sandbox.text import escape_ident, escape_unsafe

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
RESPONSE_SHOWN_CHARS = 8000
EXAMPLE = {"method": "GET", "url": "https://docs.python.org/3/objects.inv", "key": "fetch-inventory-1"}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _check(method: str, url: str, headers: dict[str, str], credential: Credential | None) -> list[str]:
    problems = []
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"url {escape_ident(url)!r} must be an absolute http:// or https:// URL, "
                        "e.g. \"https://example.org/api/items\"")
    for name, value in headers.items():
        if any(c in f"{name}{value}" for c in "\r\n\0") or not name.strip():
            problems.append(f"header {escape_ident(name)!r} has an empty name or a CR/LF/NUL character")
    if method not in METHODS:
        problems.append(f"method {escape_ident(method)!r} must be one of {METHODS}")
    taken = {h.lower() for h in (credential.headers if credential else {})}
    for name in sorted(n for n in headers if n.lower() in taken):
        problems.append(f"header {escape_ident(name)!r} is set by the operator for this URL (credential "
                        f"{credential.name if credential else ''!r}); leave it out, the host adds it when the "
                        "request runs")
    return problems


def _prepare_with(state_dir: Path) -> Any:
    def prepare(args: dict[str, Any], ctx: ToolContext) -> Prepared:
        method = str(args.get("method", "GET")).upper()
        url, body = str(args["url"]), args.get("body")
        headers = {str(k): str(v) for k, v in (args.get("headers") or {}).items()}
        credential = credential_for(load_credentials(state_dir), url)
        problems = _check(method, url, headers, credential)
        if problems:
            raise ToolArgumentsError("http_request: " + "; ".join(problems) + f". Example call: {EXAMPLE}")
        host = urlsplit(url).hostname or ""
        fields = [("method", method), ("url", escape_ident(url)),
                  ("host", escape_ident(host) + ("   (WARNING: non-ASCII characters in the host, shown escaped)"
                                               if has_non_ascii(host) else ""))]
        fields += [(f"header {escape_ident(name)}", escape_unsafe(value)) for name, value in sorted(headers.items())]
        if credential is not None:
            fields += [(f"header {escape_ident(name)}", operator_value(credential.where))
                       for name in sorted(credential.headers)]
        lines = field_lines(fields) + body_preview(body)
        resolved = {"method": method, "url": url, "headers": headers, "body": body,
                    "credential": credential.name if credential else None,
                    "credential_headers": sorted(credential.headers) if credential else []}
        return Prepared(args=resolved, preview="\n".join(lines))
    return prepare


def _sent_headers(args: dict[str, Any], state_dir: Path) -> dict[str, str]:
    """The model's headers plus, when the request names one, the operator credential read now."""
    name = args.get("credential")
    if not name:
        return dict(args["headers"])
    credential = credential_named(load_credentials(state_dir), name)
    if (credential is None or not credential.covers(args["url"])
            or sorted(credential.headers) != args["credential_headers"]):
        raise ToolError(f"the operator credential {name!r} this request was approved with is gone, no longer "
                        f"covers {escape_ident(args['url'])} or sets other headers than {args['credential_headers']}; "
                        "nothing was sent. Ask again with a new key.")
    return {**args["headers"], **credential.headers}


def _execute_with(timeout: float, max_bytes: int, state_dir: Path) -> Any:
    def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        body = args.get("body")
        data = body.encode("utf-8") if isinstance(body, str) else None
        request = urllib.request.Request(args["url"], data=data, method=args["method"],
                                         headers=_sent_headers(args, state_dir))
        opener = urllib.request.build_opener(_NoRedirect())
        try:
            with opener.open(request, timeout=timeout) as response:
                return _describe(response.status, response.reason, dict(response.headers), response.read(max_bytes))
        except urllib.error.HTTPError as exc:
            return _describe(exc.code, str(exc.reason), dict(exc.headers or {}), exc.read(max_bytes))
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ToolError(f"{args['method']} {escape_ident(args['url'])} failed before any response: "
                            f"{escape_unsafe(str(reason))}. Whether the server received it is unknown; it is not "
                            "retried under this key.") from exc
    return execute


def _describe(status: int, reason: str, headers: dict[str, str], data: bytes) -> str:
    lines = [f"HTTP {status} {escape_unsafe(reason)}"]
    if 300 <= status < 400 and "Location" in headers:
        lines.append(f"redirect to {escape_ident(headers['Location'])} (not followed: ask for it with a new "
                     "request if you need it)")
    lines += [f"{escape_ident(k)}: {escape_unsafe(v)}" for k, v in headers.items()
              if k.lower() in ("content-type", "content-length", "location", "date")]
    text = data.decode("utf-8", "replace")
    shown = escape_unsafe(text[:RESPONSE_SHOWN_CHARS])
    cut = f"; first {RESPONSE_SHOWN_CHARS} characters shown" if len(text) > RESPONSE_SHOWN_CHARS else ""
    lines.append(f"\nbody ({len(data)} bytes{cut}):")
    return "\n".join(lines) + "\n" + shown


def http_request_action(config: Config) -> OutboundAction:
    approval = config.approval
    return OutboundAction(
        name="http_request",
        description=("Send one HTTP request to the internet (the sandbox itself has no network). Use it to "
                     "fetch documentation or call an API the task needs. Redirects are not followed. The "
                     "response (status, main headers, body up to 8000 characters) is the result. The human "
                     "approving it sees every header and the body you send; credentials the operator "
                     "configured for a URL are added by the host, so do not send those headers yourself."),
        parameters={"type": "object", "required": ["url"], "additionalProperties": False, "properties": {
            "method": {"type": "string", "enum": METHODS, "description": "HTTP method; default GET"},
            "url": {"type": "string", "description": "absolute http(s) URL"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "request headers, e.g. {\"Accept\": \"application/json\"}"},
            "body": {"type": "string", "description": "request body (text)"}}},
        prepare=_prepare_with(approval.state_dir),
        execute=_execute_with(approval.http_timeout, approval.http_max_response_bytes, approval.state_dir),
        example=EXAMPLE)
