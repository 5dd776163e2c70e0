"""How environment images are named and labelled, and built once each.

Every environment image is `REPOSITORY:<kind prefix><hash of its inputs>` and carries HASH_LABEL and
KIND_LABEL ("pinned", "sdists", "environment" or "instance"; KEY_LABEL and LOCK_LABEL on the recipe's):
equal inputs share one image, and nothing is rebuilt while its inputs stand. `build_lock` makes the
builds of one tag (and the making of one lock) in this process wait for each other.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

REPOSITORY = "harness-env"
HASH_LABEL = "harness.env.hash"
KIND_LABEL = "harness.env.kind"
KEY_LABEL = "harness.env.key"
LOCK_LABEL = "harness.env.lock"      # the environment image's lock, as its path under a locks folder
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def tree_hash(root: Path) -> str:
    """A hash of the names and contents of the files under `root` (.git and __pycache__ left out)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not {"__pycache__", ".git"} & set(p.parts)):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_lock(digest: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(digest, threading.Lock())
