"""The environment builder's reads from the package index survive a momentary network failure: an index
page, a locked file or an sdist read for its dependencies is fetched again after a 503, a dropped
connection or a refused one, while an
answer such as 404 is final; and an index that stays unreachable says so (IndexUnreachable, which the
lock's maker reports as a failed build, not as a task unsupported offline). A real local HTTP server."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.environments import network
from harness.environments.errors import EnvironmentBuildError
from harness.environments.index import index_files
from harness.environments.lock import LockedFile
from harness.environments.lock_files import fetch_files
from harness.environments.resolution import IndexUnreachable, ResolveError
from harness.environments.sdists import read_sdist


class FlakyIndex:
    """Answers each path 503 (or drops the connection mid-body) the first `failures[path]` times, then
    `routes[path]`; any other path is a 404. Counts the requests of each path."""

    def __init__(self) -> None:
        self.routes: dict[str, bytes] = {}
        self.failures: dict[str, int] = {}
        self.drop: set[str] = set()
        self.hits: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hit = outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                body = outer.routes.get(self.path)
                if body is None:
                    self.send_error(404)
                elif hit <= outer.failures.get(self.path, 0) and self.path in outer.drop:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[:3])          # then the connection closes: an incomplete read
                    self.close_connection = True
                elif hit <= outer.failures.get(self.path, 0):
                    self.send_error(503)
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[FlakyIndex]:
    monkeypatch.setattr(network, "RETRY_PAUSES", (0.01, 0.01, 0.01))
    served = FlakyIndex()
    yield served
    served.close()


PAGE = json.dumps({"files": [{"filename": "acme-1.0-py3-none-any.whl", "url": "acme-1.0-py3-none-any.whl",
                              "hashes": {"sha256": "0" * 64}}]}).encode()


def test_an_index_page_is_read_again_after_a_503_and_a_404_is_final(index: FlakyIndex) -> None:
    index.routes["/simple/acme/"] = PAGE
    index.failures["/simple/acme/"] = 2
    [found] = index_files(f"{index.url}/simple", "acme")
    assert found["url"] == f"{index.url}/simple/acme/acme-1.0-py3-none-any.whl"
    assert index.hits["/simple/acme/"] == 3
    with pytest.raises(ResolveError, match="404") as caught:            # control: an answer, asked once
        index_files(f"{index.url}/simple", "gone")
    assert not isinstance(caught.value, IndexUnreachable) and index.hits["/simple/gone/"] == 1


def test_an_index_that_stays_unreachable_is_a_network_failure(index: FlakyIndex) -> None:
    index.routes["/simple/acme/"] = PAGE
    index.failures["/simple/acme/"] = 99
    with pytest.raises(IndexUnreachable, match="503"):
        index_files(f"{index.url}/simple", "acme")
    assert index.hits["/simple/acme/"] == 1 + len(network.RETRY_PAUSES)
    with socket.socket() as closed:          # a port nobody listens on: the connection is refused every time
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(IndexUnreachable, match="refused"):
        index_files(f"http://127.0.0.1:{port}/simple", "acme")


def test_a_locked_file_is_downloaded_again_after_a_dropped_connection(tmp_path: Path, index: FlakyIndex,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = b"the wheel's bytes " * 100
    index.routes["/acme-1.0-py3-none-any.whl"] = data
    index.failures["/acme-1.0-py3-none-any.whl"] = 1
    index.drop.add("/acme-1.0-py3-none-any.whl")
    locked = LockedFile("acme", "1.0", "acme-1.0-py3-none-any.whl", hashlib.sha256(data).hexdigest(),
                        f"{index.url}/acme-1.0-py3-none-any.whl", "wheel")
    fetch_files([locked], tmp_path / "wheels")
    assert (tmp_path / "wheels" / locked.filename).read_bytes() == data
    assert index.hits["/acme-1.0-py3-none-any.whl"] == 2
    gone = LockedFile("acme", "2.0", "acme-2.0-py3-none-any.whl", "1" * 64, f"{index.url}/acme-2.0-py3-none-any.whl",
                      "wheel")
    with pytest.raises(EnvironmentBuildError, match="no longer on the index"):   # control: 404 is final
        fetch_files([gone], tmp_path / "gone")
    assert index.hits["/acme-2.0-py3-none-any.whl"] == 1


def test_an_sdist_read_for_its_dependencies_is_downloaded_again_after_a_dropped_connection(
        index: FlakyIndex) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = b"Metadata-Version: 2.1\nName: acme\nVersion: 1.0\nRequires-Dist: six>=1.0\n"
        member = tarfile.TarInfo("acme-1.0/PKG-INFO")
        member.size = len(info)
        archive.addfile(member, io.BytesIO(info))
    data = buffer.getvalue()
    index.routes["/acme-1.0.tar.gz"] = data
    index.failures["/acme-1.0.tar.gz"] = 2
    index.drop.add("/acme-1.0.tar.gz")
    entry = {"filename": "acme-1.0.tar.gz", "url": f"{index.url}/acme-1.0.tar.gz",
             "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
    sdist, requires, _ = read_sdist("acme", "1.0", entry)
    assert (sdist.filename, requires) == ("acme-1.0.tar.gz", ["six>=1.0"])
    assert index.hits["/acme-1.0.tar.gz"] == 3                  # two cut short, read again from the start
    index.failures["/acme-1.0.tar.gz"] = 99
    index.hits.clear()
    with pytest.raises(IndexUnreachable, match="acme-1.0.tar.gz.*IncompleteRead"):   # still cut: said, not taken
        read_sdist("acme", "1.0", entry)
    assert index.hits["/acme-1.0.tar.gz"] == 1 + len(network.RETRY_PAUSES)
