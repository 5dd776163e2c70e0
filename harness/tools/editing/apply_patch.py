"""`apply_patch`: a unified diff over one or more files, applied all-or-nothing."""

from __future__ import annotations

from typing import Any

from harness.config import ToolsConfig
from harness.errors import EditError
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.editing import unified_diff
from harness.tools.editing.commit import Change, commit, once, read_current
from harness.tools.editing.edit import KEY_SCHEMA
from harness.tools.editing.edit_state import file_lock
from harness.tools.editing.render import region
from harness.tools.paths import confine, display, resolve_in_sandbox

DESCRIPTION = """\
Apply a unified diff (`--- a/path`, `+++ b/path`, `@@` hunks with a few context lines) to one or \
more files, all or nothing. Hunks are placed by their context, so line numbers may be off; a hunk \
whose context is not in the file is refused with what the file has there. `--- /dev/null` creates \
a file, `+++ /dev/null` deletes one. Every existing file touched must have been viewed in this \
session and not changed since. Python files that would get new pyflakes errors roll the whole \
patch back. For a single local change `edit` is simpler. `key`: optional idempotency key."""

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "patch": {"type": "string", "minLength": 1, "description": "The unified diff text."},
        "key": KEY_SCHEMA,
    },
    "required": ["patch"],
    "additionalProperties": False,
}

MAX_SHOWN_LINES = 80


def apply_patch_tool(config: ToolsConfig) -> Tool:
    def run(ctx: ToolContext, patch: str, key: str | None = None) -> str:
        return once(ctx, "apply_patch", {"patch": patch, "key": key}, lambda: _apply(ctx, config, patch))

    return Tool("apply_patch", DESCRIPTION, PARAMETERS, Effect.SANDBOX, run,
                example={"patch": unified_diff.EXAMPLE})


def _apply(ctx: ToolContext, config: ToolsConfig, text: str) -> str:
    files = unified_diff.parse(text)
    names = [n for fp in files for n in (fp.source, fp.target) if n is not None]
    paths = [confine(n, for_write=True) for n in names]
    touched = [confine(fp.source or fp.target or "", for_write=True) for fp in files]
    if len(set(touched)) != len(touched):
        dup = sorted({display(p) for p in touched if touched.count(p) > 1})
        raise EditError(f"the patch touches {', '.join(dup)} in more than one file section; "
                        "merge the hunks of each file under a single ---/+++ header")
    with file_lock(ctx.sandbox, paths):
        changes: list[Change] = []
        problems: list[str] = []
        spans: dict[str, list[tuple[int, int]]] = {}
        for fp in files:
            try:
                planned, fp_spans = _plan(ctx, fp)
            except EditError as exc:
                problems.append(str(exc))
                continue
            changes.extend(planned)
            spans[planned[-1].realpath] = fp_spans
        if problems:
            raise EditError("the patch was not applied; no file was changed:\n" + "\n\n".join(problems))
        notes = commit(ctx, changes, lint_python=config.lint_python)
    return _result(changes, spans, config, notes)


def _plan(ctx: ToolContext, fp: unified_diff.FilePatch) -> tuple[list[Change], list[tuple[int, int]]]:
    """The changes one file section makes, checked but not written."""
    if fp.source is None:
        assert fp.target is not None
        new, spans = unified_diff.apply("", fp.hunks, fp.target)
        return [_create(ctx, fp.target, new)], spans
    current = read_current(ctx, fp.source)
    assert current is not None
    shown = display(current.realpath)
    new, spans = unified_diff.apply(current.text, fp.hunks, shown)
    if fp.target is None:
        if new.strip():
            raise EditError(f"the patch deletes {shown} but its hunks do not remove all of it "
                            f"({new.count(chr(10)) + 1} lines would remain); a deletion must remove every line")
        return [Change(current.realpath, current.sha256, current.text, None)], []
    if confine(fp.target, for_write=True) != confine(fp.source, for_write=True):
        return [Change(current.realpath, current.sha256, current.text, None), _create(ctx, fp.target, new)], spans
    first, last = (spans[0][0], spans[-1][1]) if spans else (1, 1)
    return [Change(current.realpath, current.sha256, current.text, new, first, last)], spans


def _create(ctx: ToolContext, target: str, text: str) -> Change:
    if read_current(ctx, target, must_exist=False) is not None:
        raise EditError(f"the patch creates {target} (--- /dev/null) but it already exists; "
                        "make a hunk against its current content instead")
    real = resolve_in_sandbox(ctx.sandbox, target, for_write=True)
    return Change(real, "", None, text, 1, max(1, text.count("\n")))


def _result(changes: list[Change], spans: dict[str, list[tuple[int, int]]], config: ToolsConfig,
            notes: list[str]) -> str:
    parts: list[str] = []
    budget = MAX_SHOWN_LINES
    for ch in changes:
        if ch.new_text is None:
            parts.append(f"deleted {ch.shown}")
            continue
        verb = "created" if ch.old_text is None else "edited"
        where = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans.get(ch.realpath, []))
        parts.append(f"{verb} {ch.shown} (changed lines now at {where or '1'}):")
        for a, b in spans.get(ch.realpath, []):
            shown = region(ch.new_text, a, b, config.edit_context_lines)
            if budget <= 0:
                parts.append("  [more changed regions not shown; view the file to see them]")
                break
            budget -= shown.count("\n") + 1
            parts.append(shown)
    return "\n".join(parts + notes)
