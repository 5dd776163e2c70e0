"""Fixtures of the evaluation tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config import load

TASKS = Path(__file__).resolve().parents[2] / "tasks"
TEST_LABELS = {"harness.test": "1"}


def swebench_data() -> Path:
    """The shared SWE-bench rows and source tarballs: $HARNESS_SWEBENCH_DATA, else `shared/swebench` beside
    the checkout, else /work/shared/swebench (a clone made elsewhere, e.g. /tmp/x). Without any, the
    beside-the-checkout path, which the tests then name in their failure."""
    beside = Path(__file__).resolve().parents[3] / "shared" / "swebench"
    candidates = [Path(os.environ["HARNESS_SWEBENCH_DATA"])] if os.environ.get("HARNESS_SWEBENCH_DATA") else []
    candidates += [beside, Path("/work/shared/swebench")]
    return next((c for c in candidates if (c / "lite-test.jsonl").is_file()), beside)


SWEBENCH_DATA = swebench_data()


@pytest.fixture
def config_and_secrets():  # type: ignore[no-untyped-def]
    return load({})
