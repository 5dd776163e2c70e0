"""One sandbox factory: the provider a spec names is constructed in `sandbox/factory.py` only, and every
SandboxSpec the harness starts is made by `harness/agent/assembly.py` (the pool's blanks, in `sandbox/pool.py`,
copy a spec they were given). The one other maker is an environment build's container
(`harness/environments/instance_layer.py`): a build, not a workspace, started by `DockerDeployment` with
`layer_build=True`, the one named relaxation of `container_options()`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sandbox.api import PROVIDERS, SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.factory import create_sandbox
from tests.test_imports import ROOT, module_names

FACTORY = "sandbox.factory"
SPEC_MAKERS = {"harness.agent.assembly", "sandbox.pool", "harness.environments.instance_layer"}


def _calls(source: str, name: str) -> int:
    """How many calls of `name` (a bare name or an attribute, `x.name(...)`) the source makes."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            count += called == name
    return count


def _sources() -> dict[str, str]:
    found = {}
    for package in ("harness", "sandbox"):
        for module in module_names(package):
            rel = Path(*module.split("."))
            path = ROOT / rel / "__init__.py" if (ROOT / rel).is_dir() else ROOT / rel.with_suffix(".py")
            found[module] = path.read_text(encoding="utf-8")
    return found


def test_the_call_counter_sees_a_construction_by_name_and_by_attribute() -> None:
    assert _calls("box = DockerSandbox(spec)\nother = docker_sandbox.DockerSandbox(spec, client)\n",
                  "DockerSandbox") == 2
    assert _calls("box = create_sandbox(spec)  # DockerSandbox(spec)\n", "DockerSandbox") == 0


def test_no_module_but_the_factory_constructs_a_docker_sandbox() -> None:
    sources = _sources()
    assert _calls(sources[FACTORY], "DockerSandbox") == 0 and "DockerSandbox," in sources[FACTORY]  # by its table
    makers = sorted(m for m, text in sources.items() if m != FACTORY and _calls(text, "DockerSandbox"))
    assert makers == [], f"modules constructing DockerSandbox themselves instead of sandbox.factory: {makers}"


def test_only_the_assembly_and_the_pool_make_a_sandbox_spec() -> None:
    makers = {m for m, text in _sources().items() if _calls(text, "SandboxSpec")}
    assert makers == SPEC_MAKERS, f"SandboxSpec built outside harness.agent.assembly: {sorted(makers - SPEC_MAKERS)}"


def test_the_spec_names_a_known_provider_and_the_factory_makes_it() -> None:
    spec = SandboxSpec(image="x", session="s")
    assert spec.provider == "docker" and PROVIDERS == ("docker",)
    box = create_sandbox(spec)           # not started: nothing runs until start()
    assert isinstance(box, DockerSandbox) and box.spec is spec and box.container is None


def test_an_unknown_provider_is_refused_with_the_known_ones_and_an_example() -> None:
    with pytest.raises(ValueError) as caught:
        SandboxSpec(image="x", session="s", provider="podman")  # type: ignore[arg-type]
    assert str(caught.value) == ("sandbox provider 'podman' is not one of ['docker']; "
                                 'e.g. SandboxSpec(image=..., session=..., provider="docker")')
