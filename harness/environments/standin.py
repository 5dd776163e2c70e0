"""The stand-in interpreter's shims in an instance image: which apply, and the files that apply them.

When a recipe asks for an interpreter older than the one available offline (django 3.0 asks for 3.6
and runs on 3.9), the instance image gets `container_scripts/standin.py` as the venv's module
`harness_standin` and a .pth file that calls `harness_standin.install(<requested>)` at every start of
the venv's interpreter (a process started through a link to it too: `venv_link.py` adds the venv's
site folder, .pth files included). Root's files in the instance layer; none when no shim applies:
the requested interpreter is the one used, or a newer one (xarray asks for 3.10 and runs on 3.9: what
3.10 added is not put back into 3.9).
"""

from __future__ import annotations

from harness.container_scripts import script_text
from harness.container_scripts import standin as shim_script
from harness.environments.recipe import VENV
from harness.errors import TaskError

MODULE = "harness_standin"
SCRIPT = "standin.py"


def stand_in(requested: str, used: str) -> bool:
    """Whether `used` is another minor version than `requested` (a stand-in, shimmed or not)."""
    return _version(requested) != _version(used)


def shims(requested: str, used: str) -> tuple[str, ...]:
    """The names of the shims that make `used` behave as `requested` (none unless `requested` is older)."""
    return tuple(dict.fromkeys(shim.name for shim in shim_script.applicable(_version(requested), _version(used))))


def standin_files(requested: str, used: str) -> dict[str, bytes]:
    """The instance layer's files (absolute path: content) that apply `shims(requested, used)` in every
    process of the venv's interpreter; empty when none applies."""
    if not shims(requested, used):
        return {}
    folder = f"{VENV}/lib/python{_minor(used)}/site-packages"
    call = f"import {MODULE}; {MODULE}.install({_minor(requested)!r})\n"
    return {f"{folder}/{MODULE}.py": script_text(SCRIPT).encode(), f"{folder}/harness-standin.pth": call.encode()}


def _minor(text: str) -> str:
    major, minor = _version(text)
    return f"{major}.{minor}"


def _version(text: str) -> tuple[int, int]:
    try:
        return shim_script.version(text)
    except ValueError:
        raise TaskError(f"Python version {text!r} is not major.minor: expected e.g. '3.6' or '3.6.15'") from None
