"""The channel's wire format (`sandbox/_protocol.py`): every request and answer survives a trip
through a frame, and a frame of the wrong shape is refused with every wrong field named."""

from __future__ import annotations

import base64
import io
import json

import pytest

from sandbox import _protocol as p

STREAM = p.StreamAnswer(head=b"a\x00\xff", tail=b"z", total_bytes=9, total_lines=2, truncated=True,
                        error_lines=(p.ErrorLine(2, b"ERROR x"),), error_lines_total=1, saved_path="/tmp/o")
REQUESTS = [p.ExecRequest("echo hi", timeout=5.0, env={"A": "1"}, error_pattern="ERROR"),
            p.ReadRequest("a.txt", max_bytes=10), p.WriteRequest("a.txt", b"\x00data", expect_sha256=""),
            p.PutTarRequest(b"tar bytes"), p.GetTarRequest(100, 10, exclude=(".git",)),
            p.AttachRequest("/opt/harness/link/x.sock", "ab" * 32)]
ANSWERS = [(p.Op.EXEC, p.ExecAnswer(0, 0.5, False, 1, STREAM, STREAM)), (p.Op.EXEC, p.SpawnFailed("OSError: x")),
           (p.Op.READ, p.ReadAnswer("/workspace/a.txt", b"\x01", "f" * 64, 1)),
           (p.Op.WRITE, p.WriteAnswer(False, True, "")), (p.Op.PUT_TAR, p.PutTarAnswer(3)),
           (p.Op.GET_TAR, p.GetTarAnswer(2, 7, data=b"tar", skipped=("fifo",))),
           (p.Op.ATTACH, p.AttachAnswer(False, "FileNotFoundError: x"))]


def _through_a_frame(obj: dict) -> dict:
    stream = io.BytesIO()
    p.write_frame(stream, obj)
    stream.seek(0)
    got = p.read_frame(stream)
    assert got is not None and p.read_frame(stream) is None
    return got


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_request_survives_a_frame(request_: p.Request) -> None:
    assert p.request_from_dict(_through_a_frame(p.request_to_dict(request_))) == request_


@pytest.mark.parametrize(("op", "answer"), ANSWERS, ids=lambda a: getattr(a, "value", type(a).__name__))
def test_every_answer_survives_a_frame(op: p.Op, answer: p.Answer) -> None:
    assert p.answer_from_dict(op, _through_a_frame(p.answer_to_dict(answer))) == answer


def test_an_error_answer_becomes_a_remote_error() -> None:
    error = p.RemoteError("FileNotFoundError", "No such file or directory", 2, "/workspace/x")
    assert p.answer_from_dict(p.Op.READ, _through_a_frame(p.error_to_dict(error))) == error
    assert p.OS_ERRORS[error.type] is FileNotFoundError


def test_a_request_with_wrong_fields_is_refused_naming_each_of_them() -> None:
    with pytest.raises(p.FrameError) as caught:
        p.check_request({"op": "get_tar", "src": "/workspace", "bogus": 1})
    assert "unknown fields ['bogus']" in str(caught.value)
    assert "missing fields ['max_bytes', 'max_files']" in str(caught.value)
    p.check_request({"op": "get_tar", "max_bytes": 1, "max_files": 1})   # positive control


def test_an_unknown_op_is_refused_with_the_known_ones() -> None:
    with pytest.raises(p.FrameError, match=r"unknown op 'ping'; expected one of \['exec', 'read'"):
        p.check_request({"op": "ping"})


def test_a_frame_over_the_limit_is_refused_before_its_body_is_read() -> None:
    with pytest.raises(p.FrameError, match="exceeds"):
        p.frame_size(p.HEADER.pack(p.MAX_FRAME + 1))
    assert p.frame_size(p.HEADER.pack(p.MAX_FRAME)) == p.MAX_FRAME


def test_large_bytes_travel_raw_after_the_json_and_come_back_equal() -> None:
    data = bytes(range(256)) * 4096 + b"\x00\n{}\"" * 10           # 1 MiB and more, NULs and JSON inside
    frame = p.encode_frame(p.request_to_dict(p.PutTarRequest(data=data, dest="/workspace")))
    body = frame[p.HEADER.size:]
    assert p.frame_size(frame[:p.HEADER.size]) == len(body) and body.endswith(data)
    assert base64.b64encode(data[:3000]) not in body                  # not base64: raw
    assert p.request_from_dict(p.decode_body(body)) == p.PutTarRequest(data=data, dest="/workspace")
    answer = p.ReadAnswer(realpath="/workspace/x", data=data, sha256="0" * 64, size=len(data))
    got = p.answer_from_dict(p.Op.READ, p.decode_body(p.encode_frame(p.answer_to_dict(answer))[p.HEADER.size:]))
    assert got == answer
    small = p.encode_frame(p.request_to_dict(p.WriteRequest(path="a", data=b"\x00hi")))
    assert b"\x00" not in small[p.HEADER.size:] and b'"AGhp"' in small     # small bytes stay base64 in the JSON


def test_raw_bytes_may_only_fill_a_bytes_field() -> None:
    forged = json.dumps({"op": "exec", "timeout": 5, p.BLOB: "command"}).encode() + b"\x00rm -rf /"
    with pytest.raises(p.FrameError, match="only .* hold bytes"):
        p.decode_body(forged)
