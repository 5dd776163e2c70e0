"""The project's own version, read from its tree as text, and the release a resolution takes it as.

    tree_version(root)    a TreeVersion (name, the version as declared, its release, where it was read),
                          or None when the tree does not say it statically

The project itself is never locked (the instance installs it from its tree), but a dependency may
require it: sphinxcontrib-applehelp 1.0.7 requires Sphinx>=5, a pytest plugin pytest>=7, an astropy
affiliated package astropy. pip installs the project and then picks those of its dependencies that fit
the installed version; the resolution does the same by taking the project at its tree's release
(`resolver.resolve(project=...)`).

Where the version is read, first found: pyproject.toml `[project] version`; setup.cfg `[metadata]
version` (a literal, `attr: module.NAME` or `file: PATH`); setup.py `setup(version=...)` (a literal, a
module-level name bound to one, or `module.NAME` of an imported module); pyproject's dynamic version
(`[tool.setuptools.dynamic] version = {attr = ...}`, `[tool.hatch.version] path`, flit's module). A
module's `NAME = "1.2"` is read with `ast`, never imported. A version computed at build time
(setuptools_scm, a function call) is not read: None.

A development version maps to the release it precedes: its release segment (`4.0.3.dev20210613` and
`4.0.3rc1` -> 4.0.3); Sphinx's `4.0.3+` (in development toward 4.0.3, installed as 4.0.3.devDATE) too.
A post or local version maps to the release it follows (`1.0.post1`, `1.0+abc` -> 1.0). Dependencies
state their ranges in releases (`Sphinx>=5`, `pytest>=6.2.5`): a tree on its way to 4.0.3 satisfies the
ranges 4.0.3 satisfies, and a release needs none of the pre-release rules pip and uv apply differently
to a version they did not pick from the index.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from harness import checks
from harness.environments.declarations import project_name
from harness.errors import UnsafePathError

MAX_TEXT = 1 << 20           # a file read for the version, at most
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")      # a distribution name (PEP 508)
_ATTR = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")                  # module.NAME


@dataclass(frozen=True)
class TreeVersion:
    name: str          # the project's distribution name, normalised
    declared: str      # the version as the tree writes it, e.g. "4.0.3+"
    release: str       # the release the resolution takes it as, e.g. "4.0.3"
    origin: str        # where it was read, e.g. "setup.py version=sphinx.__version__ (sphinx/__init__.py)"

    def pin(self) -> str:
        return f"{self.name}=={self.release}"


def tree_version(root: Path) -> TreeVersion | None:
    """The project's name and version as its tree declares them (see the module docstring); None when
    either is not stated statically or is not a version."""
    name = project_name(root)
    if name is None or not _NAME.fullmatch(name):
        return None
    found = _Tree(Path(root)).version()
    if found is None:
        return None
    declared, origin = found
    release = release_of(declared)
    return None if release is None else TreeVersion(name, declared, release, origin)


def release_of(declared: str) -> str | None:
    """The release a declared version maps to: its release segment (see the module docstring); None
    when it is not a version, or is 0 (a placeholder the build replaces)."""
    match = re.fullmatch(r"\s*v?(\d+(?:\.\d+)*)\+\s*", declared)      # Sphinx's "4.0.3+"
    try:
        release = Version(match.group(1) if match else declared)
    except InvalidVersion:
        return None
    return None if release == Version("0") else release.base_version     # 0.0.0: a placeholder


class _Tree:
    """The tree's files that say the version, read beneath `root` without following a link."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, rel: str) -> str | None:
        try:
            return checks.read_beneath(self.root, rel, MAX_TEXT).decode("utf-8")
        except (UnsafePathError, OSError, UnicodeDecodeError):
            return None

    def version(self) -> tuple[str, str] | None:
        pyproject = self.pyproject()
        project = _table(pyproject, "project")
        if isinstance(project.get("version"), str):
            return project["version"], "pyproject.toml [project] version"
        return self.setup_cfg() or self.setup_py() or self.dynamic(pyproject, project)

    def pyproject(self) -> dict[str, Any]:
        try:
            return tomllib.loads(self.text("pyproject.toml") or "")
        except tomllib.TOMLDecodeError:
            return {}

    def setup_cfg(self) -> tuple[str, str] | None:
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(self.text("setup.cfg") or "")
            value = parser.get("metadata", "version").strip() if parser.has_option("metadata", "version") else ""
        except configparser.Error:
            return None
        origin = "setup.cfg [metadata] version"
        if value.startswith("attr:"):
            return self.attribute(value[5:].strip(), origin)
        if value.startswith("file:"):
            rel = value[5:].strip().split(",")[0].strip()
            text = self.text(rel) if rel else None
            return (text.strip(), f"{origin} ({rel})") if text and text.strip() else None
        return (value, origin) if value else None

    def setup_py(self) -> tuple[str, str] | None:
        try:
            tree = ast.parse(self.text("setup.py") or "", "setup.py")
        except (SyntaxError, ValueError, RecursionError):
            return None
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "setup"):
            value = next((k.value for k in call.keywords if k.arg == "version"), None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value, "setup.py version"
            if isinstance(value, ast.Name):
                bound = _assigned(tree, value.id)
                return (bound, f"setup.py version={value.id}") if bound is not None else None
            if isinstance(value, ast.Attribute):
                return self.attribute(ast.unparse(value), f"setup.py version={ast.unparse(value)}")
        return None

    def dynamic(self, pyproject: dict[str, Any], project: dict[str, Any]) -> tuple[str, str] | None:
        tool = _table(pyproject, "tool")
        attr = _table(_table(_table(tool, "setuptools"), "dynamic"), "version").get("attr")
        if isinstance(attr, str):
            return self.attribute(attr, "pyproject.toml [tool.setuptools.dynamic] version")
        path = _table(_table(tool, "hatch"), "version").get("path")
        if isinstance(path, str):
            return self.module_file(path, "__version__", "pyproject.toml [tool.hatch.version] path")
        flit = _table(tool, "flit")
        module = (_table(flit, "module").get("name") or project.get("name")) if flit or _flit(pyproject) else None
        if isinstance(module, str):
            return self.attribute(f"{module.replace('-', '_')}.__version__", "pyproject.toml (flit)")
        return None

    def attribute(self, dotted: str, origin: str) -> tuple[str, str] | None:
        """`module.NAME` bound to a string literal at the top of the module's file (beside the root or
        under src/)."""
        if not _ATTR.fullmatch(dotted):
            return None
        module, _, name = dotted.rpartition(".")
        path = module.replace(".", "/")
        for rel in (f"{path}/__init__.py", f"{path}.py", f"src/{path}/__init__.py", f"src/{path}.py"):
            found = self.module_file(rel, name, origin)
            if found is not None:
                return found
        return None

    def module_file(self, rel: str, name: str, origin: str) -> tuple[str, str] | None:
        try:
            tree = ast.parse(self.text(rel) or "", rel)
        except (SyntaxError, ValueError, RecursionError):
            return None
        bound = _assigned(tree, name)
        return (bound, f"{origin} ({rel})") if bound is not None else None


def _assigned(tree: ast.Module, name: str) -> str | None:
    """The string literal `name` is first bound to at the top level of `tree` (later rebindings inside
    an `if`, as Sphinx strips its '+', are the module's business at run time)."""
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.value.value
    return None


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _flit(pyproject: dict[str, Any]) -> bool:
    backend = _table(pyproject, "build-system").get("build-backend")
    return isinstance(backend, str) and backend.startswith("flit")
