"""Grading's third step: remove what stands where a test file goes (a link or file in place of a folder
on its path, the file itself), then check the base version of those in the baseline
(grading_record.py's) out; run after the model patch, before the test patch.

Run by `harness.evaluation.grading` with the grading sandbox's python3 (any from 3.7; the images the
harness builds have 3.9 and up), as `python3 restore.py test_files.json`, with GIT_DIR and
GIT_WORK_TREE in the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def clear_the_way(work: str, rel: str) -> None:
    here = work
    for part in rel.split("/")[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here) or (os.path.lexists(here) and not os.path.isdir(here)):
            os.remove(here)
    target = os.path.join(work, rel)
    if os.path.islink(target) or os.path.isfile(target):
        os.remove(target)


def main(listing: str) -> None:
    with open(listing) as handle:
        files = json.load(handle)
    for rel in files:
        clear_the_way(os.environ["GIT_WORK_TREE"], rel)
    listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", "HEAD"], check=True,
                            capture_output=True).stdout.decode("utf-8", "surrogateescape").split("\0")
    base = sorted(set(files) & set(listed))
    if base:
        subprocess.run(["git", "checkout", "-q", "HEAD", "--", *base], check=True)


if __name__ == "__main__":
    main(sys.argv[1])
