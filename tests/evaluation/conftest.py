"""Fixtures of the evaluation tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import load

TASKS = Path(__file__).resolve().parents[2] / "tasks"
TEST_LABELS = {"harness.test": "1"}


@pytest.fixture
def config_and_secrets():  # type: ignore[no-untyped-def]
    return load({})
