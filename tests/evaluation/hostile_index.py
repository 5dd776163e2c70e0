"""A package index on 127.0.0.1 serving hand-made wheels and a source distribution whose build backend
writes a marker file as soon as it is imported (what an attacker's sdist would do on the host)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from tests.approval.helpers import CountingServer, make_wheel


def evil_sdist(marker: Path) -> bytes:
    """An sdist with an in-tree build backend (no build requirements, so pip imports it at once) that
    writes `marker`: proof that package code ran where it was built."""
    backend = f"open({str(marker)!r}, 'w').write('package code ran here')\n"
    files = {"evil-1.0/pyproject.toml": ('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n'),
             "evil-1.0/backend.py": backend, "evil-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def publish(index: CountingServer, name: str, version: str, requires: list[str]) -> str:
    """Serve a wheel of `name` on the index's simple page; the wheel's path on the server."""
    data = make_wheel(name, version, requires=tuple(requires))
    path = f"/files/{name}-{version}-py3-none-any.whl"
    index.routes[path] = ("application/octet-stream", data)
    index.routes[f"/simple/{name}/"] = ("text/html", (
        f'<html><body><a href="{path}#sha256={hashlib.sha256(data).hexdigest()}">'
        f'{name}-{version}-py3-none-any.whl</a></body></html>').encode())
    return path


def publish_evil(index: CountingServer, marker: Path) -> str:
    """Serve the evil sdist (not listed on any simple page); its URL."""
    index.routes["/evil-1.0.tar.gz"] = ("application/gzip", evil_sdist(marker))
    return index.url("/evil-1.0.tar.gz")
