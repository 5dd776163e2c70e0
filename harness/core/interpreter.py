"""Starting this Python again for a helper process on the host: find_code's analysis workers, Ray
nodes, `pip download`, the local model server.

`python -c CODE` and `python -m NAME` put the current directory first on `sys.path`. An operator
running the harness from inside a project (their repository, a task's checkout) would then import
that project's `harness`, `ray`, `pip` or `llama_cpp` folder in place of ours: the project's code run
on the host, outside any sandbox. `-P` (Python 3.11: "don't prepend a potentially unsafe path") keeps
it off; `PYTHONPATH` and the installed packages are found as before.
"""

from __future__ import annotations

import sys


def python_command(*args: str, python: str | None = None) -> list[str]:
    """The argv running `python` (this interpreter by default) with `args`, the current folder not on its path."""
    return [python or sys.executable, "-P", *args]
