"""A package's public names, loaded on first use (PEP 562 module `__getattr__`).

A package's `__init__` lists in `__all__` what other packages may use; the names whose modules are
heavy (Docker's client, the MCP SDK, the whole agent loop) are given here instead of imported, so
that importing a package, or one light module of it, costs nothing: `sandbox/__init__.py` stays
standard-library only, and a worker that needs `harness.tools.retrieval.analysis` alone does not pay
for the catalog. Type checkers see the same names through the `__init__`'s `if TYPE_CHECKING:`
imports; `tests/test_public_api.py` checks that every listed name resolves.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The `__getattr__` of `package` that imports each name of `modules` (module -> its names) on
    first use and keeps it in the package. A name that is the module's own last component is the
    module itself (`from harness.core import hostgit`)."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module.rpartition(".")[2] == name else getattr(loaded, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
