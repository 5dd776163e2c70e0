"""Fixtures of the evaluation tests: a private cache folder, quiet runs labelled as test runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import load

TASKS = Path(__file__).resolve().parents[2] / "tasks"
TEST_LABELS = {"harness.test": "1"}


@pytest.fixture(scope="session")
def eval_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheelhouses and extracted sources are cached per test session (images are cached by Docker)."""
    return tmp_path_factory.mktemp("harness-cache")


@pytest.fixture(autouse=True)
def _cache_env(eval_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(eval_cache))


@pytest.fixture
def config_and_secrets():  # type: ignore[no-untyped-def]
    return load({})
