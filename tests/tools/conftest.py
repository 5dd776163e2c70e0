"""Fixtures of the tool tests: the tools on the local test double by default, on a real sandbox where
a test touches what only a container has.

`agent` drives the tools against `LocalRuntime` (sandbox/runtime/local.py: a folder on the host, no
isolation, tests only), whose files, compare-and-swap and errors agree with the exec channel's
(tests/sandbox/test_local_runtime.py runs one scenario against both). `docker_agent` drives them
against a `DockerSandbox`: for the shell tool's saved outputs, file permissions (the tests may run as
root) and paths that leave the workspace (on the double they would reach the host's own files).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config
from harness.tools.catalog import Catalog, default_catalog
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.runtime.local import LocalRuntime
from tests.tools.helpers import Agent


def _project(root: Path) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return root


@pytest.fixture(scope="module")
def box(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerSandbox]:
    """A running DockerSandbox shared by the tests of one module (each test uses its own files)."""
    spec = SandboxSpec(image=sandbox_image, session=f"test-{uuid.uuid4().hex[:8]}",
                       project_dir=_project(tmp_path_factory.mktemp("project")), labels={"harness.test": "1"})
    with DockerSandbox(spec) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def local_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    """The test double shared by the tests of one module (each test uses its own files)."""
    with LocalRuntime(tmp_path_factory.mktemp("local"), session=f"test-{uuid.uuid4().hex[:8]}",
                      project_dir=_project(tmp_path_factory.mktemp("project"))) as double:
        yield double


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return default_catalog(Config())


@pytest.fixture
def agent(local_box: LocalRuntime, catalog: Catalog) -> Agent:
    """A fresh session on the test double, in a folder of its own."""
    tag = uuid.uuid4().hex[:8]
    return Agent(catalog, local_box, f"s-{tag}", f"t_{tag}")


@pytest.fixture
def docker_agent(box: DockerSandbox, catalog: Catalog) -> Agent:
    """A fresh session on a real sandbox, in a folder of its own."""
    tag = uuid.uuid4().hex[:8]
    return Agent(catalog, box, f"s-{tag}", f"t_{tag}")
