"""Progress of a batch evaluation: what the runner reports, and a live rich display of it.

`LiveEvents` shows a bar (done/total, resolved so far, ETA) and the running instances with their
current stage; `LineEvents` prints one line per finished instance (for logs and non-terminals).
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
    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int) -> None: ...
    def started(self, instance_id: str) -> None: ...
    def stage(self, instance_id: str, text: str) -> None: ...
    def finished(self, record: InstanceRecord) -> None: ...
    def message(self, text: str) -> None: ...


class SilentEvents:
    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int) -> None: ...
    def started(self, instance_id: str) -> None: ...
    def stage(self, instance_id: str, text: str) -> None: ...
    def finished(self, record: InstanceRecord) -> None: ...
    def message(self, text: str) -> None: ...


class LineEvents(SilentEvents):
    """One line per finished instance on `stream`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()
        self.done = self.total = self.resolved = 0

    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int) -> None:
        self.total, self.done = total, len(finished)
        self.resolved = sum(r.resolved for r in finished.values())
        if finished:
            self.message(f"resuming: {len(finished)} instance(s) already finished, {pending} to run")

    def finished(self, record: InstanceRecord) -> None:
        with self.lock:
            self.done += 1
            self.resolved += record.resolved
            extra = f" ({record.error})" if record.error else ""
            self.stream.write(escape_unsafe(f"[{self.done}/{self.total}] {record.instance_id}: {record.status}"
                                            f"{extra} in {record.duration:.1f}s; resolved so far "
                                            f"{self.resolved}") + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        with self.lock:
            self.stream.write(escape_unsafe(text) + "\n")
            self.stream.flush()


class LiveEvents(SilentEvents):
    """A live bar and the running instances, redrawn a few times a second."""

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

    def begin(self, total: int, finished: Mapping[str, InstanceRecord], pending: int) -> None:
        self.resolved = sum(r.resolved for r in finished.values())
        self.bar.update(self.task, total=total, completed=len(finished), resolved=self.resolved)
        if finished:
            self.message(f"resuming: {len(finished)} instance(s) already finished, {pending} to run")

    def started(self, instance_id: str) -> None:
        with self.lock:
            self.running[instance_id] = ("starting", time.monotonic())

    def stage(self, instance_id: str, text: str) -> None:
        with self.lock:
            since = self.running.get(instance_id, ("", time.monotonic()))[1]
            self.running[instance_id] = (text, since)

    def finished(self, record: InstanceRecord) -> None:
        with self.lock:
            self.running.pop(record.instance_id, None)
            self.resolved += record.resolved
            self.bar.update(self.task, advance=1, resolved=self.resolved)
        style = {"resolved": "green", "error": "red"}.get(record.status, "yellow")
        self.console.print(_text(f"{record.instance_id}: {record.status} in {record.duration:.1f}s"
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
    """The per-instance table and the totals shown at the end of `harness eval`."""
    table = Table(title=_text(f"evaluation of {report['model_name_or_path']}"))
    for column in ("instance", "status", "seconds", "turns", "tokens in/out", "cost $"):
        table.add_column(column, justify="left" if column in ("instance", "status") else "right")
    instances = report["instances"]
    assert isinstance(instances, dict)
    for iid, row in sorted(instances.items()):
        tokens = row.get("tokens") or {}
        cost = row.get("cost_usd")
        table.add_row(_text(iid), _text(row["status"] + (" (flaky)" if row.get("flaky") else "")),
                      f"{row['duration']:.1f}",
                      str(row.get("turns") if row.get("turns") is not None else "-"),
                      f"{tokens.get('input_tokens', 0)}/{tokens.get('output_tokens', 0)}" if tokens else "-",
                      f"{cost:.4f}" if isinstance(cost, (int, float)) else "-")
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
