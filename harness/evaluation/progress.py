"""Progress of a batch evaluation: what the runner reports, and a live rich display of it.

`LiveEvents` shows a bar (done/total, resolved so far, ETA) and the running attempts with their
current stage; `LineEvents` prints one line per finished attempt (for logs and non-terminals). An
attempt is named by its key (`attempts.attempt_key`: the instance id, or ``<id>/epoch-<k>``).
Events arrive from worker threads; the displays serialise them with a lock.

Instance ids, model names, stage texts (build output) and error messages come from input files or
the model: every one is shown through `sandbox.text.escape_unsafe`, and rich receives `Text` objects,
never a string it would read as markup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Protocol, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from harness.evaluation.report import InstanceRecord
from sandbox.text import escape_unsafe


def _text(text: str, style: str = "") -> Text:
    """A line for rich holding hostile values: escaped, and never parsed as markup."""
    return Text(escape_unsafe(text), style=style)


class Events(Protocol):
    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int, *, epochs: int = 1) -> None:
        """`total` attempts, `finished` of them already (keyed by attempt key), `pending` to run."""
    def started(self, key: str) -> None: ...
    def stage(self, key: str, text: str) -> None: ...
    def finished(self, record: InstanceRecord) -> None: ...
    def message(self, text: str) -> None: ...


class SilentEvents:
    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int, *, epochs: int = 1) -> None: ...
    def started(self, key: str) -> None: ...
    def stage(self, key: str, text: str) -> None: ...
    def finished(self, record: InstanceRecord) -> None: ...
    def message(self, text: str) -> None: ...


def resuming(finished: int, pending: int, epochs: int) -> str:
    what = "instance(s)" if epochs == 1 else "attempt(s)"
    return f"resuming: {finished} {what} already finished, {pending} to run"


class LineEvents(SilentEvents):
    """One line per finished attempt on `stream`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.done = self.total = self.resolved = 0

    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int, *, epochs: int = 1) -> None:
        self.total, self.done = total, len(finished)
        self.resolved = sum(r.resolved for r in finished.values())
        if finished:
            self.message(resuming(len(finished), pending, epochs))

    def finished(self, record: InstanceRecord) -> None:
        with self.lock:
            self.done += 1
            self.resolved += record.resolved
            extra = f" ({record.error})" if record.error else ""
            self.stream.write(escape_unsafe(f"[{self.done}/{self.total}] {record.key}: {record.status}"
                                            f"{extra} in {record.duration:.1f}s; resolved so far "
                                            f"{self.resolved}") + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        with self.lock:
            self.stream.write(escape_unsafe(text) + "\n")
            self.stream.flush()


class LiveEvents(SilentEvents):
    """A live bar and the running attempts, redrawn a few times a second."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lock = threading.Lock()
        self.running: dict[str, tuple[str, float]] = {}
        self.resolved = 0
        self.bar = Progress(TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("resolved {task.fields[resolved]}"), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self.task = self.bar.add_task("eval", total=0, resolved=0)
        self.live = Live(console=console, refresh_per_second=4, get_renderable=self._render, transient=True)

    def __enter__(self) -> LiveEvents:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()

    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int, *, epochs: int = 1) -> None:
        self.resolved = sum(r.resolved for r in finished.values())
        self.bar.update(self.task, total=total, completed=len(finished), resolved=self.resolved)
        if finished:
            self.message(resuming(len(finished), pending, epochs))

    def started(self, key: str) -> None:
        with self.lock:
            self.running[key] = ("starting", time.monotonic())

    def stage(self, key: str, text: str) -> None:
        with self.lock:
            since = self.running.get(key, ("", time.monotonic()))[1]
            self.running[key] = (text, since)

    def finished(self, record: InstanceRecord) -> None:
        with self.lock:
            self.running.pop(record.key, None)
            self.resolved += record.resolved
            self.bar.update(self.task, advance=1, resolved=self.resolved)
        style = {"resolved": "green", "error": "red"}.get(record.status, "yellow")
        self.console.print(_text(f"{record.key}: {record.status} in {record.duration:.1f}s"
                                 + (f" ({record.error})" if record.error else ""), style=style))

    def message(self, text: str) -> None:
        self.console.print(_text(text))

    def _render(self) -> Group:
        with self.lock:
            rows = sorted(self.running.items(), key=lambda kv: kv[1][1])
        lines = [_text(f"  {iid}: {stage[:70]} ({time.monotonic() - since:.0f}s)", style="dim")
                 for iid, (stage, since) in rows]
        return Group(self.bar, *lines)


def summary_table(report: dict[str, object]) -> Table:
    """The per-instance table and the totals shown at the end of `harness eval` (with several epochs the
    statuses are epoch 1's, and `passes` counts the resolved of the graded attempts)."""
    agent = f" run by the agent {report['agent']}" if report.get("agent") else ""
    table = Table(title=_text(f"evaluation of {report['model_name_or_path']}{agent}"))
    attempts, epochs = report.get("attempts"), report.get("epochs")
    several = isinstance(epochs, int) and epochs > 1
    passes = attempts.get("per_instance", {}) if isinstance(attempts, dict) and several else {}
    for column in ("instance", "status", *(["passes"] if passes else []), "seconds", "turns", "tokens in/out",
                   "cost $"):
        table.add_column(column, justify="left" if column in ("instance", "status") else "right")
    instances = report["instances"]
    assert isinstance(instances, dict)
    for iid, row in sorted(instances.items()):
        tokens = row.get("tokens") or {}
        cost = row.get("cost_usd")
        counts = passes.get(iid) or {}
        table.add_row(_text(iid), _text(row["status"] + (" (flaky)" if row.get("flaky") else "")),
                      *([f"{counts.get('passed', '?')}/{counts.get('graded', '?')}"] if passes else []),
                      f"{row['duration']:.1f}",
                      str(row.get("turns") if row.get("turns") is not None else "-"),
                      f"{tokens.get('input_tokens', 0)}/{tokens.get('output_tokens', 0)}" if tokens else "-",
                      f"{cost:.4f}" if isinstance(cost, (int, float)) else "unknown")
    table.caption = _text(f"submitted {report['submitted_instances']}, completed {report['completed_instances']}, "
                          f"resolved {report['resolved_instances']}, unresolved {report['unresolved_instances']} "
                          f"(patch failed {report['patch_failed_instances']}), empty patch "
                          f"{report['empty_patch_instances']}, errors {report['error_instances']}, "
                          f"unsupported {report.get('unsupported_instances', 0)}, "
                          f"incomplete {report['incomplete_instances']}, flaky {report['flaky_instances']}")
    return table


def repository_summary(report: dict[str, object]) -> Table | None:
    """The per-repository table (instances, resolved, unresolved, unsupported, errors, time); None when
    the run has a single repository or none."""
    repos = report.get("repositories")
    if not isinstance(repos, dict) or len(repos) < 2:
        return None
    table = Table(title="by repository")
    columns = ("instances", "resolved", "unresolved", "unsupported", "errors", "empty_patch")
    for column in ("repository", *columns, "seconds"):
        table.add_column(column.replace("_", " "), justify="left" if column == "repository" else "right")
    for repo, row in repos.items():
        table.add_row(_text(repo), *(str(row.get(c, 0)) for c in columns), f"{row.get('time', 0.0):.0f}")
    return table


def attempts_summary(report: dict[str, object]) -> list[str]:
    """pass@1 with its 95% interval, pass@k, the flipped instances and those left out, as lines; none
    when the report has no statistics (no graded attempt, or written before them)."""
    a = report.get("attempts")
    if not isinstance(a, dict) or a.get("pass_at_1") is None:
        return []
    low, high = a.get("pass_at_1_ci") or ("?", "?")
    epochs = a.get("epochs") or 1
    lines = [f"pass@1 {a['pass_at_1']:.3f} (95% CI {low:.3f} to {high:.3f}, {a.get('ci_method')}, effective n "
             f"{a.get('effective_n')}; {a.get('instances_counted')} instance(s) x {epochs} epoch(s), "
             f"{a.get('attempts_done')} of {a.get('attempts_total')} attempts finished)"]
    at_k = a.get("pass_at_k") or {}
    if isinstance(at_k, dict) and len(at_k) > 1:
        lines.append("  ".join(f"pass@{k} {v:.3f}" for k, v in at_k.items() if k != "1"))
    if epochs > 1:
        flipped = a.get("flipped_ids") or []
        lines.append(f"flipped between epochs ({len(flipped)}): {', '.join(flipped) if flipped else 'none'}")
    left = a.get("left_out") or {}
    if isinstance(left, dict) and left:
        lines.append(f"left out of the statistics ({len(left)}): "
                     + "; ".join(f"{iid} ({why})" for iid, why in sorted(left.items())[:10]))
    return lines
