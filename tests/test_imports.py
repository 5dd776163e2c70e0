"""Every module imports on its own and in any order, and no import among harness/ modules climbs back.

Each import runs in a fresh interpreter, so a module that only works because another one was imported
first (the symptom of an import cycle dodged by importing inside a function) fails here. The cycle
check reads the top-level imports of every harness/ module from its AST (the `if TYPE_CHECKING:`
ones included: a type-only import that climbs is still a layer pointing the wrong way) and fails on
any strongly connected set of modules.
"""

from __future__ import annotations

import ast
import importlib.util
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "sandbox")


OPTIONAL_MODULES = {
    # adapter modules that import their framework at the top: importable only with the extra installed
    "harness.integrations.mini": "minisweagent",              # pip install 'harness[mini]'
    "harness.integrations.inspect_provider": "inspect_ai",    # pip install 'harness[inspect]'
}


def importable(name: str) -> bool:
    """False only for a module of OPTIONAL_MODULES whose framework is not installed here."""
    needed = OPTIONAL_MODULES.get(name)
    return needed is None or importlib.util.find_spec(needed) is not None


def module_names(package: str) -> list[str]:
    """Every module of `package` (a folder of the source tree), dotted, packages included; files in a
    folder without __init__.py (task data, scripts shipped into the image) are not modules of it."""
    names = []
    for path in sorted((ROOT / package).rglob("*.py")):
        folders = path.relative_to(ROOT).parents
        if not all((ROOT / folder / "__init__.py").is_file() for folder in list(folders)[:-1]):
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def import_in_fresh_interpreter(modules: list[str]) -> subprocess.CompletedProcess[str]:
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    return subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    failed = {}
    for name in [m for p in PACKAGES for m in module_names(p) if importable(m)]:
        proc = import_in_fresh_interpreter([name])
        if proc.returncode != 0:
            failed[name] = proc.stderr.strip().splitlines()[-1:]
    assert failed == {}, f"modules that do not import on their own: {failed}"


def test_every_module_imports_in_a_random_order() -> None:
    modules = [m for p in PACKAGES for m in module_names(p) if importable(m)]
    for seed in range(3):
        order = modules[:]
        random.Random(seed).shuffle(order)
        proc = import_in_fresh_interpreter(order)
        assert proc.returncode == 0, f"importing in the order of seed {seed} failed:\n{proc.stderr[-3000:]}"


def top_level_imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The harness/ modules `module` (in file `path`) imports at its top level, `if` blocks included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    statements = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.If, ast.Try)):
            statements += node.body + node.orelse + getattr(node, "finalbody", [])
            statements += [s for h in getattr(node, "handlers", []) for s in h.body]
        elif isinstance(node, ast.Import):
            found |= {_owner(alias.name, known) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            for alias in node.names:
                found.add(_owner(f"{base}.{alias.name}", known) if f"{base}.{alias.name}" in known
                          else _owner(base, known))
    found.discard("")
    found.discard(module)
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, known: set[str]) -> str:
    """The longest known module `name` is, or is inside ("" when it is not a harness module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def import_graph(package: str) -> dict[str, set[str]]:
    modules = module_names(package)
    known = set(modules)
    graph = {}
    for name in modules:
        path = ROOT / Path(*name.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        graph[name] = top_level_imports(path, name, known)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_and_passes_a_layered_graph() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_a_known_import_edge() -> None:
    graph = import_graph("harness")
    assert "harness.core.task" in graph["harness.session"]
    assert "harness.session" in graph["harness.evaluation.stages"]


def test_no_import_cycle_among_harness_modules() -> None:
    found = cycles(import_graph("harness"))
    assert found == [], "import cycles among harness/ modules (each set imports itself back): " + "; ".join(
        " <-> ".join(group) for group in found)


LAYERS_NEVER_IMPORT = {
    # a module under the key imports nothing under these prefixes (each layer points down only)
    "harness.core": ("harness.tools", "harness.models", "harness.approval", "harness.environments",
                     "harness.evaluation", "harness.cli", "harness.session", "harness.loop", "harness.workspace"),
    "harness.history": ("harness.tools", "harness.models", "harness.approval", "harness.environments",
                        "harness.evaluation", "harness.cli", "harness.session", "harness.loop", "harness.workspace"),
    "harness.environments": ("harness.tools", "harness.models", "harness.approval", "harness.evaluation",
                             "harness.cli", "harness.session", "harness.loop", "harness.workspace"),
    "harness.models": ("harness.tools", "harness.approval", "harness.evaluation", "harness.cli",
                       "harness.session", "harness.loop", "harness.workspace"),
    "harness.tools": ("harness.approval", "harness.models", "harness.evaluation", "harness.cli",
                      "harness.session", "harness.loop", "harness.workspace"),
    "harness.approval": ("harness.evaluation", "harness.cli", "harness.session", "harness.loop"),
    "harness.loop": ("harness.evaluation", "harness.cli", "harness.session"),
    "harness.session": ("harness.evaluation", "harness.cli"),
    "harness.evaluation": ("harness.cli",),
    "harness.web": ("harness.cli", "harness.session", "harness.loop", "harness.models", "harness.evaluation",
                    "harness.mcp"),
}


def test_each_layer_imports_only_the_layers_below_it() -> None:
    graph = import_graph("harness")
    climbing = sorted(f"{module} -> {target}" for module, targets in graph.items()
                      for layer, forbidden in LAYERS_NEVER_IMPORT.items()
                      if module == layer or module.startswith(layer + ".")
                      for target in targets if target.startswith(forbidden))
    assert climbing == [], "imports that climb a layer: " + "; ".join(climbing)


def test_sandbox_never_imports_harness() -> None:
    found = []
    for name in module_names("sandbox"):
        path = ROOT / Path(*name.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{name} -> {n}" for n in names if n == "harness" or n.startswith("harness.")]
    assert found == [], "sandbox/ imports harness: " + "; ".join(found)
