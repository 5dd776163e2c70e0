"""Where a shell command's output gets cut down for the model (seeds/003).

The observation starts with one status line: exit code, duration, the size of each stream. Then, when
the output is too long for the budget: the lines that look like errors first (they are what the
model needs and what a head/tail cut loses), then the head and the tail, with a note saying how many
lines were left out and where the full output is saved so it can be paged with `view` or `search`.
A command that printed nothing says so, and says whether it succeeded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sandbox.api import ExecResult, StreamCapture

# The `(?#any-of: ...)` comment lists lowercase words one of which every matching line holds (`^` = at
# the start of a line): the sandbox skips the regex on output that holds none of them, which keeps
# scanning a flood of output fast (the regex alone reads about 10 MiB/s).
ERROR_PATTERN = (r"(?i)(?#any-of:error|exception|traceback|fail|fatal|panic|denied|refused|not found|no such file|"
                 r"cannot|could not|unable to|segmentation fault|assert|^e)"
                 r"(\b(\w*error|\w*exception|errors|traceback|fail|failed|failures?|fatal|panic|denied|refused|"
                 r"not found|no such file|cannot|could not|unable to|segmentation fault|assert\w*)\b|^E\s)")
NETWORK_PATTERN = re.compile(
    r"(?i)(temporary failure in name resolution|name or service not known|could not resolve|"
    r"network is unreachable|no address associated|getaddrinfo|failed to establish a new connection|"
    r"connection (timed out|refused)|nodename nor servname|unable to access 'https?://)")
NETWORK_HINT = ("hint: the sandbox has no network, by design. To reach the outside (download a package, fetch "
                "a URL, push a branch) use an outbound tool such as http_request or pip_download: a human "
                "approves the request and the harness runs it for you.")


@dataclass(frozen=True)
class Budget:
    max_lines: int = 200
    max_bytes: int = 16_000
    error_lines: int = 40


def format_observation(result: ExecResult, budget: Budget = Budget()) -> str:
    parts = [status_line(result)]
    streams = [(n, c) for n, c in (("stdout", result.stdout), ("stderr", result.stderr)) if c.total_bytes]
    if result.timed_out:
        parts.append(f"the command was killed after its {result.duration:.0f}s timeout (SIGTERM to its process "
                     "group, SIGKILL after a grace period); partial output below. Run long jobs with a "
                     "larger timeout, or in smaller steps.")
    if not streams:
        parts.append("(no output: the command succeeded)" if result.exit_code == 0 and not result.timed_out
                     else f"(no output: the command failed with exit code {result.exit_code})")
    share = {"stdout": 1.0, "stderr": 1.0} if len(streams) < 2 else _shares(result)
    for name, cap in streams:
        lines = max(10, int(budget.max_lines * share[name]))
        size = max(1000, int(budget.max_bytes * share[name]))
        parts.append(render_stream(name, cap, lines, size, budget.error_lines, labelled=len(streams) > 1))
    if result.killed_leftovers:
        parts.append(f"note: {result.killed_leftovers} background process(es) the command left running were "
                     "stopped; every command starts clean, so start servers and waits in the same command.")
    if any(NETWORK_PATTERN.search(c.text) or any(NETWORK_PATTERN.search(t) for _, t in c.error_lines)
           for _, c in streams):
        parts.append(NETWORK_HINT)
    return "\n".join(p for p in parts if p)


def status_line(result: ExecResult) -> str:
    def size(c: StreamCapture) -> str:
        return f"{_human(c.total_bytes)} ({c.total_lines} line{'s' if c.total_lines != 1 else ''})"
    code = "timeout" if result.timed_out else f"exit {result.exit_code}"
    return (f"[{code} · {result.duration:.2f}s · stdout {size(result.stdout)} · "
            f"stderr {size(result.stderr)}]")


def render_stream(name: str, cap: StreamCapture, max_lines: int, max_bytes: int, max_errors: int,
                  labelled: bool) -> str:
    lines = _lines(cap.head)
    if not cap.truncated and len(lines) <= max_lines and cap.total_bytes <= max_bytes:
        body = "\n".join(_cut_long(line, max_bytes) for line in lines)
        return f"--- {name} ---\n{body}" if labelled else body
    out: list[str] = []
    if cap.error_lines:
        shown = cap.error_lines[:max_errors]
        where = "" if cap.scanned_bytes < 0 else f" found in its first {_human(cap.scanned_bytes)} and its last lines"
        out.append(f"--- {name}: lines that look like errors ({len(shown)} of {cap.error_lines_total}{where}) ---")
        out.extend(f"{n}: {_cut_long(text, 300)}" for n, text in shown)
    head_n = max(1, max_lines // 2)
    head = _take(lines, head_n, max_bytes // 2)
    tail_lines = _lines(cap.tail) if cap.truncated else lines[len(head):]
    if cap.truncated and tail_lines and not cap.tail.startswith("\n"):
        tail_lines = tail_lines[1:]   # the first tail line is partial
    tail = _take(tail_lines[::-1], max_lines - len(head), max_bytes // 2)[::-1]
    first_tail = cap.total_lines - len(tail) + 1
    omitted = max(0, first_tail - len(head) - 1)
    out.append(f"--- {name}: lines 1-{len(head)} of {cap.total_lines} ---")
    out.extend(_cut_long(line, max_bytes // 4) for line in head)
    out.append(_omission_note(name, cap, omitted, len(head) + 1))
    if tail:
        out.append(f"--- {name}: lines {first_tail}-{cap.total_lines} of {cap.total_lines} ---")
        out.extend(_cut_long(line, max_bytes // 4) for line in tail)
    return "\n".join(out)


def _omission_note(name: str, cap: StreamCapture, omitted: int, first: int) -> str:
    what = f"[... {omitted} line(s) of {name} omitted"
    if cap.saved_path:
        saved = "the full output" if cap.saved_bytes >= cap.total_bytes else \
            f"the first {_human(cap.saved_bytes)} of it"
        return (f"{what}; {saved} is saved at {cap.saved_path}: page it with "
                f"view(path=\"{cap.saved_path}\", line={first}) or search(pattern=..., path=\"{cap.saved_path}\") ...]")
    return f"{what}; rerun with less output (e.g. pipe through grep, head or tail) to see them ...]"


def _shares(result: ExecResult) -> dict[str, float]:
    total = result.stdout.total_bytes + result.stderr.total_bytes
    err = min(0.6, max(0.3, result.stderr.total_bytes / total))
    return {"stdout": 1.0 - err, "stderr": err}


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _take(lines: list[str], max_lines: int, max_bytes: int) -> list[str]:
    taken: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        cost = min(len(line), max_bytes // 2) + 1
        if taken and used + cost > max_bytes:
            break
        taken.append(line)
        used += cost
    return taken


def _cut_long(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    keep = max(20, limit // 2)
    return f"{line[:keep]}[... {len(line) - 2 * keep} characters of this line omitted ...]{line[-keep:]}"


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
