"""How the official SWE-bench harness installs and tests each (repository, version) of its Python
repositories, and which offline interpreter stands in for the one it asks for."""

from harness.evaluation.specs.interpreters import AVAILABLE, interpreter_for
from harness.evaluation.specs.spec import Key, Packages, Parser, Runner, Spec
from harness.evaluation.specs.table import (
    HAND_FIELDS,
    TABLE,
    UnknownSpecError,
    repositories,
    spec_for,
    versions_of,
)

__all__ = [
    "AVAILABLE",
    "HAND_FIELDS",
    "TABLE",
    "Key",
    "Packages",
    "Parser",
    "Runner",
    "Spec",
    "UnknownSpecError",
    "interpreter_for",
    "repositories",
    "spec_for",
    "versions_of",
]
