"""The built-in table of SWE-bench specs, keyed by (repository, version), and its lookup.

The facts are those of the official SWE-bench harness's published constants for its Python
repositories (release 4.1.0, the last to publish them in the package: `swebench/harness/constants/
python.py` and the repository-to-parser map in `swebench/harness/log_parsers/python.py`), for
SWE-bench, SWE-bench Verified and SWE-bench Lite's dev split. Left out: dbt-labs/dbt-core, whose
official spec has no test command or log parser, and the HumanEval stand-in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from harness.errors import TaskError
from harness.evaluation.specs._science import (
    ASTROPY,
    MATPLOTLIB,
    PVLIB,
    PYDICOM,
    PYVISTA,
    SCIKIT_LEARN,
    SEABORN,
    SYMPY,
    XARRAY,
)
from harness.evaluation.specs._tools import ASTROID, MARSHMALLOW, PYLINT, PYTEST, SPHINX, SQLFLUFF
from harness.evaluation.specs._web import DJANGO, FLASK, REQUESTS
from harness.evaluation.specs.spec import Key, Spec

TABLE: Mapping[Key, Spec] = MappingProxyType({
    key: spec
    for part in (ASTROPY, DJANGO, FLASK, MATPLOTLIB, REQUESTS, SEABORN, XARRAY, PYLINT, PYTEST, SCIKIT_LEARN,
                 SPHINX, SYMPY, ASTROID, MARSHMALLOW, PVLIB, PYDICOM, PYVISTA, SQLFLUFF)
    for key, spec in part.items()
})

HAND_FIELDS = ("install_cmd", "test_cmd", "python", "requirements")
"""The fields of a dataset row that give by hand what the table gives for the versions it knows."""

_HAND_EXAMPLE = ('"install_cmd": "python -m pip install -e .", "test_cmd": "pytest -rA", "python": "3.11", '
                 '"requirements": ["pytest==8.3.5"]')


class UnknownSpecError(TaskError):
    """The table has no spec for a (repository, version); the message says how to give one by hand."""

    def __init__(self, repo: str, version: str) -> None:
        self.repo = repo
        self.version = version
        known = versions_of(repo)
        if known:
            what = f"versions known for {repo}: {', '.join(known)}"
        else:
            what = f"{repo} is not a repository of the table (known: {', '.join(repositories())})"
        super().__init__(
            f"no built-in SWE-bench spec for {repo} version {version!r}; {what}. Give the fields by hand "
            f"on the instance's row ({', '.join(HAND_FIELDS)}), e.g. {{{_HAND_EXAMPLE}}}")


def spec_for(repo: str, version: str) -> Spec:
    """The spec of `repo` at `version` (as the dataset's `version` field spells it: "3.0", "v5.3").

    Raises:
        UnknownSpecError: the table does not know that (repository, version).
    """
    spec = TABLE.get((repo, version))
    if spec is None:
        raise UnknownSpecError(repo, version)
    return spec


def repositories() -> list[str]:
    """The repositories of the table, sorted."""
    return sorted({repo for repo, _ in TABLE})


def versions_of(repo: str) -> list[str]:
    """The versions the table knows for `repo`, oldest first (empty for an unknown repository)."""
    return sorted((version for name, version in TABLE if name == repo), key=_version_order)


def _version_order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))
