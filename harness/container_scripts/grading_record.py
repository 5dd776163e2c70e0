"""Grading's first step: record the base version of the test files that exist, in a git baseline whose
GIT_DIR (from the environment, with GIT_WORK_TREE) is outside /workspace; run before the model patch.
A path under a link is left out (git refuses it, and grading_restore.py removes the link).

Run by `harness.evaluation.grading` with the grading sandbox's python3
(any from 3.7; the images the harness builds have 3.9 and up), as `python3 record.py test_files.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def plain(work: str, rel: str) -> bool:
    """Whether `rel` is a file or link under `work` with no link or non-folder on its way."""
    here = work
    for part in rel.split("/")[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here) or not os.path.isdir(here):
            return False
    target = os.path.join(work, rel)
    return os.path.islink(target) or os.path.isfile(target)


def main(listing: str) -> None:
    with open(listing) as handle:
        files = json.load(handle)
    work = os.environ["GIT_WORK_TREE"]
    present = [rel for rel in files if plain(work, rel)]
    subprocess.run(["git", "init", "-q"], check=True)
    if present:
        subprocess.run(["git", "add", "-f", "--", *present], check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "--no-verify", "--no-gpg-sign", "-m", "base"], check=True)


if __name__ == "__main__":
    main(sys.argv[1])
