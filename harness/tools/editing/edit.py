"""`edit`: replace one exact, unique piece of a file (anchor replacement)."""

from __future__ import annotations

from typing import Any

from harness.config import ToolsConfig
from harness.tools.base import Effect, Tool, ToolContext, key_schema
from harness.tools.editing.anchors import replace_once
from harness.tools.editing.commit import Change, commit, once, read_current
from harness.tools.editing.edit_state import file_lock
from harness.tools.editing.render import region
from harness.tools.paths import confine, display

DESCRIPTION = """\
Replace one exact piece of a file with new text. `old` must occur exactly once in the file, \
character for character (indentation included); copy it from `view`. If it occurs several times, \
include a neighbouring line to make it unique. The file must have been viewed in this session and \
not changed since (otherwise: view it again). Python edits that add pyflakes errors are rolled \
back. Returns the changed lines with line numbers. Use `write` to create a file, `apply_patch` for \
changes spread over several places or files.
`key`: optional idempotency key; a repeated call with an applied key changes nothing."""

KEY_SCHEMA = key_schema("Idempotency key: a call repeated with the same key is applied once. "
                        "Default: the id of this tool call.")

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path relative to the project root."},
        "old": {"type": "string", "minLength": 1, "description": "The exact text to replace (unique)."},
        "new": {"type": "string", "description": "The text to put in its place (may be empty)."},
        "key": KEY_SCHEMA,
    },
    "required": ["path", "old", "new"],
    "additionalProperties": False,
}


def edit_tool(config: ToolsConfig) -> Tool:
    def run(ctx: ToolContext, path: str, old: str, new: str, key: str | None = None) -> str:
        args = {"path": path, "old": old, "new": new, "key": key}
        return once(ctx, "edit", args, lambda: _edit(ctx, config, path, old, new))

    return Tool("edit", DESCRIPTION, PARAMETERS, Effect.SANDBOX, run,
                example={"path": "pkg/core.py", "old": "    return ranked[: n - 1]\n",
                         "new": "    return ranked[:n]\n"})


def _edit(ctx: ToolContext, config: ToolsConfig, path: str, old: str, new: str) -> str:
    with file_lock(ctx.sandbox, [confine(path, for_write=True)]):
        current = read_current(ctx, path)
        assert current is not None
        if old == new:
            return f"`old` and `new` are identical; {display(current.realpath)} was left as it is"
        rep = replace_once(current.text, old, new, display(current.realpath))
        change = Change(current.realpath, current.sha256, current.text, rep.text, rep.first_line, rep.last_line)
        notes = commit(ctx, [change], lint_python=config.lint_python)
    return summary(change, config, notes)


def summary(change: Change, config: ToolsConfig, notes: list[str]) -> str:
    """The result of a successful change: what changed and the region, numbered."""
    if change.new_text is None:
        return f"deleted {change.shown}"
    total = change.new_text.count("\n") + (0 if change.new_text.endswith("\n") or not change.new_text else 1)
    span = (f"line {change.first_line}" if change.first_line == change.last_line
            else f"lines {change.first_line}-{change.last_line}")
    verb = "created" if change.old_text is None else "edited"
    head = f"{verb} {change.shown} ({span} now; the file has {total} lines):"
    body = region(change.new_text, change.first_line, change.last_line, config.edit_context_lines)
    return "\n".join([head, body, *notes])
