"""The runner picks its backend by name; both implement the Backend protocol's one method."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.evaluation.backends import Backend
from harness.evaluation.backends.local import ThreadPoolBackend
from harness.evaluation.backends.ray import RayBackend
from harness.evaluation.options import EvalOptions
from harness.evaluation.runner import backend


def test_the_runner_builds_the_backend_the_options_name(tmp_path: Path) -> None:
    local = backend(EvalOptions(out_dir=tmp_path, workers=3))
    assert isinstance(local, ThreadPoolBackend) and local.workers == 3
    ray = backend(EvalOptions(out_dir=tmp_path, backend="ray", ray_address="127.0.0.1:6379"))
    assert isinstance(ray, RayBackend) and ray.address == "127.0.0.1:6379"


def test_an_unknown_backend_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown evaluation backend 'slurm'; expected \"local\" or \"ray\""):
        backend(EvalOptions(out_dir=tmp_path, backend="slurm"))


@pytest.mark.parametrize("implementation", [ThreadPoolBackend, RayBackend])
def test_each_backend_has_the_protocols_evaluate_signature(implementation: type) -> None:
    assert inspect.signature(implementation.evaluate) == inspect.signature(Backend.evaluate)
