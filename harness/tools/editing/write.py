"""`write`: create a file, or replace a whole file that was viewed and has not changed since."""

from __future__ import annotations

from typing import Any

from harness.config import ToolsConfig
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.editing.commit import Change, commit, once, read_current
from harness.tools.editing.edit import KEY_SCHEMA, summary
from harness.tools.editing.edit_state import file_lock
from harness.tools.paths import confine, display, resolve_in_sandbox

WRITE_DESCRIPTION = """\
Create a file with `content`, or replace a whole existing file (which must have been viewed in \
this session and not changed since). Prefer `edit` for changing part of an existing file: \
rewriting a whole file risks changing lines you did not mean to. Python files that would get \
new pyflakes errors are not written. `key`: optional idempotency key."""


def write_tool(config: ToolsConfig) -> Tool:
    params: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the project root."},
            "content": {"type": "string", "description": "The whole content of the file."},
            "key": KEY_SCHEMA},
        "required": ["path", "content"], "additionalProperties": False}

    def run(ctx: ToolContext, path: str, content: str, key: str | None = None) -> str:
        args = {"path": path, "content": content, "key": key}
        return once(ctx, "write", args, lambda: _write(ctx, config, path, content))

    return Tool("write", WRITE_DESCRIPTION, params, Effect.SANDBOX, run,
                example={"path": "tests/test_new.py", "content": "def test_ok():\n    assert True\n"})


def _write(ctx: ToolContext, config: ToolsConfig, path: str, content: str) -> str:
    with file_lock(ctx.sandbox, [confine(path, for_write=True)]):
        current = read_current(ctx, path, must_exist=False)
        if current is None:
            real = resolve_in_sandbox(ctx.sandbox, path, for_write=True)
            change = Change(real, "", None, content, 1, max(1, content.count("\n")))
        elif current.text == content:
            return f"{display(current.realpath)} already has exactly this content; nothing was written"
        else:
            first, last = _changed_span(current.text, content)
            change = Change(current.realpath, current.sha256, current.text, content, first, last)
        notes = commit(ctx, [change], lint_python=config.lint_python)
    if change.last_line - change.first_line > 40:
        change.last_line = change.first_line + 40
    return summary(change, config, notes)


def _changed_span(old: str, new: str) -> tuple[int, int]:
    """First and last line of `new` that differ from `old` (1-based)."""
    a, b = old.split("\n"), new.split("\n")
    top = 0
    while top < min(len(a), len(b)) and a[top] == b[top]:
        top += 1
    bottom = 0
    while bottom < min(len(a), len(b)) - top and a[-1 - bottom] == b[-1 - bottom]:
        bottom += 1
    return top + 1, max(top + 1, len(b) - bottom)
