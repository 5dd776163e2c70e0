"""Where the published data of the replay tests is: the six mini-swe-agent trajectories and the SWE-bench
rows and source tarballs, in the `shared/` folder beside the checkout (as CI lays it out)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def shared(name: str, env: str, marker: str) -> Path:
    """`$env`, else `shared/<name>` beside the checkout, else /work/shared/<name>: the first holding `marker`."""
    beside = Path(__file__).resolve().parents[3] / "shared" / name
    places = ([Path(os.environ[env])] if os.environ.get(env) else []) + [beside, Path("/work/shared") / name]
    return next((p for p in places if (p / marker).exists()), beside)


SHORTEST_WITH_SOURCE = "django__django-11099"    # 21 steps; its source tarball is in the shared data
TRAJECTORIES = shared("trajectories", "HARNESS_TRAJECTORIES", f"{SHORTEST_WITH_SOURCE}.traj.json")
SWEBENCH = shared("swebench", "HARNESS_SWEBENCH_DATA", "lite-test.jsonl")


def swebench_row(instance_id: str) -> dict[str, Any]:
    """The SWE-bench Lite test row of `instance_id`."""
    rows = (json.loads(line) for line in (SWEBENCH / "lite-test.jsonl").read_text().splitlines() if line.strip())
    return next(r for r in rows if r["instance_id"] == instance_id)


def published_patch(instance_id: str) -> str:
    """The patch the published run submitted for `instance_id` (preds.jsonl)."""
    preds = (json.loads(line) for line in (TRAJECTORIES / "preds.jsonl").read_text().splitlines() if line.strip())
    return str(next(p for p in preds if p["instance_id"] == instance_id)["model_patch"])
