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
    """One interpreter difference: `restore(module)` gives `module` the behaviour it had before `since`,
    after the module has run; or, with `around`, `around(module, run)` runs the module's code itself
    (`run()`), for a difference the module meets while it is imported."""

    __slots__ = ("name", "since", "module", "change", "restore", "around")

    def __init__(self, name: str, since: Version, module: str, change: str,
                 restore: Callable[[ModuleType], None] | None = None,
                 around: Callable[[ModuleType, Callable[[], None]], None] | None = None) -> None:
        self.name = name          # as reports name it
        self.since = since        # the first minor version whose latest release behaves the new way
        self.module = module      # where the behaviour lives
        self.change = change      # the CPython change that made it (bpo / gh number)
        self.restore = restore
        self.around = around


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


class _CodeTypeMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _CODE)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _CODE)


_CODE = type(_CodeTypeMeta.__instancecheck__.__code__)


class CodeType37(metaclass=_CodeTypeMeta):
    """`types.CodeType` as Python 3.7 takes it: 15 arguments, no `posonlyargcount` (PEP 570 put it second in
    3.8). Called with 15, it makes the code object with `posonlyargcount` 0, as 3.7 did; with any other
    number, as the running interpreter's. An instance check answers for real code objects. Named here at
    module level so that a pickle that names it (cloudpickle reduces a code object to a call of its
    module's `types.CodeType`) loads in every process of the venv, where this module is imported."""

    def __new__(cls, *args: Any) -> Any:
        if len(args) == 15:
            args = (args[0], 0, *args[1:])
        return _CODE(*args)


# 3.8+ reading 3.7's arguments (the code string where an int goes): 3.8 and 3.9 say the first, 3.10 on the second
CODE_TYPE_ERRORS = ("an integer is required (got type bytes)", "'bytes' object cannot be interpreted as an integer")


def _code_type_of_3_7(module: ModuleType, run: Callable[[], None]) -> None:
    """Old cloudpickle (before 1.1: scikit-learn 0.21's and joblib 0.13's vendored 0.6) builds code objects
    with `types.CodeType`'s 3.7 arguments, at import (its cell-setting template) and when it loads a
    pickled function: on 3.8 and later its import fails with "TypeError: an integer is required (got type
    bytes)". Only a module whose import fails so is run again, with `types` as it imports it being the
    standard module but for `CodeType37`; its picklers' dispatch tables then also take the real code type.
    A cloudpickle that imports (1.1 on) is left exactly as it ran."""
    try:
        run()
        return
    except TypeError as exc:
        if not any(said in str(exc) for said in CODE_TYPE_ERRORS):
            raise
    import types  # noqa: PLC0415 - only when the module met the difference

    proxy = type(types)("types", types.__doc__)
    proxy.__dict__.update({k: v for k, v in vars(types).items() if k not in ("__name__", "__doc__")})
    proxy.CodeType = CodeType37      # type: ignore[attr-defined]
    sys.modules["types"] = proxy
    try:
        run()
    finally:
        sys.modules["types"] = types
    for value in list(vars(module).values()):
        table = getattr(value, "dispatch", None) if isinstance(value, type) else None
        if isinstance(table, dict) and CodeType37 in table:
            table[_CODE] = table[CodeType37]


def _queue_state_without_notempty(queues: ModuleType) -> None:
    """`multiprocessing.queues.Queue._after_fork` of Python 3.8: a new condition for `_notempty`. Since
    bpo-40221 (3.9.0) it re-initialises the one the queue has, and a queue rebuilt from a pickled state
    without it (old loky, vendored by joblib 0.13 and scikit-learn 0.21: its `__setstate__` calls
    `_after_fork`; loky's own fix for 3.9 is joblib/loky#265) fails in every worker with "'_SafeQueue'
    object has no attribute '_notempty'". A queue that has one is reset exactly as the running
    interpreter does."""
    queue: Any = queues.Queue
    reset = queue._reset

    def _reset(self: Any, after_fork: bool = False) -> None:
        reset(self, after_fork=after_fork and hasattr(self, "_notempty"))

    _reset.__qualname__ = "Queue._reset"
    queue._reset = _reset


# cloudpickle, where it was vendored before 1.1 (its releases of 2019-2020 and before; the standalone one too)
OLD_CLOUDPICKLE = ("sklearn.externals.joblib.externals.cloudpickle.cloudpickle",
                   "joblib.externals.cloudpickle.cloudpickle", "cloudpickle.cloudpickle")

SHIMS: tuple[Shim, ...] = (
    # since 3.7, not 3.9: checked in the stdlib of 3.6.9 (old), 3.7.10 and 3.8.10 (new)
    Shim("unittest_short_description", (3, 7), "unittest.case", "bpo-39450 (gh-83631)",
         _short_description_first_line),
    *(Shim("code_type_without_posonlyargcount", (3, 8), name, "bpo-36540 (PEP 570)", around=_code_type_of_3_7)
      for name in OLD_CLOUDPICKLE),
    # 3.9.0: the 3.8 and 3.9 branches' diff (quoted in joblib/loky#265) and the stand-in's 3.9.2
    Shim("queue_after_fork_new_condition", (3, 9), "multiprocessing.queues", "bpo-40221 (gh-84402)",
         _queue_state_without_notempty),
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

        def run() -> None:
            self.loader.exec_module(module)

        for shim in self.shims:
            if shim.around is not None:
                run = _wrapped(shim.around, module, run)
        run()
        for shim in self.shims:
            if shim.restore is not None:
                shim.restore(module)


def _wrapped(around: Callable[[ModuleType, Callable[[], None]], None], module: ModuleType,
             inner: Callable[[], None]) -> Callable[[], None]:
    return lambda: around(module, inner)


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
        if module is None:
            pending.setdefault(shim.module, []).append(shim)
        elif shim.restore is not None:      # one met while importing: imported already, it had not failed
            shim.restore(module)
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))
    return list(dict.fromkeys(shim.name for shim in shims))
