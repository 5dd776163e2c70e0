"""Programs that run inside containers, shipped as files (as `sandbox/server/` is) so that ruff and
mypy read them; the host reads each one's text with `script_text` and puts it where it runs.

    file                 runs in                               as                     with
    instance_build.py    the instance build container          the build's user       the venv's Python (3.9+)
    layer_diff.py        the instance build container          root, DAC_READ_SEARCH  Debian's python3 -I -S (3.9+)
    venv_link.py         every process of an instance image    (a .pth imports it)    Debian's python3 (3.9+)
    standin.py           every process of a stand-in's venv    (a .pth imports it)    the venv's python (3.9+)
    make-venv.sh,        the environment image's docker build  root                   bash
    link-scripts.sh,
    build-sdists.sh,
    install-deps.sh
    grading_record.py,   the grading sandbox                   the agent              its python3 (3.7+)
    grading_restore.py
    eval_compat.sh,      the grading sandbox, before a         the agent              bash, then its python3
    eval_checkout.py     SWE-bench 5.0 row's eval script                              (3.7+)
    search_summary.py    the session's sandbox (`search`)      the agent              its python3 (any 3.x)

Users: `harness.environments` (the first eight: `recipe.py` names the paths they share with the
Dockerfiles, `standin.py` the stand-in's files), `harness.evaluation.grading` (the four grading ones),
`harness.tools.retrieval.search`.
The Python files import only the standard library and do their work only when run as a program (or,
venv_link.py, imported under its installed name; standin.py, when its .pth calls it), so importing them
here runs nothing. The shell scripts carry no comment of their own: their bytes are part of the
environment image's tag (`venv_image.py`), and a changed byte rebuilds every environment image.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from harness.container_scripts import standin  # its shims' table, which the host reads too (runs nothing)

__all__ = ["script_text", "standin"]


@cache
def script_text(name: str) -> str:
    """The text of the shipped script `name` (a file of this folder, e.g. "layer_diff.py").

    Raises:
        FileNotFoundError: there is no such script (the package was installed without its data files).
    """
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
