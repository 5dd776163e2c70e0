"""Fixtures of the tool tests: one real sandbox per module, a fresh session per test."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from harness.config import Config
from harness.tools.catalog import Catalog, default_catalog
from tests.tools.helpers import Agent


@pytest.fixture(scope="module")
def box(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running DockerSandbox shared by the tests of one module (each test uses its own files)."""
    from sandbox.api import SandboxSpec
    from sandbox.docker_sandbox import DockerSandbox
    project = tmp_path_factory.mktemp("project")
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    spec = SandboxSpec(image=sandbox_image, session=f"test-{uuid.uuid4().hex[:8]}", project_dir=project,
                       labels={"harness.test": "1"})
    with DockerSandbox(spec) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog(Config())


@pytest.fixture
def agent(box: Any, catalog: Catalog) -> Agent:
    tag = uuid.uuid4().hex[:8]
    return Agent(catalog, box, f"s-{tag}", f"t_{tag}")


