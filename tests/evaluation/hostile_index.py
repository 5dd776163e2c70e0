"""A package index on 127.0.0.1 serving hand-made wheels and a source distribution whose build backend
writes a marker file as soon as it is imported (what an attacker's sdist would do on the host)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

from tests.approval.helpers import CountingServer


def wheel(name: str, version: str, requires: list[str]) -> bytes:
    """A valid pure-Python wheel with one empty module and these `Requires-Dist` lines."""
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(), f"{dist}/METADATA": meta.encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(path, data)
    return buf.getvalue()


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
    data = wheel(name, version, requires)
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
