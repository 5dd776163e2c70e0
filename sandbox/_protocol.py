"""The exec channel's wire format, shared by the host end (`sandbox/host_channel.py`) and the in-sandbox server
(`sandbox/server/`, which ships this file next to it): standard library only, Python 3.9 or newer.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The host sends one request
frame, `{"op": <Op>, <the request's fields>}`, and reads one answer frame: `{"ok": true, <the
answer's fields>}`, or `{"ok": false, "error": <RemoteError's fields>}` when the operation raised.
The first frame the server writes, unasked, is `Hello`. Bytes travel as base64 text.

Requests and answers are NamedTuples rather than dataclasses: importing `dataclasses` costs the
server 20-50 ms at start (it pulls in `inspect`), NamedTuple about 2 ms. Every field name is written
once, here; `to_dict` and the `from_dict` functions below are the only places a frame is built or read.
"""

from __future__ import annotations

import base64
import enum
import json
import struct
from collections.abc import Mapping
from typing import IO, Any, NamedTuple, TypeVar, Union

MAX_FRAME = 1 << 30
BLOB_MIN = 64 * 1024    # bytes fields from this size travel raw after the frame's JSON (see encode_frame)
BLOB = "_blob"          # the JSON key naming that field
HEADER = struct.Struct(">I")
WORKDIR = "/workspace"


class Op(str, enum.Enum):
    """The operations a request names (its `op` field)."""
    EXEC = "exec"
    READ = "read"
    WRITE = "write"
    PUT_TAR = "put_tar"
    GET_TAR = "get_tar"
    ATTACH = "attach"


class FrameError(ValueError):
    """A frame that cannot be read: too large, not JSON, or not the shape its operation expects."""


# ---- requests -------------------------------------------------------------------------------
class ExecRequest(NamedTuple):
    """Run `command` with `bash -c` (see docs/sandbox.md, "The exec channel")."""
    command: str
    timeout: float = 60.0
    grace: float = 2.0                  # seconds between SIGTERM and SIGKILL on timeout
    cwd: str = WORKDIR
    env: Mapping[str, str] | None = None
    error_pattern: str | None = None
    save: bool = True                   # keep the saved output of a stream that was cut
    output_dir: str | None = None    # where outputs are saved; None: never saved
    head_bytes: int = 32768
    tail_bytes: int = 32768
    save_bytes: int = 8 << 20
    error_lines: int = 50
    save_over_bytes: int = 0            # the host's display budget: a larger output is saved too
    save_over_lines: int = 0


class ReadRequest(NamedTuple):
    path: str                           # relative to WORKDIR, or absolute
    max_bytes: int | None = None


class WriteRequest(NamedTuple):
    path: str
    data: bytes
    expect_sha256: str | None = None  # compare-and-swap: "" = the file must not exist
    mode: int | None = None


class PutTarRequest(NamedTuple):
    data: bytes                         # an uncompressed tar
    dest: str = WORKDIR


class GetTarRequest(NamedTuple):
    max_bytes: int
    max_files: int
    src: str = WORKDIR
    exclude: tuple[str, ...] = ()       # folder names skipped at any depth


class AttachRequest(NamedTuple):
    """Move the channel onto a unix socket (sent over the exec's stdin only; see `sandbox/host_channel.py`).

    The server connects to `path` (a socket the host listens on, in a read-only folder bound into the
    container), sends `{"token": token}` as that connection's first frame so the host can tell it from
    any other, and answers here. Its next frames come over the socket; if the host closes the socket
    before sending one, the server goes back to stdin and stdout."""
    path: str
    token: str


Request = Union[ExecRequest, ReadRequest, WriteRequest, PutTarRequest, GetTarRequest, AttachRequest]


# ---- answers --------------------------------------------------------------------------------
class ErrorLine(NamedTuple):
    line: int
    text: bytes                         # the line, cut at 400 bytes


class StreamAnswer(NamedTuple):
    """One output stream of a command: bounded pieces of it, and its full size."""
    head: bytes
    tail: bytes
    total_bytes: int
    total_lines: int
    truncated: bool
    error_lines: tuple[ErrorLine, ...]
    error_lines_total: int
    saved_path: str | None = None
    saved_bytes: int = 0
    scanned_bytes: int = -1    # bytes searched for error lines from the start (-1: all of them)


class ExecAnswer(NamedTuple):
    exit_code: int                      # bash's, or 128+N when killed by signal N
    duration: float
    timed_out: bool
    killed_leftovers: int
    stdout: StreamAnswer
    stderr: StreamAnswer


class SpawnFailed(NamedTuple):
    """The exec answer when bash could not be started."""
    spawn_error: str


class ReadAnswer(NamedTuple):
    realpath: str
    data: bytes
    sha256: str                         # of the whole file, however much `data` holds
    size: int


class WriteAnswer(NamedTuple):
    written: bool
    conflict: bool                      # expect_sha256 did not match; nothing written
    sha256: str                         # of the file now


class PutTarAnswer(NamedTuple):
    files: int                          # members extracted


class GetTarAnswer(NamedTuple):
    files: int                          # members packed (files, folders, links)
    total_bytes: int                    # of the files' contents
    too_large: bool = False             # over max_files or max_bytes: no data
    data: bytes = b""
    skipped: tuple[str, ...] = ()       # sockets and fifos


class AttachAnswer(NamedTuple):
    attached: bool                      # connected and the token sent
    reason: str = ""                    # why not


class Hello(NamedTuple):
    """The server's first frame: it is ready; `guarded`: its /proc files are out of the agent's reach."""
    ready: bool
    pid: int
    guarded: bool


class RemoteError(NamedTuple):
    """An operation raised in the sandbox: `type` is the exception's class name (see OS_ERRORS)."""
    type: str
    message: str
    errno: int | None = None
    filename: str | None = None


Answer = Union[ExecAnswer, SpawnFailed, ReadAnswer, WriteAnswer, PutTarAnswer, GetTarAnswer, AttachAnswer, Hello]

# The error kinds the host raises as the same builtin exception; any other kind is a SandboxError.
OS_ERRORS: Mapping[str, type[OSError]] = {
    e.__name__: e for e in (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
                            FileExistsError)}

REQUESTS: Mapping[Op, type[Any]] = {Op.EXEC: ExecRequest, Op.READ: ReadRequest, Op.WRITE: WriteRequest,
                                    Op.PUT_TAR: PutTarRequest, Op.GET_TAR: GetTarRequest, Op.ATTACH: AttachRequest}
ANSWERS: Mapping[Op, type[Any]] = {Op.EXEC: ExecAnswer, Op.READ: ReadAnswer, Op.WRITE: WriteAnswer,
                                   Op.PUT_TAR: PutTarAnswer, Op.GET_TAR: GetTarAnswer, Op.ATTACH: AttachAnswer}
OPS: Mapping[type[Any], Op] = {cls: op for op, cls in REQUESTS.items()}
_BYTES = frozenset({"data", "head", "tail"})   # the fields that hold bytes (base64 on the wire)

T = TypeVar("T")


# ---- to and from dicts ----------------------------------------------------------------------
def to_dict(msg: Any) -> dict[str, Any]:
    """The JSON-ready dict of a request or answer (nested ones included; bytes as base64)."""
    return {name: _wire(value) for name, value in zip(msg._fields, msg)}


def _wire(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, ErrorLine):
        return [value.line, _wire(value.text)]   # a pair on the wire
    if hasattr(value, "_fields"):
        return to_dict(value)
    if isinstance(value, tuple):
        return [_wire(v) for v in value]
    return value


def check_fields(cls: type[Any], data: Mapping[str, Any]) -> None:
    """Raises FrameError naming every field of `data` that `cls` does not have, and every one it lacks."""
    fields: tuple[str, ...] = cls._fields
    defaults: Mapping[str, Any] = cls._field_defaults
    unknown = sorted(set(data) - set(fields))
    missing = [f for f in fields if f not in data and f not in defaults]
    if unknown or missing:
        wrong = [f"unknown fields {unknown}"] if unknown else []
        wrong += [f"missing fields {missing}"] if missing else []
        raise FrameError(f"{cls.__name__}: {', '.join(wrong)}; expected the fields {list(fields)}, "
                         f"of which these may be left out: {sorted(defaults)}")


def check_request(data: Mapping[str, Any]) -> Op:
    """The op of a request dict whose fields are all right. Raises FrameError."""
    try:
        op = Op(data.get("op"))
    except ValueError:
        raise FrameError(f"unknown op {data.get('op')!r}; expected one of {[o.value for o in Op]}") from None
    check_fields(REQUESTS[op], {k: v for k, v in data.items() if k != "op"})
    return op


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """`cls` from its dict; FrameError names every unknown or missing field at once."""
    check_fields(cls, data)
    values: dict[str, Any] = {k: (base64.b64decode(v) if k in _BYTES and isinstance(v, str) else v)
                              for k, v in data.items()}
    if cls is StreamAnswer:
        values["error_lines"] = tuple(ErrorLine(int(n), base64.b64decode(t)) for n, t in values["error_lines"])
    elif cls is ExecAnswer:
        values["stdout"] = from_dict(StreamAnswer, values["stdout"])
        values["stderr"] = from_dict(StreamAnswer, values["stderr"])
    for name in ("exclude", "skipped"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    return cls(**values)


def _top(msg: Any) -> dict[str, Any]:
    """`to_dict`, except that a large bytes field stays bytes: `encode_frame` sends it raw after the JSON."""
    return {name: value if isinstance(value, bytes) and len(value) >= BLOB_MIN else _wire(value)
            for name, value in zip(msg._fields, msg)}


def request_to_dict(request: Request) -> dict[str, Any]:
    return {"op": OPS[type(request)].value, **_top(request)}


def request_from_dict(data: Mapping[str, Any]) -> Request:
    """The typed request of a request frame. Raises FrameError (unknown op, bad fields)."""
    op = check_request(data)
    return from_dict(REQUESTS[op], {k: v for k, v in data.items() if k != "op"})  # type: ignore[no-any-return]


def answer_to_dict(answer: Answer) -> dict[str, Any]:
    return {"ok": True, **_top(answer)}


def error_to_dict(error: RemoteError) -> dict[str, Any]:
    return {"ok": False, "error": to_dict(error)}


def answer_from_dict(op: Op, data: Mapping[str, Any]) -> Answer | RemoteError:
    """The typed answer to an `op` request, or the RemoteError it reports. Raises FrameError."""
    fields = dict(data)
    if not fields.pop("ok", False):
        return from_dict(RemoteError, fields.get("error") or {"type": "FrameError", "message": repr(data)})
    if op is Op.EXEC and "spawn_error" in fields:
        return from_dict(SpawnFailed, fields)
    answer: Answer = from_dict(ANSWERS[op], fields)
    return answer


def hello_from_dict(data: Mapping[str, Any]) -> Hello:
    return from_dict(Hello, {k: v for k, v in data.items() if k != "ok"})


# ---- frames ---------------------------------------------------------------------------------
def encode_frame(obj: Mapping[str, Any]) -> bytes:
    """Header, JSON, and when a field holds bytes (a large one, left raw by `_top`): a NUL and those bytes,
    the JSON naming the field under BLOB. Raw bytes cost nothing to encode; base64 in JSON cost about a
    second each way for a django-sized tar. JSON never holds a NUL byte (it escapes U+0000), so the
    first NUL ends it. A second bytes field, if any, goes as base64."""
    fields = dict(obj)
    raw = [k for k, v in fields.items() if isinstance(v, bytes)]
    blob = fields.pop(raw[0]) if raw else None
    for name in raw[1:]:
        fields[name] = base64.b64encode(fields[name]).decode("ascii")
    if blob is None:
        body = json.dumps(fields).encode("utf-8")
        return HEADER.pack(len(body)) + body
    head = json.dumps({**fields, BLOB: raw[0]}).encode("utf-8")
    return b"".join((HEADER.pack(len(head) + 1 + len(blob)), head, b"\0", blob))


def frame_size(header: bytes) -> int:
    """The body size a frame header announces. Raises FrameError over MAX_FRAME."""
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise FrameError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    return int(size)


def decode_body(body: bytes) -> dict[str, Any]:
    cut = body.find(b"\0")
    obj = json.loads((body if cut < 0 else body[:cut]).decode("utf-8"))
    if not isinstance(obj, dict):
        raise FrameError(f"a frame holds a JSON object, got {type(obj).__name__}")
    if cut >= 0:
        name = obj.pop(BLOB, None)
        if name not in _BYTES:
            raise FrameError(f"a frame's raw bytes belong to field {name!r}; only {sorted(_BYTES)} hold bytes")
        obj[name] = body[cut + 1:]
    return obj


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next frame of a blocking stream, or None at its end."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    size = frame_size(header)
    body = stream.read(size)
    if len(body) < size:
        return None
    return decode_body(body)


def write_frame(stream: IO[bytes], obj: Mapping[str, Any]) -> None:
    stream.write(encode_frame(obj))
    stream.flush()
