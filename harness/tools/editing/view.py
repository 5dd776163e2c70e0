"""`view`: the file viewer (numbered windows, directory listings); viewing records a file's fingerprint."""

from __future__ import annotations

import shlex

from harness.config import ToolsConfig
from harness.errors import PathError
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.editing.render import numbered
from harness.tools.paths import WRITE_ROOTS, check_resolved, confine, display, resolve_in_sandbox

MAX_VIEW_BYTES = 8 * 1024 * 1024

VIEW_DESCRIPTION = """\
Show {n} numbered lines of a file around `line` (default 1), with how many lines are above and \
below and the call that shows the next part. A directory path lists its entries. Viewing a file \
is what allows `edit`/`apply_patch`/`write` to change it afterwards. Also reads the full output \
files the bash tool saves when it truncates (paths under /tmp/harness/output)."""


def view_tool(config: ToolsConfig) -> Tool:
    params = {"type": "object",
              "properties": {
                  "path": {"type": "string", "description": "File or directory, relative to the project root."},
                  "line": {"type": "integer", "minimum": 1, "description": "Line to centre the window on."}},
              "required": ["path"], "additionalProperties": False}

    def run(ctx: ToolContext, path: str, line: int = 1) -> str:
        return _view(ctx, config, path, line)

    return Tool("view", VIEW_DESCRIPTION.format(n=config.view_lines), params, Effect.READ, run,
                example={"path": "pkg/core.py", "line": 120})


def _view(ctx: ToolContext, config: ToolsConfig, path: str, line: int) -> str:
    absolute = confine(path)
    try:
        data = ctx.sandbox.read_file(absolute, max_bytes=MAX_VIEW_BYTES)
    except FileNotFoundError:
        raise PathError(f"{path!r} does not exist (looked for {absolute}); list the project with "
                        "view(path=\".\") or find files with search") from None
    except IsADirectoryError:
        return _listing(ctx, path)
    real = check_resolved(path, data.realpath)
    shown = display(real)
    if b"\x00" in data.data[:8192]:
        return f"{shown} is a binary file ({data.size:,} bytes); not shown"
    whole = len(data.data) == data.size
    if any(real == root or real.startswith(root + "/") for root in WRITE_ROOTS):
        state = ctx.edit_state.load_once(ctx.sandbox, ctx.session)
        known = state.fingerprints.get(real)
        state.record(real, data.sha256, _utf8(data.data) if whole else None)
        if known != data.sha256:
            state.save(ctx.sandbox)
    lines = data.data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "" or not whole:
        lines.pop()
    if not lines:
        return f"{shown} is empty (0 lines)"
    window = _window(shown, lines, line, config.view_lines)
    if whole:
        return window
    return (f"[{shown} has {data.size:,} bytes; only its first {len(data.data):,} bytes ({len(lines):,} "
            f"lines) can be viewed: use bash, e.g. `tail -n 100 {shown}` or `sed -n '20000,20100p' {shown}`, "
            f"for the rest]\n{window}")


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _window(shown: str, lines: list[str], line: int, size: int) -> str:
    total = len(lines)
    note = ""
    if line > total:
        note = f"(line {line} is past the end; the file has {total} lines)\n"
        line = total
    first = max(1, line - size // 2 + 1)
    last = min(total, first + size - 1)
    first = max(1, last - size + 1)
    head = f"{shown}: lines {first}-{last} of {total} ({first - 1} above, {total - last} below)"
    parts = [note + head, numbered(lines, first, last)]
    if last < total:
        parts.append(f"[{total - last} more lines below: view(path=\"{shown}\", line={last + size // 2})]")
    return "\n".join(parts)


def _listing(ctx: ToolContext, path: str, cap: int = 200) -> str:
    real = resolve_in_sandbox(ctx.sandbox, path)
    res = ctx.sandbox.exec(f"cd {shlex.quote(real)} && ls -1Ap --group-directories-first | head -n {cap + 1}; "
                           "echo \"total=$(ls -1A | wc -l)\"", timeout=10, save_output=False)
    out = res.stdout.text.strip().split("\n")
    total = out.pop().removeprefix("total=") if out and out[-1].startswith("total=") else "?"
    entries = [e for e in out if e][:cap]
    if not res.ok and not entries:
        raise PathError(f"cannot list {path!r}: {res.stderr.text.strip()[:200]}")
    more = f"\n[{int(total) - cap} more entries not shown]" if total.isdigit() and int(total) > cap else ""
    body = "\n".join(entries) if entries else "(empty directory)"
    return f"{display(real) or '.'}/ is a directory with {total} entries (directories end with /):\n{body}{more}"
