"""A SWE-bench 5.0 eval script's `git checkout <base_commit> FILES`, in the grading sandbox: FILES must be
among the test patch's files, whose base versions grading recorded (grading_record.py); writes them as
the listing grading_restore.py puts back, or names the others and exits 1.

Run by eval_compat.sh's `git` function with the grading sandbox's python3 (3.7+), as
`python3 eval_checkout.py STAGE_DIR FILE...` (a `--` among the files is git's and is dropped).
"""

from __future__ import annotations

import json
import os
import sys


def main(stage: str, wanted: list[str]) -> int:
    with open(os.path.join(stage, "test_files.json")) as handle:
        recorded = set(json.load(handle))
    files = [name for name in wanted if name != "--"]
    unknown = [name for name in files if name not in recorded]
    if unknown:
        print(f"harness: cannot check out {', '.join(unknown)} at the base commit: the grading sandbox has the "
              f"base version of the test patch's files only ({len(recorded)} recorded)")
        return 1
    with open(os.path.join(stage, "checkout.json"), "w") as handle:
        json.dump(files, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
