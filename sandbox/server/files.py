"""File operations: read (with the whole file's sha256), write (atomic, compare-and-swap on
`expect_sha256`), and tar in and out of the sandbox.

hashlib and tarfile are imported where first needed: at module level they slow the channel's start-up.
"""

from __future__ import annotations

import io
import os

from sandbox._protocol import (
    WORKDIR,
    GetTarAnswer,
    GetTarRequest,
    PutTarAnswer,
    PutTarRequest,
    ReadAnswer,
    ReadRequest,
    WriteAnswer,
    WriteRequest,
)


def read_file(req: ReadRequest) -> ReadAnswer:
    import hashlib  # noqa: PLC0415 - see the module docstring
    path = os.path.join(WORKDIR, req.path)
    real = os.path.realpath(path)
    digest = hashlib.sha256()
    limit = req.max_bytes
    kept = bytearray()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            digest.update(block)
            if limit is None or len(kept) < limit:
                kept += block if limit is None else block[: limit - len(kept)]
    return ReadAnswer(realpath=real, data=bytes(kept), sha256=digest.hexdigest(), size=size)


def write_file(req: WriteRequest) -> WriteAnswer:
    import hashlib  # noqa: PLC0415 - see the module docstring
    path = os.path.join(WORKDIR, req.path)
    try:
        with open(path, "rb") as f:
            current = hashlib.sha256(f.read()).hexdigest()
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        current, mode = "", 0o644
    if req.expect_sha256 is not None and req.expect_sha256 != current:
        return WriteAnswer(written=False, conflict=True, sha256=current)
    if req.mode is not None:
        mode = int(req.mode)
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.harness-tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(req.data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return WriteAnswer(written=True, conflict=False, sha256=hashlib.sha256(req.data).hexdigest())


def put_tar(req: PutTarRequest) -> PutTarAnswer:
    """Every member checked from the headers (plain relative paths, only files, folders and links, none
    beneath a link of the archive), then extracted by GNU tar (C speed: Python's tarfile took seconds
    for a django-sized tree), as the server's user, modes kept."""
    import subprocess  # noqa: PLC0415 - see the module docstring
    import tarfile  # noqa: PLC0415
    os.makedirs(req.dest, exist_ok=True)
    links: set[str] = set()
    count = 0
    with tarfile.open(fileobj=io.BytesIO(req.data), mode="r:") as tar:
        for m in tar:
            name = m.name.rstrip("/")
            parts = name.split("/")
            beneath_link = any("/".join(parts[:i]) in links for i in range(1, len(parts)))
            if name.startswith("/") or ".." in parts or beneath_link or not (m.isfile() or m.isdir() or m.issym()):
                raise ValueError(f"refusing tar member {m.name!r}")
            if m.issym():
                links.add(name)
            count += 1
    done = subprocess.run(["tar", "-x", "-p", "--no-same-owner", "-C", req.dest, "-f", "-"], input=req.data,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise OSError(f"tar could not unpack into {req.dest}: {done.stderr.decode('utf-8', 'replace')[-500:]}")
    return PutTarAnswer(files=count)


def get_tar(req: GetTarRequest) -> GetTarAnswer:
    import tarfile  # noqa: PLC0415 - see the module docstring
    exclude = set(req.exclude)
    buf = io.BytesIO()
    total = count = 0
    skipped: list[str] = []
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for root, dirs, files in os.walk(req.src, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in exclude)
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(root, name)
                rel = os.path.relpath(full, req.src)
                info = tar.gettarinfo(full, arcname=rel)
                if info is None or not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                    skipped.append(rel)   # sockets and fifos hold no content
                    continue
                if info.islnk():          # a hard link inside the tree: copied as the file it is
                    info.type, info.linkname, info.size = tarfile.REGTYPE, "", os.lstat(full).st_size
                count += 1
                total += info.size if info.isfile() else 0
                if count > int(req.max_files) or total > int(req.max_bytes):
                    return GetTarAnswer(files=count, total_bytes=total, too_large=True)
                if info.isfile():
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return GetTarAnswer(files=count, total_bytes=total, data=buf.getvalue(), skipped=tuple(skipped))
