"""The one way the editing tools change files: compare-and-swap, lint gate, all-or-nothing, keys.

Every editing tool (edit, write, apply_patch) computes the new text of each file it touches as a
`Change`, then hands the list to `commit`, which, under the per-file locks:

1. checks each file's SHA-256 against this session's last read or write of it (never read:
   refused; different: refused as "changed since you read it");
2. runs the lint gate on Python files and refuses edits that add errors (nothing is written);
3. writes each file with `write_file(expect_sha256=...)`, the sandbox's atomic compare-and-swap;
   if any write fails, the files already written are put back (again with CAS) and the call fails;
4. records the new fingerprints.

`once` wraps a tool body with its idempotency key: a key already applied returns the first result
and changes nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import EditError
from harness.tools.base import ToolContext
from harness.tools.editing import lint_delta
from harness.tools.editing.edit_state import Applied, EditState, args_fingerprint
from harness.tools.editing.render import decode_for_edit
from harness.tools.paths import check_resolved, confine, display

VIEW_AGAIN = "view it again and redo the edit on what it holds now"


@dataclass(frozen=True)
class Current:
    """A file as it is now, checked against the session's fingerprint."""

    realpath: str
    sha256: str
    text: str


@dataclass
class Change:
    realpath: str
    old_sha256: str            # "" when the file is created
    old_text: str | None       # None when the file is created
    new_text: str | None       # None when the file is deleted
    first_line: int = 1        # the changed region in the new text, for the result
    last_line: int = 1

    @property
    def shown(self) -> str:
        return display(self.realpath)


def read_current(ctx: ToolContext, path: str, *, must_exist: bool = True) -> Current | None:
    """The file at `path` if it exists, after the path check and the compare-and-swap check.

    Only the fingerprint is read first; the content is fetched when the session does not hold
    that exact version in its cache already.
    """
    absolute = confine(path, for_write=True)
    try:
        probe = ctx.sandbox.read_file(absolute, max_bytes=0)
    except FileNotFoundError:
        if must_exist:
            raise EditError(f"{path!r} does not exist; check the name (e.g. with search or bash `ls`), "
                            "or create the file with write(path, content)") from None
        return None
    except IsADirectoryError:
        raise EditError(f"{path!r} is a directory, not a file; give a file path, e.g. "
                        f"\"{display(absolute)}/__init__.py\"") from None
    real = check_resolved(path, probe.realpath, for_write=True)
    state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
    check_fingerprint(state, real, probe.sha256)
    text = state.cached_text(real, probe.sha256)
    if text is None:
        data = ctx.sandbox.read_file(real)
        check_fingerprint(state, real, data.sha256)
        text = decode_for_edit(data.data, display(real))
        state.record(real, data.sha256, text)
    return Current(real, probe.sha256, text)


def check_fingerprint(state: EditState, realpath: str, sha256: str) -> None:
    seen = state.fingerprints.get(realpath)
    shown = display(realpath)
    if seen is None:
        raise EditError(f"{shown} has not been read in this session, so an edit could overwrite "
                        f"changes you have not seen; view it first (view(path=\"{shown}\")) and then edit")
    if seen != sha256:
        raise EditError(f"{shown} changed since you read it (sha256 {seen[:12]}… then, {sha256[:12]}… now), "
                        f"e.g. by a shell command; {VIEW_AGAIN}")


def lint_gate(changes: list[Change]) -> list[str]:
    """Refuse (EditError) if a Python change adds lint errors; returns notes for the result."""
    notes: list[str] = []
    refusals: list[str] = []
    for ch in changes:
        if ch.new_text is None or not ch.realpath.endswith(".py"):
            continue
        verdict = lint_delta.compare(ch.old_text or "", ch.new_text, ch.shown)
        if verdict.blocked:
            lines = ch.new_text.split("\n")
            listed = "\n".join(f"  {p}    | {lines[p.line - 1].strip()[:120] if p.line <= len(lines) else ''}"
                               for p in verdict.new_errors)
            refusals.append(f"{ch.shown}: the edit would add {len(verdict.new_errors)} error(s):\n{listed}")
        if verdict.new_warnings:
            notes.append(f"{ch.shown}: new warnings (not blocking): "
                         + "; ".join(str(p) for p in verdict.new_warnings))
        if verdict.old_count:
            notes.append(f"{ch.shown}: {verdict.old_count} problem(s) pyflakes reported before this edit "
                         "are still there (not blocking)")
    if refusals:
        raise EditError("the edit was rolled back (nothing was written) because pyflakes found new "
                        "errors:\n" + "\n".join(refusals)
                        + "\nFix them in the new text and call again; errors that were already in the "
                          "file do not block.")
    return notes


def commit(ctx: ToolContext, changes: list[Change], *, lint_python: bool = True) -> list[str]:
    """Lint, write all changes or none, record fingerprints; returns the lint notes."""
    notes = lint_gate(changes) if lint_python else []
    done: list[Change] = []
    try:
        for ch in changes:
            _apply(ctx, ch)
            done.append(ch)
    except EditError as exc:
        undone = [_undo(ctx, ch) for ch in reversed(done)]
        stuck = [u for u in undone if u]
        raise EditError(f"{exc}\n" + (f"These files could not be put back and hold this call's version: "
                                      f"{', '.join(stuck)}; view them." if stuck
                                      else "No file was changed by this call.")) from None
    state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
    for ch in changes:
        if ch.new_text is None:
            state.forget(ch.realpath)
    return notes


def _apply(ctx: ToolContext, ch: Change) -> None:
    state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
    if ch.new_text is None:
        _delete(ctx, ch.realpath, ch.old_sha256)
        return
    try:
        out = ctx.sandbox.write_file(ch.realpath, ch.new_text.encode(), expect_sha256=ch.old_sha256)
    except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        raise EditError(f"could not write {ch.shown}: {exc.strerror or exc}") from None
    if out.conflict:
        what = "was created" if ch.old_sha256 == "" else "changed"
        raise EditError(f"{ch.shown} {what} while this edit was being made (a shell command?); {VIEW_AGAIN}")
    state.record(ch.realpath, out.sha256, ch.new_text)


def _delete(ctx: ToolContext, realpath: str, sha256: str) -> None:
    q = shlex.quote(realpath)
    res = ctx.sandbox.exec(f'[ "$(sha256sum < {q} | cut -c1-64)" = {sha256} ] || exit 3; rm -f -- {q}',
                           timeout=10, save_output=False)
    if res.exit_code == 3:
        raise EditError(f"{display(realpath)} changed while this edit was being made; {VIEW_AGAIN}")
    if not res.ok:
        raise EditError(f"could not delete {display(realpath)}: {res.stderr.text.strip()[:200]}")


def _undo(ctx: ToolContext, ch: Change) -> str:
    """Put one applied change back; returns "" on success, else the file's name."""
    state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
    if ch.new_text is None:
        out = ctx.sandbox.write_file(ch.realpath, (ch.old_text or "").encode(), expect_sha256="")
    elif ch.old_text is None:
        res = ctx.sandbox.exec(f"rm -f -- {shlex.quote(ch.realpath)}", timeout=10, save_output=False)
        state.forget(ch.realpath)
        return "" if res.ok else ch.shown
    else:
        current = state.fingerprints.get(ch.realpath, "")
        out = ctx.sandbox.write_file(ch.realpath, ch.old_text.encode(), expect_sha256=current)
    if out.written:
        state.record(ch.realpath, out.sha256, ch.old_text)
    return "" if out.written else ch.shown


def once(ctx: ToolContext, tool: str, args: dict[str, Any], body: Callable[[], str]) -> str:
    """Run `body` unless this call's idempotency key was already applied in this session."""
    state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
    key = str(args.get("key") or ctx.tool_use_id)
    digest = args_fingerprint(tool, args)
    done = state.lookup(ctx.sandbox, key) if key else None
    if done is not None:
        if done.args_sha256 != digest or done.tool != tool:
            raise EditError(f"the key {key!r} was already used by another call ({done.tool}) with different "
                            "arguments; nothing was changed. Use a new key for a new change, e.g. "
                            f"\"key\": \"{key}-2\"")
        return f"already applied (key {key!r}); nothing was changed now. Result of the first call:\n{done.result}"
    result = body()
    state.save(ctx.sandbox)
    if key:
        state.remember(ctx.sandbox, key, Applied(tool, digest, result))
    return result
