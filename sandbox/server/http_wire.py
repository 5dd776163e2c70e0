"""HTTP/1.x as the loopback relay reads and writes it (`sandbox.server.relay`): one request from a client's
connection, bounded and checked, into the fields of a request frame; the host's answer, checked again,
into the bytes written back. A request that cannot be read raises `Refused`, which the relay answers
itself. Standard library only, Python 3.9+.
"""

from __future__ import annotations

from typing import IO, Any

MAX_HEAD = 64 * 1024            # request line, headers (and a chunked body's trailers)
MAX_BODY = 32 * 1024 * 1024     # a request's body, after chunked decoding
TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"})


class Refused(Exception):
    """A request this end answers itself: `status` and a text body saying what was wrong."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


# ---- reading a request ------------------------------------------------------------------------
class Head:
    """What is left of MAX_HEAD for the lines of one request (its head, then its trailers)."""

    def __init__(self, rfile: IO[bytes]) -> None:
        self.rfile, self.left = rfile, MAX_HEAD

    def raw(self) -> bytes:
        """The next line with its line end; b"" at the end of the stream."""
        line = self.rfile.readline(self.left + 1)
        self.left -= len(line)
        if self.left < 0:
            raise Refused(431, "Request Header Fields Too Large", f"the request line and headers exceed "
                          f"{MAX_HEAD} bytes; send smaller headers")
        if line and not line.endswith(b"\n"):
            raise Refused(400, "Bad Request", "the connection ended inside the request's head")
        return line

    def line(self) -> bytes:
        return self.raw().rstrip(b"\r\n")


def read_request(rfile: IO[bytes], wfile: IO[bytes]) -> tuple[dict[str, Any], bool] | None:
    """The next request of a connection as a frame's fields, and whether the connection may stay open;
    None when the client closed it between requests. Raises Refused, OSError (socket.timeout included)."""
    head = Head(rfile)
    raw = head.raw()
    while raw in (b"\r\n", b"\n"):   # RFC 9112 2.2: empty lines before a request line are ignored
        raw = head.raw()
    if raw == b"":
        return None
    method, target, version = request_line(raw.rstrip(b"\r\n"))
    headers = header_lines(head)
    fields = {k.lower(): v for k, v in reversed(headers)}   # the first of a repeated header wins
    connection = {t.strip().lower() for t in fields.get("connection", "").split(",")}
    keep = ("keep-alive" in connection) if version == "HTTP/1.0" else ("close" not in connection)
    if method == "CONNECT":
        keep = False   # no tunnel is ever opened here: the answer ends the connection
    body = read_body(rfile, wfile, head, headers, fields, version)
    return {"method": method, "target": target, "headers": [list(h) for h in headers], "data": body}, keep


def request_line(line: bytes) -> tuple[str, str, str]:
    parts = line.split(b" ")
    if len(parts) != 3:
        raise Refused(400, "Bad Request", f"the request line {shown(line)} is not METHOD TARGET VERSION; "
                      "expected e.g. 'POST /v1/chat/completions HTTP/1.1'")
    method, target, version = (part.decode("latin-1") for part in parts)
    if not method or not set(method) <= TOKEN:
        raise Refused(400, "Bad Request", f"the method {shown(parts[0])} is not an HTTP token; expected e.g. POST")
    if not target or any(ord(c) <= 32 or ord(c) == 127 for c in target):
        raise Refused(400, "Bad Request", f"the target {shown(parts[1])} is empty or holds controls or "
                      "spaces; expected e.g. /v1/models")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise Refused(505, "HTTP Version Not Supported", f"the version {shown(parts[2])} is not served; "
                      "expected HTTP/1.1 or HTTP/1.0")
    return method, target, version


def header_lines(head: Head) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    while True:
        line = head.line()
        if line == b"":
            return headers
        name, colon, value = line.partition(b":")
        text = name.decode("latin-1")
        if not colon or not text or not set(text) <= TOKEN:
            raise Refused(400, "Bad Request", f"the header line {shown(line)} is not NAME: VALUE (a folded "
                          "line or a space before the colon included); expected e.g. 'Content-Type: text/plain'")
        value = value.strip(b" \t")
        if any(b < 32 and b != 9 or b == 127 for b in value):
            raise Refused(400, "Bad Request", f"the value of header {text!r} holds control characters")
        headers.append((text, value.decode("latin-1")))


def read_body(rfile: IO[bytes], wfile: IO[bytes], head: Head, headers: list[tuple[str, str]],
              fields: dict[str, str], version: str) -> bytes:
    lengths = [v for k, v in headers if k.lower() == "content-length"]
    coding = fields.get("transfer-encoding")
    if coding is not None and lengths:
        raise Refused(400, "Bad Request", "the request has both Transfer-Encoding and Content-Length; send one")
    if coding is not None:
        if coding.strip().lower() != "chunked" or version == "HTTP/1.0":
            raise Refused(501, "Not Implemented", f"the transfer coding {coding!r} is not served; expected "
                          "'Transfer-Encoding: chunked' (HTTP/1.1) or a Content-Length")
        continue_if_asked(wfile, fields)
        return read_chunked(rfile, head)
    if not lengths:
        return b""
    if len(set(lengths)) != 1 or not lengths[0].isdigit() or not lengths[0].isascii():
        raise Refused(400, "Bad Request", f"Content-Length {lengths!r} is not one decimal number; expected e.g. "
                      "'Content-Length: 42'")
    size = int(lengths[0])
    if size > MAX_BODY:
        raise Refused(413, "Payload Too Large", f"the body of {size} bytes exceeds the relay's {MAX_BODY}; "
                      "send a smaller one")
    continue_if_asked(wfile, fields)
    return read_exact(rfile, size)


def continue_if_asked(wfile: IO[bytes], fields: dict[str, str]) -> None:
    """`Expect: 100-continue` (curl's for a large body): the body is welcome, say so before reading it."""
    if fields.get("expect", "").lower() == "100-continue":
        wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        wfile.flush()


def read_exact(rfile: IO[bytes], size: int) -> bytes:
    data = rfile.read(size)
    if len(data) < size:
        raise Refused(400, "Bad Request", f"the connection ended after {len(data)} of the body's {size} bytes")
    return data


def read_chunked(rfile: IO[bytes], head: Head) -> bytes:
    body = bytearray()
    while True:
        line = head.line()
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16) if size_text and len(size_text) <= 16 else -1
        except ValueError:
            size = -1
        if size < 0 or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
            raise Refused(400, "Bad Request", f"the chunk size line {shown(line)} is not a hex number; "
                          "expected e.g. '1a'")
        if size == 0:
            header_lines(head)   # trailers: read (within MAX_HEAD) and dropped
            return bytes(body)
        if len(body) + size > MAX_BODY:
            raise Refused(413, "Payload Too Large", f"the chunked body exceeds the relay's {MAX_BODY} bytes; "
                          "send a smaller one")
        body += read_exact(rfile, size)
        if rfile.read(2) != b"\r\n":
            raise Refused(400, "Bad Request", "a chunk's data is not followed by CRLF")


def shown(raw: bytes) -> str:
    """A piece of the client's bytes for a message: cut, and in ASCII."""
    return ascii(raw[:80].decode("latin-1")) + ("..." if len(raw) > 80 else "")


# ---- writing an answer ------------------------------------------------------------------------
def response_bytes(status: int, reason: str, headers: list[tuple[str, str]], body: bytes, keep: bool,
                   head_only: bool) -> bytes:
    """The response as written to the client: the host's headers but the framing ones, which are ours."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    length = None
    for name, value in headers:
        if name.lower() == "content-length" and head_only:
            length = value
        elif name.lower() not in HOP_BY_HOP:
            lines.append(f"{name}: {value}")
    if status >= 200 and status not in (204, 304):
        lines.append(f"Content-Length: {length if length is not None else len(body)}")
    lines.append("Connection: keep-alive" if keep else "Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return raw if head_only or status < 200 or status in (204, 304) else raw + body


def refusal_bytes(refused: Refused) -> bytes:
    text = f"{refused} (answered by the sandbox's loopback relay; the request did not reach the host)\n"
    return response_bytes(refused.status, refused.reason, [("Content-Type", "text/plain; charset=utf-8")],
                          text.encode("utf-8"), False, False)


def answer_fields(frame: dict[str, Any]) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """The host's answer, checked again here: a status line or header that could split the response
    becomes a 502 rather than reaching the client."""
    status, reason, body = frame.get("status"), frame.get("reason"), frame.get("data")
    headers = [tuple(h) for h in frame.get("headers") or () if isinstance(h, list) and len(h) == 2
               and all(isinstance(x, str) for x in h)]
    pairs: list[tuple[str, str]] = [(str(k), str(v)) for k, v in headers]
    text = "".join(k + v for k, v in pairs) + (reason if isinstance(reason, str) else "")
    if (not isinstance(status, int) or not 200 <= status <= 599 or not isinstance(reason, str)
            or not isinstance(body, bytes) or len(pairs) != len(frame.get("headers") or ())
            or any(c in text for c in "\r\n\0") or any(not k or not set(k) <= TOKEN for k, _ in pairs)):
        return 502, "Bad Gateway", [("Content-Type", "text/plain")], b"the host's answer was malformed\n"
    return status, reason, pairs, body
