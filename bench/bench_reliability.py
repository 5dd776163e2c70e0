"""Reliability under kill -9 and a dead sandbox, printed (not asserted):

    .venv/bin/python bench/bench_reliability.py [--only containers|outbound|dead] [--trials 200] [--seed 1]

1. containers: `harness run tasks/wordcount --model scripted:wordcount-fix`, `harness exec --dir
   tasks/wordcount/repo -- sleep 5`, `harness mcp --dir tasks/wordcount/repo --pool 1` with a client
   that opens a session and runs `sleep 3` through the bash tool, and `harness eval tasks/wordcount
   --pool 1` (the session, the pool refilling, the grading sandbox), and `harness eval` of a copy of
   tasks/wordcount whose environment is new each trial (a unique `install_cmd`: the wheelhouse, then
   `docker build` of the environment image and its RUN step containers), mixed (`--kinds`), each in its
   own process group, SIGKILLed after a random delay drawn over the whole life of an unkilled one
   (measured first): before the container exists, while it starts, mid-command, during the tests,
   grading and teardown. `--check-after` seconds after each kill (default 2): the containers (running,
   or created and never started), volumes and networks labelled with the killed process's pid, and
   host processes still carrying the trial's marker variable. No reaper is needed for a figure of 0:
   the daemon's events say how each container went, by itself (its lifeline: `die`, `destroy`) or
   killed by a removal (`kill` first: a reaper of another process, counted apart), and when, after
   the kill, the last one was destroyed. A build's RUN step containers belong to the daemon's builder
   (no owner labels): they are the harness-image containers without `harness.pid` created since the
   trial started, counted running or not. After all trials: `harness sandbox reap`, then what is left.
2. outbound: one approved `http_request` (tests/approval/call_outbound.py, a real harness process)
   to a counting server on 127.0.0.1 (this script's; it counts complete requests per trial id and
   answers after a random delay), approved by a policy rule or through the queue API, SIGKILLed at
   a random moment: by the clock, around the moment it sends, or after the server received it.
   Recovery is what a resumed session does: ask again with the same key (again after an expiry,
   at most 3 asks) until the answer is final. Per trial: executions counted by the server.

3. dead: a session (the real loop, the bash tool, a scripted model) whose first command the memory
   limit kills (exit 137; the container lives) and whose container is killed from outside during the
   second (`sleep 30`), at a random moment: how the session ends (goal: `sandbox_unavailable` with
   OOMKilled in the reason, one model call after the kill at most, every time), over min(trials, 20).

4. ray (`--only ray`, bench/reliability_ray.py; not part of the default run): `harness eval
   tasks/wordcount --backend ray` on a real one-node Ray cluster; at a random moment while a Ray worker
   holds the instance's containers, that worker process (not the node) is SIGKILLed: its containers
   running `--check-after` s later and how they went, over min(trials, 20).

The file is over 250 lines because the experiments share their plumbing (process groups,
marker scans, time budget, report); each experiment is a few short functions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.agent.loop import AgentLoop, StepEvent  # noqa: E402
from harness.approval.queue import ApprovalQueue  # noqa: E402
from harness.config import Config  # noqa: E402
from harness.core.task import load_task  # noqa: E402
from harness.environments.images import env_hash, sandbox_image  # noqa: E402
from harness.errors import ApprovalError  # noqa: E402
from harness.messages import system, user  # noqa: E402
from harness.models.scripted import ScriptedModel  # noqa: E402
from harness.tools.base import ToolContext  # noqa: E402
from harness.tools.catalog import default_catalog  # noqa: E402
from sandbox.api import Limits, SandboxSpec  # noqa: E402
from sandbox.docker_client import client_or_default  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402
from sandbox.reaper import MANAGED  # noqa: E402

MARKER = "HARNESS_BENCH_RELIABILITY"       # every trial process carries MARKER=<run token>-<trial>
CALLER = REPO / "tests" / "approval" / "call_outbound.py"
TASK = REPO / "tasks" / "wordcount"
RUN_ARGS = ["run", "tasks/wordcount", "--model", "scripted:wordcount-fix", "--approve", "deny"]
EXEC_ARGS = ["exec", "--dir", "tasks/wordcount/repo", "--", "sleep", "5"]
MCP_ARGS = ["mcp", "--dir", "tasks/wordcount/repo", "--pool", "1", "--approve", "deny"]
EVAL_ARGS = ["eval", "tasks/wordcount", "--model", "scripted:wordcount-fix", "--pool", "1", "--approve", "deny"]
BUILD_ARGS = ["eval", "--model", "scripted:wordcount-fix", "--approve", "deny"]
KINDS = ("run", "exec", "mcp", "eval", "build")
# an MCP client's session over stdio: open it, run `sleep 3` through the bash tool (then stdin closes)
MCP_MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "bash", "arguments": {"command": "sleep 3"}}},
]


def harness_argv() -> list[str]:
    script = REPO / ".venv" / "bin" / "harness"
    return [str(script)] if script.exists() else [sys.executable, "-m", "harness.cli.main"]


def spawn(argv: list[str], marker: str, env: dict[str, str], stderr: Any = subprocess.DEVNULL,
          stdout: Any = subprocess.DEVNULL, stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """A child in its own process group (so a kill reaches all of it), tagged with the marker."""
    return subprocess.Popen(argv, cwd=REPO, stdin=stdin, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), MARKER: marker, **env})


def kill_group(proc: subprocess.Popen[str]) -> bool:
    """SIGKILL the child's whole process group; True when it was still running."""
    alive = proc.poll() is None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    return alive


def marked_processes(prefix: str) -> list[str]:
    """Host processes (any user we may read) whose environment holds MARKER=prefix..."""
    needle = f"{MARKER}={prefix}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            if any(item.startswith(needle) for item in environ.split(b"\0")):
                cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {cmd.strip()[:120]}")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


# ---- 1. containers -------------------------------------------------------------------------------
@dataclass
class ContainerTrial:
    number: int
    kind: str                  # run | exec | mcp | eval
    delay: float               # seconds after start when the SIGKILL is sent
    fraction: float = 0.0      # delay / calibrated life
    killed: bool = False       # False: it ended on its own before the delay
    phase: str = ""
    pid: int = 0
    at_kill: list[str] = field(default_factory=list)     # kinds of its containers just before the kill
    left: list[str] = field(default_factory=list)        # docker objects labelled with its pid, N s after
    processes: list[str] = field(default_factory=list)   # host processes still carrying its marker
    force_removed: list[str] = field(default_factory=list)   # its containers killed by a removal (a reaper's)
    gone_after: float = -1.0   # seconds from the kill until its last container was destroyed (-1: none had one)


class DockerEvents:
    """The daemon's container events of harness containers, as they come (a thread reads them), so a trial
    can tell how its containers went: on their own (`die`, then `destroy`: the lifeline) or killed by a
    removal (`kill` first: a reaper, which the figure must not count as the lifeline's work)."""

    def __init__(self, client: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stream = client.events(decode=True, filters={"type": "container", "label": [f"{MANAGED}=true"]})
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for event in self.stream:
                with self.lock:
                    self.events.append(event)
        except Exception:  # noqa: BLE001 - the stream ends when closed at the end of the run
            return

    def of(self, pid: int, since: float) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if (e.get("Actor") or {}).get("Attributes", {}).get("harness.pid")
                    == str(pid) and e.get("timeNano", 0) / 1e9 >= since]

    def close(self) -> None:
        self.stream.close()


def judge_departures(trial: ContainerTrial, events: DockerEvents, killed_at: float) -> None:
    """From the events after the kill: which of the trial's containers a removal killed, and when the last
    one was destroyed."""
    mine = events.of(trial.pid, killed_at)
    trial.force_removed = sorted({(e.get("Actor") or {}).get("Attributes", {}).get("name", "?")
                                  for e in mine if e.get("Action") == "kill"})
    destroyed = [e["timeNano"] / 1e9 - killed_at for e in mine if e.get("Action") == "destroy"]
    trial.gone_after = max(destroyed) if destroyed else -1.0


class McpClient:
    """Speaks MCP_MESSAGES to a `harness mcp` child over its stdin, notes when each answer came, and closes
    stdin once the tool call is answered (the server then ends)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.answered: dict[int, float] = {}
        threading.Thread(target=self._talk, daemon=True).start()

    def _talk(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write("".join(json.dumps(m) + "\n" for m in MCP_MESSAGES))
            self.proc.stdin.flush()
            for line in self.proc.stdout:
                ident = json.loads(line).get("id") if line.startswith("{") else None
                if isinstance(ident, int):
                    self.answered[ident] = time.monotonic()
                if ident == 2:
                    self.proc.stdin.close()
        except (OSError, ValueError):
            return   # killed: its pipes broke

    def phase(self) -> str:
        if 2 in self.answered:
            return "mcp: call answered, ending"
        if 1 in self.answered:
            return "mcp: session open (sandbox taken, pool refilling, mid-command)"
        return "mcp: starting (imports, pool filling)"


def labelled_objects(client: Any, pids: set[int]) -> list[str]:
    """Containers, volumes and networks labelled harness.managed whose owner pid is in `pids`."""
    host = socket.gethostname()

    def ours(labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        pid = labels.get("harness.pid", "")
        return labels.get("harness.host") == host and pid.isdigit() and int(pid) in pids

    selector = {"label": [f"{MANAGED}=true"]}
    found = [f"container {(c.get('Names') or [c['Id']])[0].lstrip('/')} ({c.get('State')})"
             for c in client.api.containers(all=True, filters=selector) if ours(c.get("Labels"))]
    found += [f"volume {v['Name']}" for v in client.api.volumes(filters=selector).get("Volumes") or []
              if ours(v.get("Labels"))]
    found += [f"network {n['Name']}" for n in client.api.networks(filters=selector) if ours(n.get("Labels"))]
    return found


def run_phase(stderr_file: Path, out_dir: Path) -> str:
    """Where a killed `harness run` was, from its phase lines on stderr and the files it wrote."""
    if (out_dir / "result.json").exists():
        return "run: result written, exiting"
    text = stderr_file.read_text(errors="replace") if stderr_file.exists() else ""
    for needle, phase in (("running the tests", "run: tests / teardown"), ("agent running", "run: agent loop"),
                          ("starting a sandbox", "run: sandbox starting"), ("environment", "run: image check")):
        if needle in text:
            if phase == "run: agent loop" and (out_dir / "trajectory.jsonl").exists():
                lines = (out_dir / "trajectory.jsonl").read_text(errors="replace").count("\n")
                return f"run: agent loop ({max(0, lines - 2)} message(s) after the task)"
            return phase
    return "run: before any output (imports, config)"


def exec_phase(fraction: float, ready: float) -> str:
    if fraction < ready:
        return "exec: before the command (imports, container start)"
    return "exec: mid-command (sleep 5)" if fraction < 0.97 else "exec: teardown / exit"


def trial_args(kind: str, out_dir: Path) -> list[str]:
    if kind == "build":
        return [BUILD_ARGS[0], str(fresh_environment_task(out_dir)), *BUILD_ARGS[1:], "--out", str(out_dir)]
    return {"run": RUN_ARGS + ["--out", str(out_dir)], "exec": EXEC_ARGS, "mcp": MCP_ARGS,
            "eval": EVAL_ARGS + ["--out", str(out_dir)]}[kind]


def fresh_environment_task(out_dir: Path) -> Path:
    """A copy of tasks/wordcount beside `out_dir` whose environment image does not exist yet: its
    `install_cmd` names a new token, so its environment hash, and tag, are new."""
    task = out_dir.with_name(f"{out_dir.name}-task") / "wordcount"
    shutil.rmtree(task.parent, ignore_errors=True)
    shutil.copytree(TASK, task, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    spec = json.loads((task / "task.json").read_text())
    spec["install_cmd"] = f"echo {uuid.uuid4().hex} > /tmp/build-token && sleep 2"
    (task / "task.json").write_text(json.dumps(spec))
    BUILT_TAGS.append(f"harness-env:{env_hash(load_task(task), sandbox_image(Config(), spec['python']))}")
    return task


BUILT_TAGS: list[str] = []      # the environment images the build trials make, removed at the end


def remove_built_images(client: Any) -> None:
    removed = 0
    for tag in BUILT_TAGS:
        try:
            client.api.remove_image(tag, force=False)
            removed += 1
        except Exception:  # noqa: BLE001 - never built (killed first) or still in use: left to `sandbox prune`
            continue
    if BUILT_TAGS:
        print(f"  removed {removed} of the {len(BUILT_TAGS)} environment image(s) the build trials asked for")


ENV_STEPS = ("/opt/harness/env/", "command -v pip")   # in the Cmd of an environment build's step containers


def build_containers(client: Any, since: float) -> list[str]:
    """Step containers of an environment image's `docker build` created at or after `since`, with their
    state: harness-image containers without an owner label whose command is a step of the environment
    Dockerfile (the daemon is shared: another process's environment build would be counted too)."""
    found = []
    for c in client.api.containers(all=True, filters={"label": [f"{MANAGED}=true"]}):
        if "harness.pid" in (c.get("Labels") or {}) or c.get("Created", 0) < int(since):
            continue
        command = str(c.get("Command", ""))
        if any(step in command for step in ENV_STEPS):
            found.append(f"build container {(c.get('Names') or [c['Id']])[0].lstrip('/')} [{command[-50:]}] "
                         f"({c.get('State')})")
    return found


def kinds_running(client: Any, pid: int) -> list[str]:
    """The `harness.kind` of each running container labelled with owner `pid`."""
    return sorted((c.get("Labels") or {}).get("harness.kind", "?") for c in client.api.containers(
        filters={"label": [f"{MANAGED}=true", f"harness.pid={pid}"]}))


def start_trial(kind: str, argv: list[str], marker: str, work: Path,
                err_fh: Any) -> tuple[subprocess.Popen[str], McpClient | None]:
    env = {"HARNESS_STATE_DIR": str(work / "state")}
    if kind != "mcp":
        return spawn(argv, marker, env, stderr=err_fh), None
    proc = spawn(argv, marker, env, stderr=err_fh, stdout=subprocess.PIPE, stdin=subprocess.PIPE)
    return proc, McpClient(proc)


def one_container_trial(trial: ContainerTrial, token: str, work: Path, client: Any, ready: float,
                        events: DockerEvents, check_after: float) -> None:
    out_dir = work / f"run-{trial.number}"
    err = work / f"stderr-{trial.number}.txt"
    with err.open("w") as err_fh:
        proc, mcp = start_trial(trial.kind, harness_argv() + trial_args(trial.kind, out_dir),
                                f"{token}-{trial.number}", work, err_fh)
        trial.pid = proc.pid
        started = time.time()
        try:
            proc.wait(trial.delay)
        except subprocess.TimeoutExpired:
            trial.at_kill = kinds_running(client, proc.pid)
            if trial.kind == "build":
                trial.at_kill += [b for b in build_containers(client, started) if b.endswith("(running)")]
        killed_at = time.time()
        trial.killed = kill_group(proc)
    trial.phase = trial_phase(trial, err, out_dir, ready, mcp) if trial.killed \
        else f"{trial.kind}: ended before the kill (exit {proc.returncode})"
    time.sleep(check_after)   # the daemon's removal; also a create it was serving when the client died lands
    trial.left = labelled_objects(client, {trial.pid})
    if trial.kind == "build":
        trial.left += build_containers(client, started)
    trial.processes = marked_processes(f"{token}-{trial.number}")
    judge_departures(trial, events, killed_at)


def trial_phase(trial: ContainerTrial, err: Path, out_dir: Path, ready: float, mcp: McpClient | None) -> str:
    if trial.kind == "run":
        return run_phase(err, out_dir)
    if trial.kind == "exec":
        return exec_phase(trial.fraction, ready)
    if mcp is not None:
        return mcp.phase()
    if trial.kind == "build":
        return build_phase(err, trial.at_kill)
    return f"eval: containers up at the kill: {', '.join(trial.at_kill) or 'none'}"


def build_phase(err: Path, at_kill: list[str]) -> str:
    """Where a killed environment build was, from its progress lines and its containers at the kill."""
    text = err.read_text(errors="replace") if err.exists() else ""
    if "built harness-env" in text:
        return "build: built; session or grading"
    if any(b.startswith("build container") for b in at_kill):
        return "build: docker build, a step container running"
    if "building environment" in text:
        return "build: wheelhouse, or docker build between steps"
    return "build: before the build (imports, sandbox image check)"


def life_of(kind: str, token: str, work: Path) -> float:
    """Seconds an unkilled trial of `kind` lives (its images built first, outside the timing)."""
    life = 0.0
    for _attempt in range(2):   # the first may build an image; the second is the timed one
        out_dir = work / f"calibration-{kind}"
        shutil.rmtree(out_dir, ignore_errors=True)
        with (work / f"calibration-{kind}.txt").open("w") as err_fh:
            started = time.monotonic()
            proc, _ = start_trial(kind, harness_argv() + trial_args(kind, out_dir), f"{token}-cal", work, err_fh)
            code = proc.wait(1800)
            life = time.monotonic() - started
        if code not in (0, 1):
            raise SystemExit(f"calibration `harness {' '.join(trial_args(kind, out_dir))}` failed (exit {code}):\n"
                             f"{(work / f'calibration-{kind}.txt').read_text()[-3000:]}")
    return life


def containers(trials: int, seed: int, parallel: int, deadline: float, kinds: tuple[str, ...],
               check_after: float) -> dict[str, Any]:
    print(f"1. containers left after SIGKILL of `harness {' / '.join(kinds)}` at random points")
    client = client_or_default()
    token = f"{os.getpid()}-{int(time.time())}"
    work = Path(tempfile.mkdtemp(prefix="bench-reliability-"))
    done: list[ContainerTrial] = []
    plan: list[ContainerTrial] = []
    events = DockerEvents(client)
    try:
        lives = {kind: life_of(kind, token, work) for kind in kinds}
        ready = max(0.0, (lives["exec"] - 5.0) * 0.8) / lives["exec"] if "exec" in lives else 0.0
        print(f"  unkilled life: {', '.join(f'{k} {v:.1f} s' for k, v in lives.items())}; kill delay uniform in "
              f"[0, 1.1 x life]; {parallel} trial(s) at a time; counted {check_after:g} s after each kill")
        rng = random.Random(seed)
        for n in range(trials):
            kind = rng.choice(kinds)
            fraction = rng.uniform(0.0, 1.1)
            plan.append(ContainerTrial(n, kind, fraction * lives[kind], fraction))

        def work_on(trial: ContainerTrial) -> None:
            if time.monotonic() < deadline:
                one_container_trial(trial, token, work, client, ready, events, check_after)
                done.append(trial)
                if len(done) % 20 == 0:
                    print(f"  ... {len(done)} trials, {sum(len(t.left) for t in done)} object(s) left by kills",
                          flush=True)

        with ThreadPoolExecutor(max_workers=parallel) as pool:
            list(pool.map(work_on, plan))
        return container_report(client, done, token, lives, check_after)
    finally:
        events.close()
        final_cleanup(client, {t.pid for t in plan if t.pid}, token)
        remove_built_images(client)
        shutil.rmtree(work, ignore_errors=True)


def container_report(client: Any, done: list[ContainerTrial], token: str, lives: dict[str, float],
                     check_after: float) -> dict[str, Any]:
    pids = {t.pid for t in done}
    killed = [t for t in done if t.killed]
    left_by_kill = [t for t in done if t.left]
    departures(done, check_after)
    time.sleep(2.0)
    before = labelled_objects(client, pids)
    reaped = subprocess.run(harness_argv() + ["sandbox", "reap", "--json"], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    after = labelled_objects(client, pids)
    processes = marked_processes(token)
    print(f"  trials {len(done)} ({len(killed)} killed, {len(done) - len(killed)} ended before their kill)")
    for phase, n in sorted(Counter(t.phase for t in done).items()):
        print(f"    {n:4d}  {phase}  (left something: {sum(1 for t in done if t.phase == phase and t.left)})")
    print(f"  left by the kill (counted {check_after:g} s after each): {sum(len(t.left) for t in done)} "
          f"object(s) in "
          f"{len(left_by_kill)} trial(s); still there at the end, before reap: {len(before)}"
          + "".join(f"\n     {b}" for b in before))
    print(f"  `harness sandbox reap`: exit {reaped.returncode}, removed {reaped.stdout.strip()[:300] or '?'}")
    print(f"  => LEAKED AFTER REAP: {len(after)} (goal 0){': ' + ', '.join(after) if after else ''}")
    leftovers = sorted({p for t in done for p in t.processes} | set(processes))
    print(f"  => host processes left by the kills: {len(leftovers)} (goal 0)"
          + "".join(f"\n     {p}" for p in leftovers))
    return {"lives": lives, "trials": len(done), "killed": len(killed), "check_after": check_after,
            "running_left": sum(1 for t in done for x in t.left if x.endswith("(running)")),
            "force_removed": sum(len(t.force_removed) for t in done),
            "left_by_kill_objects": sum(len(t.left) for t in done), "left_by_kill_trials": len(left_by_kill),
            "before_final_reap": before, "after_reap": after, "host_processes": leftovers,
            "reap_exit": reaped.returncode, "per_trial": [asdict(t) for t in done]}


def departures(done: list[ContainerTrial], check_after: float) -> None:
    """How the killed trials' containers went: by themselves (the lifeline), or killed by a removal."""
    gone = [t.gone_after for t in done if t.killed and t.gone_after >= 0]
    forced = [t for t in done if t.force_removed]
    running = sum(1 for t in done for x in t.left if x.endswith("(running)"))
    created = sum(1 for t in done for x in t.left if x.endswith("(created)"))
    print(f"  => containers alive (running) {check_after:g} s after the kill: {running} (goal 0); created but "
          f"never started: {created}; other objects: "
          f"{sum(len(t.left) for t in done) - running - created}")
    print(f"  kill to the last container destroyed, over {len(gone)} killed trial(s) that had one: p50 "
          f"{pct(gone, 0.5):.2f} s, p95 {pct(gone, 0.95):.2f} s, max {max(gone, default=0):.2f} s")
    print(f"  containers a removal killed after the kill (a reaper's, another process's; not the lifeline): "
          f"{sum(len(t.force_removed) for t in forced)} in {len(forced)} trial(s)")


def final_cleanup(client: Any, pids: set[int], token: str) -> None:
    """Whatever the run ends with: no trial process, and no object of a trial, is left."""
    for line in marked_processes(token):
        pid = int(line.split(":", 1)[0])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(harness_argv() + ["sandbox", "reap"], cwd=REPO, capture_output=True, timeout=300)
    for thing in labelled_objects(client, pids):
        kind, name = thing.split()[:2]
        print(f"  cleanup: removing {kind} {name} that `harness sandbox reap` left")
        if kind == "container":
            client.api.remove_container(name, force=True, v=True)
        elif kind == "volume":
            client.api.remove_volume(name, force=True)
        else:
            client.api.remove_network(name)


# ---- 2. outbound ---------------------------------------------------------------------------------
@dataclass
class OutboundTrial:
    number: int
    variant: str               # policy: approved by a rule; queue: approved through the queue API
    trigger: str               # clock | near-send | after-arrival
    delay: float               # seconds (clock, near-send: after start; after-arrival: after the hit)
    answer_delay: float        # the server waits this long before answering
    killed: bool = False
    status_at_kill: str = ""   # the request's status in the queue right after the kill
    asks: int = 0              # recovery asks until a final answer
    outcome: str = ""          # what the last recovery ask answered
    executions: int = 0        # complete requests the server received for this trial's id

    @property
    def key(self) -> str:
        return f"{self.variant[0]}-{self.number}"


class CountingServer:
    """HTTP on 127.0.0.1 only: counts complete requests to /collect/ID, answers after ?delay=S."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.arrived: dict[str, threading.Event] = {}
        self.arrival_times: dict[str, float] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                parts = urlsplit(self.path)
                ident = parts.path.rsplit("/", 1)[-1]
                if len(body) != size:
                    return   # cut off before it was whole: not an execution
                with outer.lock:
                    outer.counts[ident] += 1
                    outer.arrival_times.setdefault(ident, time.monotonic())
                    outer.arrived.setdefault(ident, threading.Event()).set()
                time.sleep(float(parse_qs(parts.query).get("delay", ["0"])[0]))
                reply = f"hit {outer.counts[ident]} for {ident}".encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass   # the caller was killed while waiting for the answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, trial: OutboundTrial) -> str:
        return f"http://127.0.0.1:{self.port}/collect/{trial.key}?delay={trial.answer_delay:.3f}"

    def event(self, ident: str) -> threading.Event:
        with self.lock:
            return self.arrived.setdefault(ident, threading.Event())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class QueueApprover:
    """Approves pending requests whose key starts with `q-`, through the queue API (hash pinned).

    Its queue is the only one this process opens (`find` is shared under `lock`): a second
    ApprovalQueue object in one process made the first stop seeing other processes' writes."""

    def __init__(self, state: Path) -> None:
        self.queue = ApprovalQueue(state)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

        self.refused: Counter[str] = Counter()   # decisions the queue refused, by message head

    def _loop(self) -> None:
        while not self.stop.wait(0.02):
            with self.lock:
                for request in self.queue.requests(("pending",)):
                    if request.key.startswith("q-"):
                        try:
                            self.queue.decide(request.id, True, "bench", seen_hash=request.request_hash)
                        except ApprovalError as exc:   # changed or decided meanwhile: counted, next poll
                            self.refused[str(exc)[:100]] += 1

    def find(self, key: str) -> Any:
        with self.lock:
            return self.queue.find("http_request", key)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.queue.close()


def caller(trial: OutboundTrial, state: Path, server: CountingServer, policy: Path, token: str,
           timeout: float) -> tuple[list[str], str]:
    mode = "deny" if trial.variant == "policy" else "queue"
    argv = [sys.executable, str(CALLER), "--state-dir", str(state), "--mode", mode, "--url", server.url(trial),
            "--key", trial.key, "--body", trial.key, "--timeout", str(timeout)]
    return argv + (["--policy", str(policy)] if trial.variant == "policy" else []), f"{token}-{trial.number}"


def ask(trial: OutboundTrial, state: Path, server: CountingServer, policy: Path, token: str,
        timeout: float) -> dict[str, Any]:
    argv, marker = caller(trial, state, server, policy, token, timeout)
    proc = spawn(argv, marker, {}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return {"ok": False, "error": "hung", "text": "the recovery call did not end"}
    if proc.returncode != 0 or not out.strip():
        return {"ok": False, "error": f"exit {proc.returncode}", "text": err[-500:]}
    return json.loads(out.strip().splitlines()[-1])


def outcome_of(answer: dict[str, Any]) -> str:
    text = str(answer.get("text", ""))
    if answer.get("ok"):
        return "stored result (ran before the kill)" if "already ran once" in text else "sent by the recovery"
    for needle, name in (("outcome unknown", "outcome unknown (needs a human)"), ("expired", "expired"),
                         ("already ran once and failed", "failed before the kill, not retried"),
                         ("denied", "denied")):
        if needle in text:
            return name
    return f"other: {answer.get('error')}: {text[:160]}"


def one_outbound_trial(trial: OutboundTrial, state: Path, server: CountingServer, policy: Path, token: str,
                       approver: QueueApprover, recovery_timeout: float) -> None:
    argv, marker = caller(trial, state, server, policy, token, 60.0)
    arrived = server.event(trial.key)
    started = time.monotonic()
    proc = spawn(argv, marker, {})
    if trial.trigger == "after-arrival":
        while not arrived.wait(0.005) and proc.poll() is None and time.monotonic() - started < 30:
            pass
        pause = trial.delay - (time.monotonic() - server.arrival_times.get(trial.key, time.monotonic()))
    else:
        pause = trial.delay - (time.monotonic() - started)
    try:
        proc.wait(max(0.0, pause))
    except subprocess.TimeoutExpired:
        pass
    trial.killed = kill_group(proc)
    found = approver.find(trial.key)
    trial.status_at_kill = "no request yet" if found is None else found.shown_status
    for trial.asks in range(1, 4):
        trial.outcome = outcome_of(ask(trial, state, server, policy, token, recovery_timeout))
        if trial.outcome != "expired":
            break
    time.sleep(0.3)   # an answer still being written for the killed caller
    trial.executions = server.counts[trial.key]


def calibrate_outbound(state: Path, server: CountingServer, policy: Path, token: str) -> dict[str, tuple[float, float]]:
    """Per variant: seconds from start to the request reaching the server, and to the caller's exit."""
    figures = {}
    for variant in ("policy", "queue"):
        sends, exits = [], []
        for n in range(2):
            trial = OutboundTrial(1_000_000 + n, variant, "clock", 0.0, 0.0)   # keys p-1000000...
            argv, marker = caller(trial, state, server, policy, token, 60.0)
            started = time.monotonic()
            spawn(argv, marker, {}).wait(120)
            exits.append(time.monotonic() - started)
            sends.append(server.arrival_times.get(trial.key, started + exits[-1]) - started)
        figures[variant] = (max(sends), max(exits))
    return figures


def outbound(trials: int, seed: int, deadline: float, recovery_timeout: float) -> dict[str, Any]:
    print("2. executions of an approved http_request whose caller is SIGKILLed, after recovery")
    token = f"{os.getpid()}-{int(time.time())}-out"
    work = Path(tempfile.mkdtemp(prefix="bench-reliability-"))
    state, policy = work / "state", work / "policy.toml"
    server = CountingServer()
    policy.write_text('[[rules]]\nname = "bench-counting-server"\ntool = "http_request"\ndecision = "approve"\n'
                      f'match = {{ url = "http://127\\\\.0\\\\.0\\\\.1:{server.port}/collect/p-.*" }}\n')
    approver = QueueApprover(state)
    done: list[OutboundTrial] = []
    try:
        lives = calibrate_outbound(state, server, policy, token)
        print("  unkilled caller: " + "; ".join(f"{v}: request sent at {s * 1e3:.0f} ms, exit at {e * 1e3:.0f} ms"
                                                 for v, (s, e) in lives.items())
              + f"; server answers after 0-200 ms; a recovery ask waits up to {recovery_timeout:.0f} s for a decision")
        rng = random.Random(seed)
        for n in range(trials):
            if time.monotonic() >= deadline:
                break
            variant, trigger = rng.choice(("policy", "queue")), rng.choice(("clock", "near-send", "after-arrival"))
            answer = rng.uniform(0.0, 0.2)
            send, life = lives[variant]
            delay = {"clock": rng.uniform(0.5 * send, 1.2 * life), "near-send": send + rng.uniform(-0.1, 0.1),
                     "after-arrival": rng.uniform(0.0, answer + 0.1)}[trigger]
            trial = OutboundTrial(n, variant, trigger, delay, answer)
            one_outbound_trial(trial, state, server, policy, token, approver, recovery_timeout)
            done.append(trial)
            if len(done) % 20 == 0:
                print(f"  ... {len(done)} trials, {sum(t.executions > 1 for t in done)} duplicate(s)", flush=True)
        return outbound_report(done, token, approver.refused)
    finally:
        approver.close()
        for line in marked_processes(token):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        server.close()
        shutil.rmtree(work, ignore_errors=True)


def outbound_report(done: list[OutboundTrial], token: str, refused: Counter[str]) -> dict[str, Any]:
    killed = [t for t in done if t.killed]
    duplicates = [t for t in done if t.executions > 1]
    zero = [t for t in done if t.executions == 0]
    print(f"  trials {len(done)} ({len(killed)} killed, {len(done) - len(killed)} ended before their kill); "
          f"by trigger: {dict(Counter(t.trigger for t in done))}")
    print("  request status right after the kill -> answer of the recovery [executions counted]:")
    rows = Counter((t.status_at_kill, t.outcome, t.executions) for t in done)
    for (status, outcome, n), count in sorted(rows.items()):
        print(f"    {count:4d}  {status:<40} -> {outcome} [{n}]")
    if refused:
        print(f"  the queue refused {sum(refused.values())} approval(s) of the bench: {dict(refused)}")
    print(f"  recovery asks: {dict(sorted(Counter(t.asks for t in done).items()))} (a second ask follows an expiry)")
    print(f"  => DUPLICATE EXECUTIONS: {len(duplicates)} trial(s) (goal 0)"
          + "".join(f"\n     #{t.number} {t.key}: {t.executions} executions, {t.status_at_kill} -> {t.outcome}"
                    for t in duplicates))
    unknown = [t for t in zero if t.outcome.startswith("outcome unknown")]
    print(f"  => ZERO EXECUTIONS after recovery: {len(zero)} trial(s); {len(unknown)} of them reported as "
          "'outcome unknown, not retried' (by design: killed after the claim was recorded and before the "
          f"request left; a human decides), {len(zero) - len(unknown)} otherwise"
          + "".join(f"\n     #{t.number} {t.key}: {t.status_at_kill} -> {t.outcome}"
                    for t in zero if t not in unknown))
    sent_unknown = sum(1 for t in done if t.executions == 1 and t.outcome.startswith("outcome unknown"))
    print(f"  executed once but reported 'outcome unknown' (killed after sending, before recording): {sent_unknown}")
    processes = marked_processes(token)
    print(f"  => host processes left: {len(processes)} (goal 0)" + "".join(f"\n     {p}" for p in processes))
    return {"trials": len(done), "killed": len(killed), "duplicates": len(duplicates), "zero": len(zero),
            "zero_outcome_unknown": len(unknown), "executed_but_unknown": sent_unknown,
            "host_processes": processes, "per_trial": [asdict(t) for t in done]}


# ---- 3. a dead sandbox --------------------------------------------------------------------------
DEAD_HOG = "python3 -c 'x = bytearray(10**9)'"


def one_dead_sandbox(image: str, rng: random.Random) -> dict[str, Any]:
    """A session whose first command the memory limit kills (the container lives), and whose container is
    killed from outside during its second (`sleep 30`), at a random moment; what the session says."""
    turns = [[{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": DEAD_HOG}}],
             [{"type": "tool_use", "id": "c2", "name": "bash", "input": {"command": "sleep 30"}}],
             [{"type": "tool_use", "id": "c3", "name": "bash", "input": {"command": "echo again"}}],
             [{"type": "text", "text": "done"}]]
    config = Config()
    spec = SandboxSpec(image=image, session=f"bench-dead-{uuid.uuid4().hex[:8]}", limits=Limits(memory="256m"),
                       labels={"harness.bench": "1"})
    with DockerSandbox(spec) as box:
        api, ident = box.container.client.api, box.container.id
        delay = rng.uniform(0.3, 3.0)

        def on_step(event: StepEvent) -> None:
            if event.kind == "tool" and event.turn == 1:   # the hog's call answered: `sleep 30` comes next
                threading.Timer(delay, lambda: api.kill(ident)).start()

        ctx = ToolContext(sandbox=box, session=spec.session)
        result = AgentLoop(ScriptedModel(turns), default_catalog(config), ctx, config,
                           progress=on_step).run([system("You fix code."), user("Run it.")])
    kinds = [r.error_kind for m in result.messages for r in m.tool_results if r.is_error]
    return {"stop_reason": result.stop_reason, "oom_said": "OOMKilled" in result.final_text,
            "turns": result.turns, "error_kinds": kinds, "delay": delay, "reason": result.final_text[-300:]}


def dead_sandboxes(trials: int, seed: int, deadline: float) -> dict[str, Any]:
    print("3. a sandbox killed mid-command after an OOM in it: how the session ends")
    image = ensure_image(python="3.11")
    rng = random.Random(seed)
    done = [one_dead_sandbox(image, rng) for _ in range(trials) if time.monotonic() < deadline]
    ended = Counter(d["stop_reason"] for d in done)
    said = sum(1 for d in done if d["stop_reason"] == "sandbox_unavailable" and d["oom_said"])
    calls = dict(Counter(d["turns"] for d in done))
    print(f"  trials {len(done)}; stop reasons {dict(ended)}; model calls per session {calls}")
    print(f"  => ended as sandbox_unavailable with OOMKilled in the reason: {said}/{len(done)} (goal: all)")
    if done:
        print(f"  e.g. {done[0]['reason']}")
    return {"trials": len(done), "sandbox_unavailable_with_oom": said, "stop_reasons": dict(ended), "per_trial": done}


def ray_trials(trials: int, seed: int, deadline: float, check_after: float) -> dict[str, Any]:
    """`reliability_ray.ray_worker_deaths` with this file's event reader (Ray is an optional extra)."""
    from reliability_ray import ray_worker_deaths  # noqa: PLC0415 - imports Ray, only for --only ray
    client = client_or_default()
    events = DockerEvents(client)
    try:
        return ray_worker_deaths(trials, seed, deadline, check_after, events, client)
    finally:
        events.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["containers", "outbound", "dead", "ray"],
                        help="run one of the experiments (ray: only when asked for)")
    parser.add_argument("--trials", type=int, default=200, help="trials per experiment (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the kill delays and trial mix")
    parser.add_argument("--parallel", type=int, default=2, choices=[1, 2, 3, 4],
                        help="container trials at a time (default 2; outbound trials run one at a time)")
    parser.add_argument("--max-minutes", type=float, default=90.0,
                        help="stop starting trials after this long (the figures say how many ran)")
    parser.add_argument("--recovery-timeout", type=float, default=5.0,
                        help="seconds one recovery ask waits for a decision before its request expires")
    parser.add_argument("--json", type=Path, help="also write the figures (and every trial) to this file")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"container trials: a comma-separated subset of {','.join(KINDS)} (default: all)")
    parser.add_argument("--check-after", type=float, default=2.0,
                        help="seconds after each kill when its containers are counted (default 2)")
    args = parser.parse_args()
    started = time.monotonic()
    deadline = started + args.max_minutes * 60
    command = " ".join([".venv/bin/python", "bench/bench_reliability.py", *sys.argv[1:]])
    print(f"$ {command}\n{time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} cores, trials {args.trials}, "
          f"seed {args.seed}\n")
    figures: dict[str, Any] = {"command": command}
    if args.only in (None, "containers"):
        kinds = tuple(k for k in args.kinds.split(",") if k)
        if not kinds or set(kinds) - set(KINDS):
            parser.error(f"--kinds {args.kinds!r}: expected a comma-separated subset of {','.join(KINDS)}, "
                         "e.g. --kinds run,mcp")
        figures["containers"] = containers(args.trials, args.seed, args.parallel, deadline, kinds,
                                           args.check_after)
        print()
    if args.only in (None, "outbound"):
        figures["outbound"] = outbound(args.trials, args.seed, deadline, args.recovery_timeout)
        print()
    if args.only in (None, "dead"):
        figures["dead"] = dead_sandboxes(min(args.trials, 20), args.seed, deadline)
        print()
    if args.only == "ray":
        figures["ray"] = ray_trials(min(args.trials, 20), args.seed, deadline, args.check_after)
        print()
    figures["seconds"] = time.monotonic() - started
    print(f"total {figures['seconds'] / 60:.1f} min; command: {command}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
