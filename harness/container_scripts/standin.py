"""The requested interpreter's behaviour, where grading can see it, on the interpreter that stands in for it.

A SWE-bench row that asks for Python 3.6 runs on 3.9 here (`harness.evaluation.specs.interpreters`), and
the published test lists were made on the version asked for: a test the newer interpreter names or
judges differently is "missing" or failed although it passed. Each known difference is one `Shim`:
the CPython change that caused it, the first minor version whose latest release behaves the new way
(`since`: a change backported to a bug-fix release counts for its minor version, since the official
harness installs a minor version's latest release), the module it lives in, and a function that puts
the old behaviour back in that module. A shim is applied when
the requested version is older than `since` and the running one is not.

Installed into an instance image as the venv's module `harness_standin`, with a .pth file of the
venv's site-packages that calls `install("3.6")` at every interpreter start (`harness.environments.
standin` writes both, only for a stand-in). Nothing is imported ahead: a shim's module is patched
right after its first import, through a finder that only watches the shims' module names, so a
process that never imports unittest pays nothing and sees the same `sys.modules`. Runs on the
stand-in's Python (3.9 and up: no newer syntax); on the host, importing it does nothing.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False     # not `typing.TYPE_CHECKING`: typing is not imported at every interpreter start
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType
    from typing import Any

    Version = tuple[int, int]


class Shim:
    """One interpreter difference: `restore(module)` gives `module` the behaviour it had before `since`."""

    __slots__ = ("name", "since", "module", "change", "restore")

    def __init__(self, name: str, since: Version, module: str, change: str,
                 restore: Callable[[ModuleType], None]) -> None:
        self.name = name          # as reports name it
        self.since = since        # the first minor version whose latest release behaves the new way
        self.module = module      # where the behaviour lives
        self.change = change      # the CPython change that made it (bpo / gh number)
        self.restore = restore


def _short_description_first_line(case: ModuleType) -> None:
    """unittest's `TestCase.shortDescription` of Python 3.6: the docstring's first line as it stands, so
    a docstring that starts on the line after its quotes gives no description. Later releases strip
    the docstring first (bpo-39450: 3.9.0, backported to 3.8 and 3.7; 3.6 took security fixes only by
    then), and a verbose runner (django's runtests.py) prints the test's name alone, then the
    docstring's first line and the status, where 3.6 printed ``name ... ok``."""
    test_case: Any = case.TestCase

    def shortDescription(self: Any) -> str | None:  # noqa: N802 - unittest's own name
        doc = self._testMethodDoc
        return doc and doc.split("\n")[0].strip() or None

    shortDescription.__doc__ = test_case.shortDescription.__doc__
    shortDescription.__qualname__ = "TestCase.shortDescription"
    test_case.shortDescription = shortDescription


SHIMS: tuple[Shim, ...] = (
    # since 3.7, not 3.9: checked in the stdlib of 3.6.9 (old), 3.7.10 and 3.8.10 (new)
    Shim("unittest_short_description", (3, 7), "unittest.case", "bpo-39450 (gh-83631)",
         _short_description_first_line),
)


def version(text: str) -> Version:
    """(3, 6) for "3.6" (a micro part is ignored: "3.6.15").

    Raises:
        ValueError: `text` is not major.minor.
    """
    parts = text.strip().split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise ValueError(f"harness_standin: Python version {text!r} is not major.minor (e.g. '3.6')")
    return int(parts[0]), int(parts[1])


def applicable(requested: Version, running: Version) -> list[Shim]:
    """The shims that make `running` behave as `requested`: those whose change came after `requested`."""
    return [shim for shim in SHIMS if requested < shim.since <= running]


class _Restoring:
    """A loader that runs the real loader, then the shims of the module it loaded."""

    def __init__(self, loader: Any, shims: Sequence[Shim]) -> None:
        self.loader = loader
        self.shims = shims

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader        # the module's own loader, as if no shim had looked
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        for shim in self.shims:
            shim.restore(module)


class _AfterImport:
    """A finder that answers only for the shims' modules, the first time each is imported: it asks the
    finders after it for the module's spec and wraps its loader in `_Restoring`."""

    def __init__(self, pending: dict[str, list[Shim]]) -> None:
        self.pending = pending

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        shims = self.pending.pop(name, None)
        if shims is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not self and find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Restoring(spec.loader, shims)
                return spec
        return None


def install(requested: str, running: Version | None = None) -> list[str]:
    """Apply every shim that makes this interpreter (or `running`) behave as `requested`; returns their
    names. A module already imported is patched now, the others right after their first import.

    Raises:
        ValueError: `requested` is not major.minor.
    """
    shims = applicable(version(requested), running or (sys.version_info[0], sys.version_info[1]))
    pending: dict[str, list[Shim]] = {}
    for shim in shims:
        module = sys.modules.get(shim.module)
        if module is not None:
            shim.restore(module)
        else:
            pending.setdefault(shim.module, []).append(shim)
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))
    return [shim.name for shim in shims]
