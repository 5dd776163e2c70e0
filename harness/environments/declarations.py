"""A project's declared requirements, read from its source tree as text: nothing of it is ever run.

    read_declarations(root)   requirements files (with their -r includes inside the tree), setup.cfg,
                              pyproject.toml and setup.py (with `ast`: literal lists and module-level
                              names bound once to one); the recipe's `sed -i` edits applied as read
    build_requires(root)      pyproject.toml's [build-system] requires

What cannot be read statically (a computed list, a file outside the tree, a URL) is listed in
`Declarations.unreadable` with the reason, never guessed. Every file is opened beneath the root
without following a link (`checks.open_beneath`).
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import shlex
import stat
import tomllib
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from harness import checks
from harness.errors import TaskError, UnsafePathError

MAX_TEXT = 1 << 20         # a declaration file read, at most


@dataclass(frozen=True)
class Declared:
    """One requirement a project declares, and where: e.g. "setup.py install_requires" or "requirements.txt:3"."""
    requirement: str
    origin: str


@dataclass(frozen=True)
class Unreadable:
    """A declaration that was not read (dynamic, outside the tree, a URL...), and why."""
    origin: str
    reason: str


@dataclass(frozen=True)
class Declarations:
    """What `read_declarations` found in a tree: the requirements, each with its origin, and what it could not read."""
    requirements: tuple[Declared, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()

    def texts(self) -> list[str]:
        """The requirements, each once, in the order found."""
        return list(dict.fromkeys(d.requirement for d in self.requirements))


def read_declarations(root: Path, *, extras: Collection[str] = (), files: Sequence[str] = (),
                      any_requirements_file: bool = True, edits: Sequence[str] = ()) -> Declarations:
    """The requirements declared in the source tree at `root`, read as text and never executed:
    `requirements*.txt` and `requirements/*.txt` (only `files` when not `any_requirements_file`), plus
    `files` (paths relative to `root`), with their `-r` includes inside the tree, setup.cfg `[options]
    install_requires` and `setup_requires` (setuptools fetches those at install: offline they must be in
    the wheelhouse), pyproject.toml `[project] dependencies` and setup.py's `setup(install_requires=...,
    setup_requires=...)` when literal or module-level literal lists; the extras named in `extras` from each.
    Whatever is not read is in `unreadable`. `edits` are a recipe's pre-install commands: those of the
    form ``sed -i 's/OLD/NEW/' FILE`` are applied to FILE's text as it is read (as literal text, first
    match of each line), so that the declarations are the ones the install will see; others are ignored."""
    found = _Found(Path(root), sed_edits(edits))
    rels: list[str] = []
    if any_requirements_file:
        rels = sorted(p.name for p in found.root.glob("requirements*.txt"))
        rels += sorted(f"requirements/{p.name}" for p in found.root.glob("requirements/*.txt"))
    for rel in [*rels, *files]:
        found.requirements_file(rel, set())
    _setup_cfg(found, {canonicalize_name(e) for e in extras})
    _pyproject(found, {canonicalize_name(e) for e in extras})
    _setup_py(found, {canonicalize_name(e) for e in extras})
    return Declarations(tuple(found.declared), tuple(found.unreadable))


def sed_edits(commands: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """{file: [(old, new), ...]} of the commands that are ``sed -i 's/OLD/NEW/' FILE`` (literal text once
    backslash escapes are removed); anything else is left out."""
    out: dict[str, list[tuple[str, str]]] = {}
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if len(words) != 4 or words[:2] != ["sed", "-i"]:
            continue
        match = re.fullmatch(r"s/((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/", words[2])
        if match and match.group(1):
            old, new = (re.sub(r"\\(.)", r"\1", g) for g in match.groups())
            out.setdefault(words[3], []).append((old, new))
    return out


class _Found:
    def __init__(self, root: Path, edits: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.root = root
        self.edits = edits or {}
        self.declared: list[Declared] = []
        self.unreadable: list[Unreadable] = []

    def add(self, text: str, origin: str) -> None:
        try:
            self.declared.append(Declared(checks.requirement(text, origin, pinned=False), origin))
        except TaskError as exc:
            self.unreadable.append(Unreadable(origin, str(exc)))

    def text(self, rel: str) -> str | None:
        """The file `root/rel` as text, or None (recorded) if it is missing, outside or not a regular file."""
        try:
            text = _read_inside(self.root, rel)
            for old, new in self.edits.get(rel, []):
                text = "".join(line.replace(old, new, 1) for line in text.splitlines(keepends=True))
            return text
        except (UnsafePathError, OSError, UnicodeDecodeError) as exc:
            self.unreadable.append(Unreadable(rel, f"not read: {exc}"))
            return None

    def requirements_file(self, rel: str, seen: set[str]) -> None:
        if rel in seen:
            return
        seen.add(rel)
        text = self.text(rel)
        for number, line in _logical_lines(text or ""):
            origin = f"{rel}:{number}"
            include = re.match(r"(-r|--requirement)(\s+|=)(\S+)$", line)
            if include:
                self.requirements_file(_beside(rel, include.group(3)), seen)
                continue
            if line.startswith("-"):
                continue
            line = re.split(r"\s--?[A-Za-z]", line, maxsplit=1)[0].strip()   # per-line options: --hash=...
            if re.match(r"[\w.+-]+:|[./~]", line):
                self.unreadable.append(Unreadable(origin, f"{line!r} is a URL or path, not an index requirement"))
            else:
                self.add(line, origin)


def _beside(rel: str, target: str) -> str:
    """The tree-relative path of `target` named in the file `rel` (absolute targets stay absolute, refused later)."""
    return target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(rel), target))


def _read_inside(root: Path, rel: str) -> str:
    """`root/rel` read without following a link, only if it is a regular file inside `root`."""
    fd = checks.open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"{rel} is not a regular file")
        return handle.read(MAX_TEXT).decode("utf-8")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a requirements file: continuations joined, comments and blanks dropped."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        start = start or number
        if raw.endswith("\\"):
            pending += raw[:-1]
            continue
        line = re.sub(r"(^|\s)#.*", "", pending + raw).strip()
        if line:
            yield start, line
        pending, start = "", 0


def _setup_cfg(found: _Found, extras: set[str]) -> None:
    if not (found.root / "setup.cfg").exists():
        return
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(found.text("setup.cfg") or "")
    except configparser.Error as exc:
        found.unreadable.append(Unreadable("setup.cfg", f"not an ini file: {str(exc).splitlines()[0]}"))
        return
    for key in ("install_requires", "setup_requires"):   # setup_requires: fetched by setuptools at install
        if parser.has_option("options", key):
            _cfg_list(found, parser.get("options", key), f"setup.cfg [options] {key}")
    if parser.has_section("options.extras_require"):
        for key, value in parser.items("options.extras_require"):
            if canonicalize_name(key) in extras:
                _cfg_list(found, value, f"setup.cfg [options.extras_require] {key}")


def _cfg_list(found: _Found, value: str, origin: str) -> None:
    if value.strip().startswith("file:"):
        for rel in value.strip()[5:].split(","):
            found.requirements_file(rel.strip(), set())
    elif value.strip().startswith("attr:"):
        found.unreadable.append(Unreadable(origin, f"{value.strip()!r} names code: not statically readable"))
    else:
        for line in value.splitlines():
            if line.strip() and not line.strip().startswith("#"):
                found.add(line.strip(), origin)


def _pyproject(found: _Found, extras: set[str]) -> None:
    if not (found.root / "pyproject.toml").exists():
        return
    try:
        data = tomllib.loads(found.text("pyproject.toml") or "")
    except tomllib.TOMLDecodeError as exc:
        found.unreadable.append(Unreadable("pyproject.toml", f"not TOML: {exc}"))
        return
    project, tool = _table(data, "project"), _table(data, "tool")
    origin = "pyproject.toml [project]"
    _toml_list(found, project.get("dependencies", []), f"{origin} dependencies")
    for key, value in _table(project, "optional-dependencies").items():
        if canonicalize_name(str(key)) in extras:
            _toml_list(found, value, f"{origin} optional-dependencies {key}")
    dynamic = _table(_table(_table(tool, "setuptools"), "dynamic"), "dependencies")
    if "dependencies" in (project.get("dynamic") or []) and dynamic:
        files = dynamic.get("file", [])
        for rel in [files] if isinstance(files, str) else files if isinstance(files, list) else []:
            found.requirements_file(str(rel), set())
    if "dependencies" in _table(tool, "poetry"):
        found.unreadable.append(Unreadable("pyproject.toml [tool.poetry.dependencies]",
                                           "Poetry's own dependency table is not read"))


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    """`data[key]` if it is a table, else an empty one (a hostile file may put anything there)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _toml_list(found: _Found, value: object, origin: str) -> None:
    if not isinstance(value, list):
        found.unreadable.append(Unreadable(origin, f"expected a list of requirements, got {type(value).__name__}"))
        return
    for item in value:
        found.add(item if isinstance(item, str) else repr(item), origin)


def _setup_py(found: _Found, extras: set[str]) -> None:
    if not (found.root / "setup.py").exists():
        return
    try:
        tree = ast.parse(found.text("setup.py") or "", "setup.py")
    except (SyntaxError, ValueError, RecursionError) as exc:
        found.unreadable.append(Unreadable("setup.py", f"not Python this host can parse: {exc}"))
        return
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "setup"]
    if len(calls) != 1:
        found.unreadable.append(Unreadable("setup.py", f"{len(calls)} setup() calls found, expected one"))
        return
    names = _module_lists(tree)
    keywords = {k.arg: k.value for k in calls[0].keywords}
    if None in keywords:
        found.unreadable.append(Unreadable("setup.py", f"setup(**...) at line {calls[0].lineno}: not statically "
                                                       "readable; its install_requires may be missed"))
    for listed in ("install_requires", "setup_requires"):
        if listed in keywords:
            _py_list(found, keywords[listed], names, f"setup.py {listed}")
    extra_node = keywords.get("extras_require")
    if extras and isinstance(extra_node, ast.Name):
        extra_node = names.get(extra_node.id, extra_node)
    if extras and isinstance(extra_node, ast.Dict):
        for key, value in zip(extra_node.keys, extra_node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and canonicalize_name(key.value) in extras:
                _py_list(found, value, names, f"setup.py extras_require {key.value}")
    elif extras and extra_node is not None:
        found.unreadable.append(Unreadable("setup.py extras_require", _dynamic(extra_node)))


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _module_lists(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, by a plain assignment, and never changed after: bound nowhere else,
    no method called on them, no item or attribute assigned, and passed to no call but setup()."""
    nodes = list(ast.walk(tree))
    stores = Counter(n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    methods = {c.func for c in nodes if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
    changed = {n.value.id for n in nodes if isinstance(n, (ast.Subscript, ast.Attribute))
               and isinstance(n.value, ast.Name) and (isinstance(n.ctx, ast.Store) or n in methods)}
    for call in (n for n in nodes if isinstance(n, ast.Call) and _called(n) != "setup"):
        changed |= {a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)}
    top = {n.targets[0].id: n.value for n in tree.body
           if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    return {name: value for name, value in top.items() if stores[name] == 1 and name not in changed}


def _py_list(found: _Found, node: ast.expr, names: dict[str, ast.expr], origin: str) -> None:
    items = _literal_strings(node, names)
    if items is None:
        found.unreadable.append(Unreadable(origin, _dynamic(node)))
        return
    for item in items:
        found.add(item, origin)


def _literal_strings(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> list[str] | None:
    """The strings of a literal list/tuple, a name bound once to one, or a `+` of those; else None."""
    if depth > 10:
        return None
    if isinstance(node, ast.Name) and node.id in names:
        return _literal_strings(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_strings(node.left, names, depth + 1), _literal_strings(node.right, names, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
    return None


def _dynamic(node: ast.expr) -> str:
    return (f"{ast.unparse(node)[:120]!r} at line {node.lineno} is computed: not statically readable "
            "(setup.py is never run); declare the requirements in the task's pins instead")


def build_requires(root: Path) -> list[str]:
    """pyproject.toml's [build-system] requires, read as text: the install runs offline, so the build's own
    requirements must be in the environment's wheelhouse (and in the venv for `--no-build-isolation`)."""
    path = root / "pyproject.toml"
    if not path.is_file() or path.is_symlink():
        return []
    try:
        data = tomllib.loads(path.read_text(errors="replace"))
    except tomllib.TOMLDecodeError:
        return []
    system = data.get("build-system")
    requires = system.get("requires", []) if isinstance(system, dict) else []
    return [r for r in requires if isinstance(r, str)] if isinstance(requires, list) else []


def project_name(root: Path) -> str | None:
    """The project's own distribution name (normalised), read as text: pyproject.toml `[project] name`,
    setup.cfg `[metadata] name`, or a literal `setup(name=...)`; None when none of them says it."""
    found = _Found(Path(root))
    if (found.root / "pyproject.toml").is_file():
        try:
            name = _table(tomllib.loads(found.text("pyproject.toml") or ""), "project").get("name")
            if isinstance(name, str) and name.strip():
                return canonicalize_name(name)
        except tomllib.TOMLDecodeError:
            pass
    if (found.root / "setup.cfg").is_file():
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(found.text("setup.cfg") or "")
            if parser.has_option("metadata", "name") and parser.get("metadata", "name").strip():
                return canonicalize_name(parser.get("metadata", "name").strip())
        except configparser.Error:
            pass
    if (found.root / "setup.py").is_file():
        try:
            tree = ast.parse(found.text("setup.py") or "", "setup.py")
        except (SyntaxError, ValueError, RecursionError):
            return None
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "setup"):
            for keyword in call.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant) \
                        and isinstance(keyword.value.value, str):
                    return canonicalize_name(keyword.value.value)
    return None
