"""What the web console reads: run folders (`harness run`), evaluation folders (`harness eval`) and the
trajectories inside them, as JSON-ready views.

Everything read here was written by a model or by an input file at some point, so every string of
every view passes through `safe_tree` (the project's one escaping rule, `safe_text`) before it
leaves; the page then sets it as text, never as markup. Files are opened without following links,
only when they are regular files, and read up to a cap: a planted link or fifo, or a gigabyte of
test output, cannot make the console read what it should not or stall.

A run is a folder holding `trajectory.jsonl` or `result.json`; an evaluation is a folder holding
`run.json` and `report.json` or `instances/`. They are found below the console's roots (by default
`./runs` and the state folder's `runs`), at most `MAX_DEPTH` folders down, links never followed.
A run or evaluation is named in URLs by its root's number and its path below that root (`0/demo-...`),
resolved with `checks.child`, which refuses `..`, absolute paths and links on the way.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from harness import checks
from harness.errors import HarnessError, UnsafePathError
from harness.outputs import recorded_outputs
from harness.tools.outbound.preview import safe_text

MAX_DEPTH = 3
TEXT_CAP = 4_000_000          # bytes of a patch, test output or result read for a view
FOLD_LINES = (60, 30)         # a longer text block is sent as its first and last lines, with the count between
FOLD_CHARS = 60_000           # and one longer than this, whatever its lines, as its head and tail characters
LIVE_SECONDS = 120            # a run without result.json whose trajectory changed this recently is "running"
STEP_PAGE = 200
TEST_OUTPUTS = ("tests.txt", "test_output.txt")
INSTANCE_STATUSES = ("resolved", "unresolved", "patch_failed", "empty_patch", "error", "unsupported")


class NotFound(HarnessError):
    """A run, evaluation or file the request names does not exist (or may not be read)."""


def safe_tree(value: Any) -> Any:
    """`value` (parsed JSON) with every string, keys included, through `safe_text`."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): safe_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_tree(v) for v in value]
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def safe_dict(value: dict[str, Any]) -> dict[str, Any]:
    return _dict(safe_tree(value))


def read_capped(path: Path, cap: int = TEXT_CAP) -> tuple[bytes, int] | None:
    """The first `cap` bytes of the regular file `path` and its whole size; None when it is missing."""
    f = open_regular(path)
    if f is None:
        return None
    with f:
        return f.read(cap), os.fstat(f.fileno()).st_size


def open_regular(path: Path) -> BinaryIO | None:
    """`path` open for reading; None when it is missing. A link is never followed and anything but a
    regular file (a fifo, a device) is refused, without blocking on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotFound(f"{path.name} cannot be read: {exc.strerror} (links are not followed)") from exc
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise NotFound(f"{path.name} is not a regular file; not read")
    return f


def read_text(path: Path, cap: int = TEXT_CAP) -> dict[str, Any] | None:
    """A text file as a view: its escaped text (the first `cap` bytes), size and whether it was cut; or
    why it was not read (a link, a fifo) as `refused`."""
    try:
        got = read_capped(path, cap)
    except NotFound as exc:
        return {"text": "", "bytes": 0, "cut": False, "refused": safe_text(str(exc))}
    if got is None:
        return None
    data, size = got
    return {"text": safe_text(data.decode("utf-8", errors="backslashreplace").replace("\r\n", "\n")),
            "bytes": size, "cut": size > len(data)}


def read_json(path: Path) -> Any:
    try:
        got = read_capped(path)
    except NotFound:
        return None
    if got is None:
        return None
    try:
        return json.loads(got[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def fold(text: str) -> dict[str, Any]:
    """A text block as the page shows it: whole when short; else its head and tail with what is between
    counted (the page fetches the whole block on demand)."""
    lines = text.split("\n")
    head, tail = FOLD_LINES
    out: dict[str, Any] = {"chars": len(text), "lines": len(lines)}
    if len(lines) > head + tail:
        out.update(head="\n".join(lines[:head]), tail="\n".join(lines[-tail:]), omitted_lines=len(lines) - head - tail)
        text = out["head"] + out["tail"]
    else:
        out["text"] = text
    if len(text) > FOLD_CHARS:
        whole = text if "text" in out else "\n".join(lines)
        out.pop("text", None)
        out.update(head=whole[: FOLD_CHARS // 2], tail=whole[-FOLD_CHARS // 4:],
                   omitted_chars=len(whole) - FOLD_CHARS // 2 - FOLD_CHARS // 4)
        out.pop("omitted_lines", None)
    return out


@dataclass
class Roots:
    """The folders the console shows, numbered in the order given; with `state_dir`, each output
    folder `harness run`/`eval` records there (`harness.outputs`) and that is not below a root is added
    as a root of its own when the list is read, numbered after the others (numbers never change)."""
    paths: list[Path]
    state_dir: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refresh(self) -> None:
        if self.state_dir is None:
            return
        recorded = recorded_outputs(self.state_dir)
        with self._lock:
            for folder in recorded:
                if not any(folder == p or folder.is_relative_to(p) for p in self.paths):
                    self.paths.append(folder)

    def resolve(self, ref: str) -> Path:
        """The folder named `ref` ("N/path/below/root"), refused when it climbs out or crosses a link."""
        number, _, rel = ref.partition("/")
        if number.isdigit() and int(number) >= len(self.paths):
            self.refresh()
        if not number.isdigit() or int(number) >= len(self.paths):
            raise NotFound(f"no run {ref!r}: expected ROOT/PATH with ROOT one of 0..{len(self.paths) - 1}, "
                           "e.g. \"0/demo-20261201-101500\"")
        root = self.paths[int(number)]
        if not rel:
            return root
        try:
            folder = checks.child(root, rel)
        except UnsafePathError as exc:
            raise NotFound(str(exc)) from exc
        if not folder.is_dir() or folder.is_symlink():
            raise NotFound(f"no run {ref!r}: {folder} is not a folder")
        return folder

    def walk(self) -> Iterator[tuple[str, Path, str]]:
        """(ref, folder, kind) of every run and evaluation below the roots (or a root that is one itself,
        such as a recorded output folder); kind "run" or "eval"."""
        self.refresh()
        for number, root in enumerate(self.paths):
            if not root.is_dir() or root.is_symlink():
                continue
            kind = folder_kind(root)
            if kind is not None:
                yield str(number), root, kind
            else:
                yield from _walk(root, str(number), 0)


def folder_kind(folder: Path) -> str | None:
    names = _names(folder)
    if "run.json" in names and ("report.json" in names or "instances" in names):
        return "eval"
    if "trajectory.jsonl" in names or "result.json" in names or "done" in names:
        return "run"       # an agent session, or an evaluation's instance (graded predictions have no session)
    return None


def _names(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _walk(folder: Path, ref: str, depth: int) -> Iterator[tuple[str, Path, str]]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
            continue
        path, child_ref = Path(entry.path), f"{ref}/{entry.name}"
        kind = folder_kind(path)
        if kind is not None:
            yield child_ref, path, kind
        elif depth + 1 < MAX_DEPTH:
            yield from _walk(path, child_ref, depth + 1)


def _mtime(path: Path) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def _last_meta(path: Path) -> dict[str, Any]:
    """The meta of the last whole line of a trajectory (read from its end only)."""
    try:
        opened = open_regular(path)
    except NotFound:
        return {}
    if opened is None:
        return {}
    with opened as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 262_144))
        got = f.read()
    for line in reversed(got.split(b"\n")):
        try:
            meta = json.loads(line).get("meta")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            continue
        return meta if isinstance(meta, dict) else {}
    return {}


def run_summary(ref: str, folder: Path) -> dict[str, Any]:
    """One line of the runs list (a `harness run` folder or an evaluation's instance)."""
    result = read_json(folder / "result.json")
    record = read_json(folder / "done")                # an evaluation's instance: its graded record
    trajectory = folder / "trajectory.jsonl"
    changed = _mtime(trajectory) or _mtime(folder) or 0.0
    row: dict[str, Any] = {"ref": ref, "kind": "run", "name": folder.name, "changed": changed}
    if isinstance(result, dict):
        usage = _dict(result.get("usage"))
        row.update(task=result.get("task"), model=result.get("model"), stop_reason=result.get("stop_reason"),
                   tests_passed=result.get("tests_passed"), turns=result.get("turns"),
                   tokens={"input": usage.get("input_tokens"), "output": usage.get("output_tokens")},
                   cost_usd=result.get("cost_usd"),
                   seconds=_dict(result.get("durations")).get("total"),
                   finished_at=result.get("finished_at"), state="finished")
    elif isinstance(record, dict):
        row.update(task=record.get("instance_id"), model=record.get("model_name_or_path"),
                   stop_reason=record.get("stop_reason"), turns=record.get("turns"), seconds=record.get("duration"),
                   cost_usd=record.get("cost_usd"), state="finished")
    else:
        meta = _last_meta(trajectory)
        row.update(task=folder.name.rsplit("-", 2)[0], turns=meta.get("turn"),
                   state="running" if time.time() - changed < LIVE_SECONDS else "stopped")
    if isinstance(record, dict):
        row.update(status=record.get("status"), tests_passed=record.get("tests_resolved"))
    return safe_dict(row)


def eval_summary(ref: str, folder: Path) -> dict[str, Any]:
    """One line of the runs list for an evaluation: its totals."""
    report = read_json(folder / "report.json")
    settings = read_json(folder / "run.json")
    row: dict[str, Any] = {"ref": ref, "kind": "eval", "name": folder.name,
                           "changed": _mtime(folder / "report.json") or _mtime(folder) or 0.0}
    if isinstance(settings, dict):
        row["model"] = _dict(settings.get("settings")).get("model")
    if isinstance(report, dict):
        totals = _dict(report.get("totals"))
        tokens = _dict(totals.get("tokens"))
        row.update(model=row.get("model") or report.get("model_name_or_path"),
                   task=f"{report.get('total_instances', '?')} instances",
                   resolved=report.get("resolved_instances"), total=report.get("total_instances"),
                   turns=totals.get("turns"), cost_usd=totals.get("cost_usd"), seconds=totals.get("duration"),
                   tokens={"input": tokens.get("input_tokens"), "output": tokens.get("output_tokens")},
                   state="finished" if not report.get("incomplete_instances") else "incomplete")
    else:
        row.update(task="(no report yet)", state="running")
    return safe_dict(row)


def list_runs(roots: Roots) -> list[dict[str, Any]]:
    rows = [run_summary(ref, folder) if kind == "run" else eval_summary(ref, folder)
            for ref, folder, kind in roots.walk()]
    return sorted(rows, key=lambda r: -float(r.get("changed") or 0))


# ---------------------------------------------------------------- one run


def run_view(roots: Roots, ref: str) -> dict[str, Any]:
    """Everything about one run but its steps: result.json, the patch, the test output, attempts."""
    folder = roots.resolve(ref)
    if folder_kind(folder) != "run":
        raise NotFound(f"{ref!r} is not a run folder (it holds no trajectory.jsonl or result.json)")
    result = read_json(folder / "result.json")
    names = _names(folder)
    tests = next((read_text(folder / n) for n in TEST_OUTPUTS if n in names), None)
    instance = folder.parent.name == "instances" and folder_kind(folder.parent.parent) == "eval"
    return {"summary": run_summary(ref, folder), "result": safe_tree(result),
            "patch": read_text(folder / "patch.diff"), "tests": tests,
            "patch_apply": read_text(folder / "patch_apply.txt"), "error": read_text(folder / "error.txt"),
            "record": safe_tree(read_json(folder / "done")),
            "attempts": sorted(safe_text(f"{ref}/{n}") for n in names if n.startswith("attempt-")
                               and folder_kind(folder / n) == "run"),
            "evaluation": safe_text(ref.rsplit("/instances/", 1)[0]) if instance else None,
            "files": sorted(safe_text(n) for n in names)}


@dataclass
class _Index:
    inode: int
    scanned: int                      # bytes of the file looked at for newlines
    offsets: list[int] = field(default_factory=list)   # where each whole line starts; ends at `scanned`


class Trajectories:
    """Line offsets of the trajectories the console has opened, extended as a live run appends:
    a page of steps is read by seeking, never by reading the whole file again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[Path, _Index] = {}

    def _index(self, path: Path) -> tuple[_Index, int]:
        opened = open_regular(path)
        if opened is None:
            return _Index(0, 0, [0]), 0
        with opened as f:
            info = os.fstat(f.fileno())
            with self._lock:
                index = self._indexes.get(path)
                if index is None or index.inode != info.st_ino or info.st_size < index.scanned:
                    index = self._indexes[path] = _Index(info.st_ino, 0, [0])
                if info.st_size > index.scanned:
                    f.seek(index.scanned)
                    position = index.scanned
                    while chunk := f.read(1 << 20):
                        start = 0
                        while (hit := chunk.find(b"\n", start)) >= 0:
                            index.offsets.append(position + hit + 1)
                            start = hit + 1
                        position += len(chunk)
                    index.scanned = index.offsets[-1]
                return index, info.st_size

    def count(self, path: Path) -> int:
        return len(self._index(path)[0].offsets) - 1

    def lines(self, path: Path, start: int, limit: int) -> list[tuple[int, bytes]]:
        index, _ = self._index(path)
        end = min(len(index.offsets) - 1, start + limit)
        if start >= end:
            return []
        opened = open_regular(path)
        if opened is None:
            return []
        with opened as f:
            f.seek(index.offsets[start])
            data = f.read(index.offsets[end] - index.offsets[start])
        return [(start + i, line) for i, line in enumerate(data.split(b"\n")[: end - start])]


def _step(number: int, raw: bytes) -> dict[str, Any]:
    """One trajectory line as the page shows it: blocks with long texts folded, tool timings joined."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return {"index": number, "role": "invalid", "blocks": [
            {"type": "text", **fold(safe_text(f"line {number + 1} is not JSON ({exc}): "
                                              + raw[:2000].decode("utf-8", "backslashreplace")))}]}
    if not isinstance(data, dict):
        data = {"role": "invalid", "content": [{"type": "text", "text": repr(data)[:2000]}]}
    meta = _dict(data.get("meta"))
    timings = {str(t.get("id")): t for t in meta.get("tools", []) if isinstance(t, dict)}
    content = data.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for i, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "block": i, **fold(safe_text(str(block.get("text", ""))))})
        elif kind == "tool_use":
            arguments = block.get("input")
            blocks.append({"type": "tool_use", "block": i, "id": safe_text(str(block.get("id", ""))),
                           "name": safe_text(str(block.get("name", ""))),
                           "input": fold(safe_text(json.dumps(arguments, indent=2, ensure_ascii=False)))})
        elif kind == "tool_result":
            call = str(block.get("tool_use_id", ""))
            timing = timings.get(call, {})
            blocks.append({"type": "tool_result", "block": i, "tool_use_id": safe_text(call),
                           "is_error": bool(block.get("is_error")), "error_kind": safe_tree(block.get("error_kind")),
                           "name": safe_tree(timing.get("name")), "seconds": timing.get("seconds"),
                           "details": safe_tree(timing.get("details")),
                           **fold(safe_text(str(block.get("content", ""))))})
    step_meta = {k: meta[k] for k in ("turn", "stop_reason", "usage") if k in meta}
    return {"index": number, "role": safe_text(str(data.get("role", "?"))), "meta": safe_tree(step_meta),
            "blocks": blocks}


def steps_view(roots: Roots, trajectories: Trajectories, ref: str, start: int,
               limit: int = STEP_PAGE) -> dict[str, Any]:
    """Steps `start`.. of a run's trajectory, the whole count, and whether the run is still going."""
    folder = roots.resolve(ref)
    path = folder / "trajectory.jsonl"
    total = trajectories.count(path)
    steps = [_step(n, raw) for n, raw in trajectories.lines(path, max(0, start), max(1, min(limit, 1000)))]
    changed = _mtime(path) or 0.0
    live = not (folder / "result.json").exists() and time.time() - changed < LIVE_SECONDS
    return {"total": total, "start": start, "steps": steps, "live": live}


def block_view(roots: Roots, trajectories: Trajectories, ref: str, line: int, block: int) -> dict[str, Any]:
    """The whole text of one block (a folded output), escaped, capped at TEXT_CAP characters."""
    path = roots.resolve(ref) / "trajectory.jsonl"
    got = trajectories.lines(path, line, 1)
    if not got:
        raise NotFound(f"the trajectory of {ref!r} has no line {line}")
    try:
        data = json.loads(got[0][1])
        content = data["content"][block]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as exc:
        raise NotFound(f"line {line} of {ref!r} has no block {block}") from exc
    if content.get("type") == "tool_use":
        text = json.dumps(content.get("input"), indent=2, ensure_ascii=False)
    else:
        text = str(content.get("text", content.get("content", "")))
    return {"text": safe_text(text[:TEXT_CAP]), "chars": len(text), "cut": len(text) > TEXT_CAP}


# ---------------------------------------------------------------- evaluations


def eval_view(roots: Roots, ref: str) -> dict[str, Any]:
    """An evaluation's report: totals, the per-instance table (with links to each instance's run), the
    per-repository table and the instance times."""
    folder = roots.resolve(ref)
    if folder_kind(folder) != "eval":
        raise NotFound(f"{ref!r} is not an evaluation folder (it holds no run.json with report.json)")
    report = _dict(read_json(folder / "report.json"))
    instances = _dict(report.get("instances"))
    present = _names(folder / "instances")
    rows = []
    for iid, row in sorted(instances.items()):
        if not isinstance(row, dict):
            continue
        rows.append({"instance_id": iid, "status": row.get("status"), "repo": row.get("repo") or "(none)",
                     "duration": row.get("duration"), "turns": row.get("turns"), "cost_usd": row.get("cost_usd"),
                     "stop_reason": row.get("stop_reason"), "error": row.get("error"), "flaky": row.get("flaky"),
                     "run": f"{ref}/instances/{iid}" if iid in present else None})
    for iid in report.get("incomplete_ids") or []:
        rows.append({"instance_id": iid, "status": "incomplete", "repo": "(none)",
                     "run": f"{ref}/instances/{iid}" if iid in present else None})
    keys = [k for k in report if k.endswith("_instances")]
    return safe_dict({"summary": eval_summary(ref, folder), "totals": {k: report[k] for k in keys},
                      "model": report.get("model_name_or_path"), "instances": rows,
                      "repositories": _repositories(rows), "settings": read_json(folder / "run.json")})


def _repositories(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = table.setdefault(str(row["repo"]), {})
        counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
    return dict(sorted(table.items()))


def compare_view(roots: Roots, a: str, b: str) -> dict[str, Any]:
    """Two evaluations side by side: each instance's status in both, the ones that flipped first."""
    left, right = eval_view(roots, a), eval_view(roots, b)
    by_a = {r["instance_id"]: r for r in left["instances"]}
    by_b = {r["instance_id"]: r for r in right["instances"]}
    rows = []
    for iid in sorted(set(by_a) | set(by_b)):
        sa, sb = (by_a.get(iid) or {}).get("status"), (by_b.get(iid) or {}).get("status")
        was, now = sa == "resolved", sb == "resolved"
        change = ("fixed" if now and not was else "broken" if was and not now
                  else "same" if sa == sb else "changed")
        rows.append({"instance_id": iid, "a": sa, "b": sb, "change": change,
                     "run_a": (by_a.get(iid) or {}).get("run"), "run_b": (by_b.get(iid) or {}).get("run")})
    order = {"broken": 0, "fixed": 1, "changed": 2, "same": 3}
    rows.sort(key=lambda r: (order[r["change"]], r["instance_id"]))
    counts = {k: sum(1 for r in rows if r["change"] == k) for k in order}
    return {"a": left["summary"], "b": right["summary"], "rows": rows, "counts": counts}
