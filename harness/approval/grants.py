"""Grants: a human's decision on one request, extended to later requests of the same kind by a rule
the harness derives from that request and shows in full before it is granted.

A grant's rule is derived, never written: from an approved `http_request` GET (or HEAD) it keeps the
method, scheme, host and port, takes the path's parent folder as a prefix, allows no body, the
query only if it is the request's own (none when it had none), no headers beyond the ones the
request had (same names, same values) and the same operator credential; from a `pip_download` it
keeps the package name, its extras at most, the index and the sandbox's Python, and allows any
pinned version (`name==X`). `git_push`, any request with a body and any other tool cannot be
approved by a grant. A deny grant is wide on purpose (it can only refuse more): every request to the
same scheme, host and port; every version of that package from that index; every push to that
remote; any call of that other tool.

A narrowing (`KEY=PATTERN`) may only take away: `path=/docs/3/api/` (a prefix under the derived
one), `version=2.*` (a version glob), `headers=` (none of the request's headers). One that would
widen, or names a key that cannot be narrowed, is refused saying why.

A later request is matched on its canonical parse (`canonical_url`): scheme and host lowercased,
the host through IDNA (a lookalike host is another host), the default port explicit, the path
percent-decoded with its dot segments resolved before the prefix test, which holds only at a `/`
boundary. Whatever could make the server read another path than the one tested (a dot segment, or
what some servers read as one: `..;`, `...`, any `;` in a segment; an encoded `/` or `\\`; a `%` left
after decoding once; a control or non-ASCII character) or another host (userinfo in the URL) is no
match for an approve grant: the request goes to a human.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.errors import ApprovalError

GrantDecision = Literal["approve", "deny"]
DEFAULT_PORTS = {"http": 80, "https": 443}
GRANTABLE_METHODS = ("GET", "HEAD")
NARROW_EXAMPLE = "--narrow path=/docs/3/api/  (or version=2.*, or headers=)"


class NotGrantable(ApprovalError):
    """This request cannot be decided for later requests; `.why` says why."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class CanonicalUrl:
    scheme: str
    host: str          # lowercased, IDNA (ASCII)
    port: int          # explicit, default filled in
    path: str          # percent-decoded, dot segments resolved
    query: str
    exact: bool        # False: userinfo, dot segments, encoded separators or unsafe characters in the path

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def _idna(host: str) -> str | None:
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


def _resolve(segments: list[str]) -> list[str]:
    out: list[str] = []
    for seg in segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    return out


def canonical_url(url: str) -> CanonicalUrl | None:
    """The URL as a grant compares it; None when it is not an absolute http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = _idna(parts.hostname)
    if host is None:
        return None
    raw = parts.path or "/"
    try:
        decoded = [unquote(seg, errors="strict") if "%" in seg else seg for seg in raw.split("/")]
    except UnicodeDecodeError:            # not UTF-8 once decoded: no path a grant can name
        decoded = ["", "\ufffd"]
    path = "/" + "/".join(_resolve(decoded[1:]))
    # an encoded separator, a "%" left after one decoding (a server that decodes twice reads %252e as
    # "."), a control or non-ASCII character: the server may read another path than the one tested
    unsafe = any(ch in seg for seg in decoded for ch in "/\\%") or not all(0x20 < ord(c) < 0x7F for c in path)
    # dot segments, and what some servers read as one: "..;" (path parameters), "..." (Windows)
    dotted = any(seg.strip(".") == "" and seg != "" or ";" in seg for seg in decoded)
    exact = "@" not in parts.netloc and not unsafe and not dotted and raw.startswith("/")
    return CanonicalUrl(scheme, host, port or DEFAULT_PORTS[scheme], path, parts.query, exact)


@dataclass(frozen=True)
class GrantRule:
    """What a grant decides: a tool, approve or deny, and the fields a later request must have."""

    tool: str
    decision: GrantDecision
    fields: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str:
        return dict(self.fields)[name]

    def to_json(self) -> str:
        return json.dumps({"tool": self.tool, "decision": self.decision, "fields": dict(self.fields)},
                          sort_keys=True)

    @staticmethod
    def from_json(text: str) -> GrantRule:
        data = json.loads(text)
        return GrantRule(data["tool"], data["decision"], tuple(sorted(data["fields"].items())))

    def text(self) -> str:
        """The rule in full, as the human reads it (values are escaped by whoever prints it)."""
        return describe(self)


def _rule(tool: str, decision: GrantDecision, **fields: str) -> GrantRule:
    return GrantRule(tool, decision, tuple(sorted(fields.items())))


def _headers_of(args: dict[str, Any]) -> list[list[str]]:
    return sorted([str(k).lower(), str(v)] for k, v in (args.get("headers") or {}).items())


def derive(tool: str, args: dict[str, Any], decision: GrantDecision) -> GrantRule:
    """The rule a grant made from this request (as stored: `Request.args`) would have. Raises
    NotGrantable, saying why, for a request no approve grant may be made from."""
    if tool == "http_request":
        return _derive_http(args, decision)
    if tool == "pip_download":
        return _derive_pip(args, decision)
    if decision == "deny":
        if tool == "git_push":
            return _rule(tool, decision, remote=str(args.get("remote", "")))
        return _rule(tool, decision)
    if tool == "git_push":
        raise NotGrantable("a git_push is never approved by a grant: every push is its own decision "
                           "(approve this one only, or deny pushes to this remote with a deny grant)")
    raise NotGrantable(f"{tool} requests cannot be approved by a grant (only http_request GET/HEAD and "
                       "pip_download can); approve this one only")


def _derive_http(args: dict[str, Any], decision: GrantDecision) -> GrantRule:
    url = canonical_url(str(args.get("url", "")))
    if url is None:
        raise NotGrantable(f"the URL {args.get('url')!r} is not an absolute http(s) URL a grant can name")
    if decision == "deny":
        return _rule("http_request", "deny", method="*", origin=url.origin, path="/")
    method = str(args.get("method", "GET")).upper()
    if method not in GRANTABLE_METHODS:
        raise NotGrantable(f"a {method} request is never approved by a grant: it can change things on the "
                           f"server; only {'/'.join(GRANTABLE_METHODS)} can")
    if args.get("body") not in (None, ""):
        raise NotGrantable("a request with a body is never approved by a grant: every body is its own decision")
    if not url.exact:
        raise NotGrantable("this URL has userinfo, dot segments, an encoded separator or a non-ASCII "
                           "character in its path; a grant is only made from a plain URL")
    folder = url.path.rsplit("/", 1)[0] + "/"
    return _rule("http_request", "approve", method=method, origin=url.origin, path=folder, query=url.query,
                 headers=json.dumps(_headers_of(args)), credential=str(args.get("credential") or ""),
                 body="none")


def _requirement(args: dict[str, Any]) -> Requirement | None:
    try:
        return Requirement(str(args.get("requirement", "")))
    except InvalidRequirement:
        return None


def _pinned(req: Requirement) -> str | None:
    """The version of `name==X` (one exact pin, no wildcard), else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def _derive_pip(args: dict[str, Any], decision: GrantDecision) -> GrantRule:
    req = _requirement(args)
    if req is None:
        raise NotGrantable(f"the requirement {args.get('requirement')!r} does not parse")
    common = {"package": canonicalize_name(req.name), "index": str(args.get("index_url", "")),
              "index_sha256": str(args.get("index_url_sha256", ""))}
    if decision == "deny":
        return _rule("pip_download", "deny", **common)
    if req.url or req.marker:
        raise NotGrantable("a requirement with a URL or a marker is never approved by a grant")
    return _rule("pip_download", "approve", **common, extras=json.dumps(sorted(req.extras)), version="*",
                 python=str(args.get("python_version", "")), platforms=json.dumps(args.get("platforms", [])))


NARROWABLE = {"http_request": ("path", "headers"), "pip_download": ("version",)}


def narrow(rule: GrantRule, key: str, pattern: str) -> GrantRule:
    """The rule with `key` narrowed to `pattern`; raises ApprovalError when that would widen it."""
    allowed = NARROWABLE.get(rule.tool, ())
    if key not in allowed or key not in dict(rule.fields):
        raise ApprovalError(f"--narrow {key}=...: a {rule.decision} grant of {rule.tool} can narrow only "
                            f"{list(k for k in allowed if k in dict(rule.fields)) or 'nothing'}; e.g. {NARROW_EXAMPLE}")
    current = rule.get(key)
    if key == "path":
        wanted = pattern.removesuffix("**")
        url = canonical_url(f"http://h{wanted}") if wanted.startswith("/") else None
        if url is None or not url.exact or not wanted.endswith("/") or url.path != wanted:
            raise ApprovalError(f"--narrow path={pattern!r}: expected a plain folder ending in / such as "
                                f"{current}api/ (dot segments and encoded characters are refused)")
        if not wanted.startswith(current):
            raise ApprovalError(f"--narrow path={pattern!r} would widen the grant: it is not under {current}, "
                                "the folder of the request you approve")
        return _replace(rule, path=wanted)
    if key == "headers":
        kept = json.loads(current)
        names = [n.strip().lower() for n in pattern.split(",") if n.strip()]
        unknown = [n for n in names if n not in [h[0] for h in kept]]
        if unknown:
            raise ApprovalError(f"--narrow headers={pattern!r} would widen the grant: the request had no "
                                f"header {unknown}; it had {[h[0] for h in kept]}")
        return _replace(rule, headers=json.dumps([h for h in kept if h[0] in names]))
    if not re.fullmatch(r"[0-9A-Za-z.*+!_-]+", pattern):
        raise ApprovalError(f"--narrow version={pattern!r}: expected a version glob such as 2.* or 2.31.0")
    return _replace(rule, version=pattern)


def _replace(rule: GrantRule, **changes: str) -> GrantRule:
    return GrantRule(rule.tool, rule.decision, tuple(sorted({**dict(rule.fields), **changes}.items())))


def covers(rule: GrantRule, tool: str, args: dict[str, Any]) -> bool:
    """Whether this grant decides this request (as it will run)."""
    if tool != rule.tool:
        return False
    if tool == "http_request":
        return _covers_http(rule, args)
    if tool == "pip_download":
        return _covers_pip(rule, args)
    if tool == "git_push":
        return rule.decision == "deny" and str(args.get("remote", "")) == rule.get("remote")
    return rule.decision == "deny"


def _under(path: str, prefix: str) -> bool:
    return path.startswith(prefix) and prefix.endswith("/")


def _covers_http(rule: GrantRule, args: dict[str, Any]) -> bool:
    url = canonical_url(str(args.get("url", "")))
    if url is None or url.origin != rule.get("origin"):
        return False
    if rule.decision == "deny":          # refusing more is never unsafe: any method, path, header, body
        return _under(url.path, rule.get("path"))
    headers = _headers_of(args)
    allowed = json.loads(rule.get("headers"))
    return (url.exact and str(args.get("method", "GET")).upper() == rule.get("method")
            and _under(url.path, rule.get("path")) and url.query == rule.get("query")
            and args.get("body") in (None, "") and all(h in allowed for h in headers)
            and str(args.get("credential") or "") == rule.get("credential"))


def _covers_pip(rule: GrantRule, args: dict[str, Any]) -> bool:
    req = _requirement(args)
    if req is None or canonicalize_name(req.name) != rule.get("package"):
        return False
    same_index = (str(args.get("index_url", "")) == rule.get("index")
                  and str(args.get("index_url_sha256", "")) == rule.get("index_sha256"))
    if rule.decision == "deny":
        return same_index
    version = _pinned(req)
    return (same_index and version is not None and not req.url and not req.marker
            and set(req.extras) <= set(json.loads(rule.get("extras")))
            and fnmatch.fnmatchcase(version, rule.get("version"))
            and str(args.get("python_version", "")) == rule.get("python")
            and json.dumps(args.get("platforms", [])) == rule.get("platforms"))


def describe(rule: GrantRule) -> str:
    """One line saying everything the rule allows (or refuses)."""
    f = dict(rule.fields)
    verb = "approve" if rule.decision == "approve" else "deny"
    if rule.tool == "http_request" and rule.decision == "approve":
        headers = json.loads(f["headers"])
        shown = f"no headers beyond [{', '.join(f'{n}: {v}' for n, v in headers)}]" if headers else "no headers"
        query = f"?{f['query']} exactly" if f["query"] else "no query"
        cred = f", operator credential {f['credential']}" if f["credential"] else ", no operator credential"
        return (f"{verb} http_request {f['method']} {f['origin']}{f['path']}** ({query}; no body; {shown}{cred}; "
                "no userinfo, dot segments or encoded separators)")
    if rule.tool == "http_request":
        return f"{verb} http_request of any method to {f['origin']}{f['path']}** (any path, header, body)"
    if rule.tool == "pip_download" and rule.decision == "approve":
        extras = ",".join(json.loads(f["extras"]))
        return (f"{verb} pip_download {f['package']}{f'[{extras}]' if extras else ''}==<any pinned version "
                f"matching {f['version']}> from {f['index']} for Python {f['python']} (same platform tags)")
    if rule.tool == "pip_download":
        return f"{verb} pip_download of {f['package']} at any version from {f['index']}"
    if rule.tool == "git_push":
        return f"{verb} git_push of any branch to remote {f['remote']}"
    return f"{verb} every {rule.tool} call"
