"""Every container the harness starts is made in `sandbox/deployment/`, with `container_options()`.

Someone tightening the hardening reads one function; a module that created its own container (as the
instance build once did, with a capability, a writable root and no memory limit) would escape it. The
check reads the AST of every module of harness/ and sandbox/ for a call that creates a container.
"""

from __future__ import annotations

import ast
from pathlib import Path

from sandbox.api import SandboxSpec
from sandbox.deployment.docker import LAYER_BUILD_CAPABILITY, container_options
from tests.test_imports import ROOT, module_names

CREATING = {"create", "run", "create_container", "start_tied"}   # containers.create/run, api.create_container
ALLOWED = "sandbox.deployment"


def creations(source: str, where: str) -> list[str]:
    """The calls in `source` that create a container: `<x>.containers.create/run(...)`,
    `<x>.create_container(...)` and `start_tied(...)`, as "where:line call"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("create", "run"):
            owner = func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "containers":
                found.append(f"{where}:{node.lineno} containers.{func.attr}")
        elif isinstance(func, ast.Attribute) and func.attr == "create_container":
            found.append(f"{where}:{node.lineno} create_container")
        elif isinstance(func, ast.Name) and func.id == "start_tied" or \
                isinstance(func, ast.Attribute) and func.attr == "start_tied":
            found.append(f"{where}:{node.lineno} start_tied")
    return found


def test_no_module_outside_sandbox_deployment_creates_a_container() -> None:
    found = []
    for package in ("harness", "sandbox"):
        for module in module_names(package):
            if module == ALLOWED or module.startswith(ALLOWED + "."):
                continue
            rel = Path(*module.split("."))
            path = ROOT / rel / "__init__.py" if (ROOT / rel).is_dir() else ROOT / rel.with_suffix(".py")
            found += creations(path.read_text(encoding="utf-8"), module)
    assert found == [], ("containers created outside sandbox/deployment (make them with DockerDeployment, "
                         "hardened by container_options()):\n" + "\n".join(found))


def test_the_check_sees_each_way_of_creating_a_container_and_the_deployment_uses_them() -> None:
    probe = ("client.containers.create('i')\nself.client.containers.run('i', detach=True)\n"
             "client.api.create_container('i')\nstart_tied(client, 'i')\nlifeline.start_tied(client, 'i')\n"
             "client.containers.list()\ncontainer.exec_run(['true'])\n")
    assert creations(probe, "probe") == ["probe:1 containers.create", "probe:2 containers.run",
                                         "probe:3 create_container", "probe:4 start_tied", "probe:5 start_tied"]
    deployment = (ROOT / "sandbox" / "deployment" / "docker.py").read_text(encoding="utf-8")
    assert creations(deployment, "docker")      # positive control: the one place that makes them is seen


def test_a_layer_build_changes_only_its_three_named_settings() -> None:
    spec = SandboxSpec(image="img", session="s")
    sandbox, build = container_options(spec), container_options(spec, layer_build=True)
    assert sandbox["read_only"] is True and "cap_add" not in sandbox and sandbox["cap_drop"] == ["ALL"]
    assert build["read_only"] is False and build["cap_add"] == [LAYER_BUILD_CAPABILITY] == ["DAC_READ_SEARCH"]
    assert "environment" in sandbox and "environment" not in build
    same = {k for k in sandbox if k not in ("name", "read_only", "environment")}
    assert {k: build[k] for k in same} == {k: sandbox[k] for k in same}   # memory, pids, no-new-privileges...
    assert set(build) == set(sandbox) - {"environment"} | {"cap_add"}
