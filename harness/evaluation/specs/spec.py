"""One (repository, version) of SWE-bench: how its environment is installed and its tests are run.

A `Spec` is a value: the facts of the official SWE-bench harness's recipe for that version, split so
that an offline builder can act on each part separately. What the official recipe does in its
images, and where each step landed here:

    conda env with `python` + `packages`   -> `python`, `packages`, `package_files`
    `pip install` of the pinned packages   -> `pip_packages`
    `apt-get install ...` (pre-install)    -> `apt_packages` (not available offline: report them)
    other root or network steps            -> `system_setup` (locale generation, a qhull download)
    edits in the checkout (sed ...)        -> `pre_install`, run in the project folder before `install`
    the install command                    -> `install` (the official harness runs it at image build
                                              and again in the test script before the tests)
    `export X=Y` before the tests          -> `env` (sympy's `PYTHONWARNINGS=... bin/test` prefix too)
    the test command, files appended       -> `test_cmd` + `runner` (how files become arguments)
    the log parser of the repository       -> `parser`
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NoReturn

from harness.evaluation.specs.interpreters import interpreter_for

Runner = Literal["pytest", "django", "sympy"]
"""How test files become arguments: paths (pytest, and sphinx's tox which passes them on to pytest);
django's dotted labels (`tests/a/b.py` -> `a.b`); sympy's `bin/test`, which takes paths."""

Parser = Literal["pytest", "pytest_options", "pytest_v2", "django", "sympy", "matplotlib", "seaborn"]
"""The official log parser, by the name of the function that does the work. The official map names
some of them after the repository: astropy, scikit-learn and sphinx use `pytest_v2`; requests,
pylint and pydicom use `pytest_options`; flask, xarray, astroid, marshmallow, pvlib, pyvista and
sqlfluff use `pytest`."""

PackageFile = Literal["requirements.txt", "environment.yml"]
Packages = PackageFile | tuple[str, ...]
"""Where the dependencies come from: the project's requirements file or conda environment file at
the environment commit (the candidate paths are `Spec.package_files`, first one found wins), or an
explicit list of packages the official recipe installs with the interpreter (conda specs such as
`numpy==1.19.2`, which read the same as pip requirements). Empty: only `pip_packages`."""


class Env(dict[str, str]):
    """Environment variables that cannot be changed in place: a `dict` (so a spec pickles, deep-copies
    and serialises to JSON as one), whose mutators raise TypeError."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a spec's env cannot be changed; build a new spec with dataclasses.replace(spec, env=...)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[Env], tuple[dict[str, str]]]:
        return Env, (dict(self),)  # pickle and deepcopy rebuild it whole, never item by item


@dataclass(frozen=True)
class Spec:
    """How the official SWE-bench harness installs and tests `repo` at `version` (the module docstring
    maps its recipe's steps to these fields). Immutable, picklable, and `dataclasses.asdict` gives JSON."""

    repo: str
    version: str
    python: str
    """The interpreter the official harness asks for ("3.6", "3.10", ...); see `python_used`."""
    install: str
    test_cmd: str
    """The runner command without the test files, e.g. `bin/test -C --verbose`."""
    runner: Runner
    parser: Parser
    packages: Packages = ()
    package_files: tuple[str, ...] = ()
    pip_packages: tuple[str, ...] = ()
    apt_packages: tuple[str, ...] = ()
    system_setup: tuple[str, ...] = ()
    """Commands of the official recipe that need root or the network, to run in one shell in order."""
    pre_install: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    compiled: bool = False
    """The install builds C extensions (a compiler toolchain is needed)."""
    python_min: str | None = None
    """The lowest Python the project at this version declares it supports, where that excludes an
    interpreter the nearest-interpreter rule would otherwise pick (ours, not the official harness's)."""
    tests_as_nonroot: bool = False
    """The official harness runs these tests as a non-root user."""
    cpus: int | None = None
    """The CPUs the official harness gives the test container, where it sets a number."""
    offline_blocker: str | None = None
    """Why this recipe cannot be followed offline (its instances are then `unsupported` with this reason)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", Env(self.env))

    @property
    def python_requested(self) -> str:
        """The interpreter the official harness asks for."""
        return self.python

    @property
    def python_used(self) -> str:
        """The offline interpreter that stands in for `python_requested` (see `interpreters`)."""
        return interpreter_for(self.python, minimum=self.python_min)


Key = tuple[str, str]
"""(repository, version), e.g. ("django/django", "3.0")."""


def for_versions(base: Spec, versions: Iterable[str], **changes: Any) -> dict[Key, Spec]:
    """`base` (with `changes`) once per version: how a repository's table shares its common facts."""
    return {(base.repo, v): replace(base, version=v, **changes) for v in versions}
