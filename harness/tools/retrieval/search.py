"""`search`: grep inside the sandbox, at most N matches shown, with counts when there are more.

grep runs in the sandbox (so it sees the files as they are now, including what the shell wrote)
and its output goes to a temporary file that a few lines of Python summarise: the first N
matches, the total, and the files with most matches. "No matches" (grep exit 1) and a failure
(exit 2: bad pattern, missing path) are different results.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from harness.config import ToolsConfig
from harness.container_scripts import script_text
from harness.errors import PathError, ToolError
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.paths import display, resolve_in_sandbox
from sandbox.api import WORKDIR

DESCRIPTION = """\
Find lines matching a regular expression (Perl/Python syntax; `(?i)` for case-insensitive) in the \
files under `path` (default: the whole project; .git and __pycache__ are skipped). Lists up to \
{cap} matches as file:line: text; with more, tells how many in how many files and which files have \
most, so you can narrow the pattern or the path. Use `find_code` instead to look for code by what \
it does rather than by exact text."""

# Runs with the sandbox's python3, whatever its version (harness/container_scripts/search_summary.py).
SUMMARISE = "search_summary.py"


def search_tool(config: ToolsConfig) -> Tool:
    params = {"type": "object",
              "properties": {
                  "pattern": {"type": "string", "minLength": 1, "description": "Regular expression."},
                  "path": {"type": "string", "description": "File or directory to search; default \".\"."}},
              "required": ["pattern"], "additionalProperties": False}

    def run(ctx: ToolContext, pattern: str, path: str = ".") -> str:
        return _search(ctx, pattern, path, config.search_max_results)

    return Tool("search", DESCRIPTION.format(cap=config.search_max_results), params, Effect.READ, run,
                example={"pattern": r"def top_words\(", "path": "wordcount"})


def _search(ctx: ToolContext, pattern: str, path: str, cap: int) -> str:
    real = resolve_in_sandbox(ctx.sandbox, path)
    rel = "." if real == WORKDIR else shlex.quote(display(real) if real.startswith(WORKDIR + "/") else real)
    script = (f"cd {WORKDIR} || exit 9\nout=$(mktemp); err=$(mktemp)\n"
              f"grep -rnHIZ -P --exclude-dir=.git --exclude-dir=__pycache__ -e {shlex.quote(pattern)} -- {rel} "
              f">\"$out\" 2>\"$err\"; rc=$?\n"
              f"python3 -c {shlex.quote(script_text(SUMMARISE))} \"$out\" \"$err\" \"$rc\" {cap}\n"
              "rm -f \"$out\" \"$err\"")
    res = ctx.sandbox.exec(script, timeout=60, save_output=False)
    try:
        data = json.loads(res.stdout.text)
    except json.JSONDecodeError:
        raise ToolError(f"search could not run (exit {res.exit_code}): {res.stderr.text.strip()[:300]}") from None
    return _render(data, pattern, path, cap)


def _render(data: dict[str, Any], pattern: str, path: str, cap: int) -> str:
    where = "the project" if path in (".", "", WORKDIR) else repr(path)
    if data["total"] == 0:
        if data["rc"] >= 2 and "No such file or directory" in data["err"]:
            raise PathError(f"search failed: {path!r} does not exist ({data['err'].strip()[:200]}); give "
                            "a file or directory of the project, or leave `path` out to search everything")
        if data["rc"] >= 2:
            raise ToolError(f"search failed for pattern {pattern!r} in {where}: {data['err'].strip()[:300]} "
                            "(the pattern is a Perl-compatible regex: escape ( ) [ ] . * + ? with a "
                            "backslash to match them literally, e.g. \"count_words\\(\")")
        return f"no matches for {pattern!r} in {where}"
    lines = [f"{name}:{num}: {text}" for name, num, text in data["first"]]
    head = (f"{_n(data['total'], 'match', 'matches')} in {_n(data['nfiles'], 'file', 'files')} "
            f"for {pattern!r} in {where}")
    if data["total"] > cap:
        top = ", ".join(f"{name} ({n})" for name, n in data["top"])
        head = (f"{head}; showing the first {cap}. Most matches: {top}. Narrow the pattern or give a "
                f"path (e.g. path=\"{data['top'][0][0]}\") to see the rest")
    warn = f"\n(grep warnings: {data['err'].strip()[:300]})" if data["rc"] >= 2 and data["err"].strip() else ""
    return head + ":\n" + "\n".join(lines) + warn


def _n(count: int, one: str, many: str) -> str:
    return f"{count:,} {one if count == 1 else many}"
