"""Unmodified SWE-bench rows as tasks: the specification table fills in what the row does not say.

A published row carries only SWE-bench's own fields (`repo`, `version`, `base_commit`, `patch`,
`test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`, `created_at`, ...). How to install and test it comes
from `specs.spec_for(repo, version)`:

- the interpreter: the nearest offline one (`Spec.python_used`), recorded beside the one asked for;
- the test command: the spec's runner command followed by the test files the test patch touches,
  translated for the runner (`directives.test_directives`: paths for pytest and sympy, dotted labels
  for django), each checked so that a hostile test patch cannot add an option;
- the environment (`core.task.Environment`): one lock per (repo, version, interpreter), shared by every
  row of it, its dependencies resolved from the project's own files plus the spec's pins as of the
  version's date (its `environment_setup_commit`'s, `harness.environments.versions`); the install
  command, the pre-install edits and the test variables;
- the log parser.

A field given on the row (`test_cmd`, `install_cmd`, `python`, `requirements`) overrides the spec; a
row with `requirements` brings its own environment (`core.task.own_environment`: a venv of those pins).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness import checks
from harness.core.sources import cache_dir
from harness.core.task import Environment, install_extras, own_environment
from harness.errors import TaskError
from harness.evaluation.directives import test_directives
from harness.evaluation.specs import Spec, spec_for

# The offline images have the C.UTF-8 locale only (no locale-gen without a package download); the
# official recipe's en_US.UTF-8 would leave Python in the ASCII C locale, which is worse for the tests.
OFFLINE_LOCALE = "C.UTF-8"
_LOCALE = {"LANG": OFFLINE_LOCALE, "LC_ALL": OFFLINE_LOCALE, "LANGUAGE": None}


def needs_spec(row: dict[str, Any]) -> bool:
    """Whether `row` lacks the hand-written fields and must be completed from the specification table."""
    return not isinstance(row.get("test_cmd"), str)


def spec_of(row: dict[str, Any]) -> Spec:
    """The row's specification. Raises `specs.UnknownSpecError` (naming the versions known)."""
    return spec_for(str(row.get("repo")), str(row.get("version")))


def completed_meta(row: dict[str, Any], meta: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """`meta` (the row's task metadata) with every missing field filled in from `spec`.

    Raises:
        TaskError: the test patch names a file that cannot safely become a test runner argument.
    """
    out = dict(meta)
    if "test_cmd" not in out:
        directives = test_directives(str(row.get("test_patch") or ""), spec.runner)
        out["test_cmd"] = " ".join([spec.test_cmd, *(shlex.quote(d) for d in directives)])
    out.setdefault("python", spec.python_used)
    if "install_cmd" not in out:
        out["install_cmd"] = spec.install
    return out


def environment_of(row: dict[str, Any], spec: Spec, python: str, git_source: Path | None = None) -> Environment | None:
    """The environment of a row: its version's (one lock per version and interpreter), or, for a row
    that pins its requirements by hand, its own (`own_environment`; None for a direct reference).
    `git_source`: a clone that may hold the row's `environment_setup_commit` (its date and tree)."""
    if row.get("requirements") is not None:
        return own_environment(tuple(row["requirements"]), python, str(row.get("install_cmd") or spec.install),
                               row.get("created_at"))
    # the official recipe's package list (conda specs, read as pip requirements) joins the pins
    listed = spec.packages if isinstance(spec.packages, tuple) else ()
    pinned = {canonicalize_name(Requirement(p).name) for p in spec.pip_packages}
    pins = tuple(spec.pip_packages) + tuple(n for n in listed if canonicalize_name(Requirement(n).name) not in pinned)
    variables = {k: _LOCALE.get(k, v) for k, v in spec.env.items()}
    created = row.get("created_at")
    setup = row.get("environment_setup_commit")
    return Environment(
        key=f"{spec.repo} {spec.version} py{python}", python_requested=spec.python_requested, pins=pins,
        package_files=tuple(spec.package_files), any_requirements_file=False,
        as_of=str(created)[:10] if created else None,
        pre_install=tuple(spec.pre_install), apt_packages=tuple(spec.apt_packages), compiled=spec.compiled,
        offline_blocker=spec.offline_blocker, extras=install_extras(spec.install), cpus=spec.cpus,
        test_env=tuple(sorted((k, v) for k, v in variables.items() if v is not None)),
        version_of=(spec.repo, spec.version), setup_commit=_commit(setup), git_source=git_source)


def _commit(value: object) -> str | None:
    """A row's environment_setup_commit if it is one (7 to 40 hex digits), else None (then the version is
    dated by the row's created_at)."""
    try:
        return checks.commit(value, "environment_setup_commit") if value else None
    except TaskError:
        return None


def git_source(row: dict[str, Any], repos: Path | None) -> Path | None:
    """A git clone that may hold the row's environment_setup_commit: `repos/<owner>__<name>` when it is one,
    else the clone the harness keeps in its cache, when there is one."""
    repo = row.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1:
        return None
    try:
        owner, name = (checks.identifier(p, "repo") for p in repo.split("/"))
    except TaskError:
        return None
    for clone in ([repos / f"{owner}__{name}"] if repos is not None else []) + \
            [cache_dir() / "clones" / f"{owner}__{name}.git"]:
        if (clone / ".git").exists() or (clone / "objects").is_dir():
            return clone
    return None
