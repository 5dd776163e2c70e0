"""Where the benchmarks find the shared SWE-bench data: $HARNESS_SWEBENCH_DATA, else `shared/swebench`
beside the checkout, else /work/shared/swebench (the first of them holding what is asked for)."""

from __future__ import annotations

import os
from pathlib import Path


def swebench_path(relative: str) -> Path:
    """`relative` (e.g. "repos") in the first place that holds it; exits naming it when none does."""
    beside = Path(__file__).resolve().parents[2] / "shared" / "swebench"
    for place in (os.environ.get("HARNESS_SWEBENCH_DATA"), beside, "/work/shared/swebench"):
        if place and (Path(place) / relative).exists():
            return Path(place) / relative
    raise SystemExit(f"no SWE-bench {relative} found: pass --tarball, or set HARNESS_SWEBENCH_DATA")
