"""Each package names what others may use, and nobody reaches into another module's private names.

A package's `__init__` lists its public surface in `__all__` (every name there exists, once). A name
or module with a leading underscore is private to the package that holds it: `sandbox._protocol` is
shared by `sandbox.host_channel`, `sandbox.runtime` and `sandbox.server`, and no module outside `sandbox`
may import it; `runner._instance` style imports across modules are refused everywhere.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.test_imports import ROOT, module_names

PUBLIC_PACKAGES = [
    "sandbox", "sandbox.deployment", "sandbox.runtime",
    "harness.core", "harness.environments", "harness.tools", "harness.tools.outbound", "harness.models",
    "harness.approval", "harness.evaluation", "harness.evaluation.backends", "harness.external", "harness.gateway",
    "harness.web", "harness.integrations",
]


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_each_package_names_its_public_surface(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported, f"{package}/__init__.py has no __all__ naming what other packages may use"
    assert len(exported) == len(set(exported)), f"{package}.__all__ lists a name twice"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ names what it does not define: {missing}"
    assert not [name for name in exported if name.startswith("_")], f"{package}.__all__ exports a private name"
    assert module.__doc__ and len(module.__doc__.strip()) > 40, f"{package} does not say what it is for"


def _private_imports(path: Path, module: str) -> list[str]:
    """`module`'s imports of a private name or module that lives outside the package holding it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] not in ("harness", "sandbox"):
                continue                    # a library's private names are its own business (ray's, say)
            for depth, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:depth])          # the package that holds the private name
                    if not (package == owner or package.startswith(owner + ".")):
                        found.append(f"{module} imports {target}")
                    break
    return found


def test_no_module_imports_a_private_name_of_another_package() -> None:
    found = []
    for package in ("harness", "sandbox"):
        for module in module_names(package):
            rel = Path(*module.split("."))
            path = ROOT / rel / "__init__.py" if (ROOT / rel).is_dir() else ROOT / rel.with_suffix(".py")
            found += _private_imports(path, module)
    assert found == [], "private names imported from outside their package:\n" + "\n".join(found)


def test_the_private_name_check_catches_a_reach_into_another_module(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("from harness.evaluation.runner import _instance\nfrom sandbox import _protocol\n")
    assert _private_imports(source, "harness.evaluation.backends.ray") == [
        "harness.evaluation.backends.ray imports harness.evaluation.runner._instance",
        "harness.evaluation.backends.ray imports sandbox._protocol"]
    assert _private_imports(source, "sandbox.server.serve") == [            # _protocol is sandbox's own
        "sandbox.server.serve imports harness.evaluation.runner._instance"]


def unit_of(module: str) -> str:
    """The package whose surface governs `module`: `sandbox`, or `harness.X` for a folder X of harness/;
    a module at harness/'s root (config, errors, messages, ...) is a unit of its own."""
    parts = module.split(".")
    if parts[0] == "sandbox":
        return "sandbox"
    if len(parts) > 1 and (ROOT / "harness" / parts[1]).is_dir():
        return f"harness.{parts[1]}"
    return ".".join(parts[:2])


def declared_surface(package: str) -> set[str] | None:
    """The names `package/__init__.py` lists in a literal `__all__` (None when it is not a package)."""
    init = ROOT / Path(*package.split(".")) / "__init__.py"
    if not init.is_file():
        return None
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return set(ast.literal_eval(node.value))
    return set()


def unlisted_imports(path: Path, module: str) -> list[str]:
    """`module`'s imports, from another package, of a name (or submodule) that package's `__all__` does
    not list. The import may name the module that defines it (`from sandbox.text import escape_unsafe`):
    what is checked is the name."""
    mine = unit_of(module)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            pairs = [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            pairs = [(alias.name.rpartition(".")[0], alias.name.rpartition(".")[2]) for alias in node.names]
        else:
            continue
        for source, name in pairs:
            if source.split(".")[0] not in ("harness", "sandbox"):
                continue
            owner = unit_of(f"{source}.{name}" if source.count(".") == 0 else source)
            surface = declared_surface(owner)
            if owner == mine or surface is None or source == "":
                continue
            if name not in surface:
                found.append(f"{module} imports {source}.{name}, which {owner}.__all__ does not list")
    return found


def test_no_module_imports_an_unlisted_name_of_another_package() -> None:
    found = []
    for package in ("harness", "sandbox"):
        for module in module_names(package):
            rel = Path(*module.split("."))
            path = ROOT / rel / "__init__.py" if (ROOT / rel).is_dir() else ROOT / rel.with_suffix(".py")
            found += unlisted_imports(path, module)
    assert found == [], (f"{len(found)} imports take a name another package does not list in its __all__ "
                         "(list it there, or keep it inside its package):\n" + "\n".join(sorted(found)))


def test_the_surface_check_catches_an_unlisted_name(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("from sandbox.api import SandboxSpec\nfrom sandbox.api import NOT_LISTED_ANYWHERE\n"
                      "from harness.core.task import Task\nfrom harness.core.task import not_listed_here\n")
    assert unlisted_imports(source, "harness.tools.probe") == [
        "harness.tools.probe imports sandbox.api.NOT_LISTED_ANYWHERE, which sandbox.__all__ does not list",
        "harness.tools.probe imports harness.core.task.not_listed_here, which harness.core.__all__ does not list"]
    assert unlisted_imports(source, "sandbox.probe") == [                  # sandbox's own names are free
        "sandbox.probe imports harness.core.task.not_listed_here, which harness.core.__all__ does not list"]
