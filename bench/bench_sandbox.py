"""Sandbox benchmark: shell round trip vs `docker exec`, start/teardown, and 1 GiB of output.

    .venv/bin/python bench/bench_sandbox.py [--rounds 200] [--quick] [--image TAG] [--lifecycle N]

Prints p50/p95 of one trivial command (`true`) through the harness `bash` tool (channel, capture
and observation formatting included), back to back and 50 ms apart (the channel starts the next
command's bash after answering, which a model's thinking time always covers), and through
`Sandbox.exec` alone; a 10 KB command (a heredoc, as a model writes a file); each over the direct
link and, as the baseline of the same run, over the exec stream (`direct_channel=False`); through the
`docker exec` CLI and docker-py's `exec_run`; the floors in the container (starting bash, a started
bash, a pipe round trip back to back and 50 ms apart); start-to-ready and teardown of a sandbox
against docker-py's start of the same container, and against the same start without its lifeline
(alternately, in the same run; `--lifecycle N` measures only these); and for 1 GiB of output
through the `bash` tool: throughput, the harness's extra peak memory (measured in a child process,
so earlier work does not hide it) and the channel server's peak memory in the container.
Each figure is printed with its target from the sandbox issue.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import ToolsConfig  # noqa: E402
from harness.tools.base import Observation, ToolContext  # noqa: E402
from harness.tools.shell.bash import bash_tool  # noqa: E402
from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.deployment.docker import container_options  # noqa: E402
from sandbox.deployment.lifeline import start_tied  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

GIB = 1024 ** 3
PAUSE = 0.05   # a model takes seconds between commands; 50 ms lets the channel start the next bash
ONE_GIB_COMMAND = "yes 'harness benchmark line' | head -c 1G"
# a model writing a file through the shell: a command of 10 KB that starts no program
HEREDOC_COMMAND = ": <<'EOF'\n" + ("    return self.assertEqual(first, second, msg='a line of code')\n" * 160) + "EOF"


def _spec(image: str) -> SandboxSpec:
    return SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", labels={"harness.bench": "1"})


def _timings(fn: Callable[[], object], rounds: int, warmup: int = 3, pause: float = 0.0) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(rounds):
        time.sleep(pause)
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _row(name: str, values: list[float]) -> dict[str, float]:
    p50, p95 = _pct(values, 0.5) * 1e3, _pct(values, 0.95) * 1e3
    print(f"  {name:<34} p50 {p50:8.2f} ms   p95 {p95:8.2f} ms   (n={len(values)})")
    return {"p50_ms": p50, "p95_ms": p95, "n": len(values)}


def _channel_rows(box: DockerSandbox, rounds: int, key: str, via: str) -> dict[str, dict[str, float]]:
    tool = bash_tool(ToolsConfig())
    ctx = ToolContext(sandbox=box, session=box.session)

    def run() -> object:
        return tool.function(ctx, command="true")

    def raw() -> object:
        return box.exec("true", timeout=10, save_output=False)

    def heredoc() -> object:
        return tool.function(ctx, command=HEREDOC_COMMAND)

    return {f"harness_bash_tool{key}": _row(f"bash tool, back to back ({via})", _timings(run, rounds)),
            f"harness_bash_tool_paced{key}": _row(f"bash tool, {PAUSE * 1e3:.0f} ms apart ({via})",
                                                  _timings(run, rounds, pause=PAUSE)),
            f"harness_bash_tool_heredoc_paced{key}": _row("  a 10 KB heredoc to `:` instead", _timings(
                heredoc, max(20, rounds // 4), pause=PAUSE)),
            f"sandbox_exec_paced{key}": _row(f"Sandbox.exec, {PAUSE * 1e3:.0f} ms apart ({via})",
                                             _timings(raw, rounds, pause=PAUSE))}


def _docker_exec_rows(box: DockerSandbox, rounds: int) -> dict[str, dict[str, float]]:
    cid, api = box.container.id, box.container
    return {"docker_py_exec_run": _row("docker-py exec_run", _timings(
                lambda: api.exec_run(["bash", "-c", "true"], user="1000:1000"), max(20, rounds // 4))),
            "docker_exec_cli": _row("docker exec CLI", _timings(
                lambda: subprocess.run(["docker", "exec", "-u", "1000:1000", cid, "bash", "-c", "true"],
                                       check=True), max(20, rounds // 4)))}


def round_trips(image: str, rounds: int) -> dict[str, dict[str, float]]:
    print("round trip of one trivial command (`true`), same container:")
    rows: dict[str, dict[str, float]] = {}
    # the exec stream (every byte through dockerd and the shim) measured in the same run, as the baseline
    for direct in (False, True):
        with DockerSandbox(dataclasses.replace(_spec(image), direct_channel=direct)) as box:
            assert box._channel is not None
            if direct and not box._channel.direct:
                print(f"  (no direct link here: {box._channel.link_refused})")
            via = "direct link" if box._channel.direct else "exec stream"
            rows.update(_channel_rows(box, rounds, "" if direct else "_exec_stream", via))
            if direct:
                rows.update(_floors(box))
                rows.update(_process_starts(box))
                rows.update(_docker_exec_rows(box, rounds))
    goals = {"harness_bash_tool": 1.3, "harness_bash_tool_paced": 1.0}
    spawn, warm = rows["floor_bash_spawn"]["p50_ms"], rows["floor_warm_bash"]["p50_ms"]
    print(f"  => floors in this container: starting bash {spawn:.2f} ms (what back to back waits for: the next "
          f"command's bash starts after the answer), a started bash running it {warm:.2f} ms; the tool back to "
          f"back is {rows['harness_bash_tool']['p50_ms'] / spawn:.2f}x the first, paced "
          f"{rows['harness_bash_tool_paced']['p50_ms'] / warm:.2f}x the second")
    for key, label in (("harness_bash_tool", "back to back"), ("harness_bash_tool_paced", "paced")):
        ratio_cli = rows["docker_exec_cli"]["p50_ms"] / rows[key]["p50_ms"]
        ratio_py = rows["docker_py_exec_run"]["p50_ms"] / rows[key]["p50_ms"]
        ratio_stream = rows[f"{key}_exec_stream"]["p50_ms"] / rows[key]["p50_ms"]
        p50 = rows[key]["p50_ms"]
        print(f"  => {label}: {p50:.2f} ms p50 (goal <= {goals[key]} ms: {'met' if p50 <= goals[key] else 'NOT met'}); "
              f"{ratio_cli:.1f}x faster than docker exec CLI (goal >= 50x: {'met' if ratio_cli >= 50 else 'NOT met'}), "
              f"{ratio_py:.1f}x faster than exec_run, {ratio_stream:.2f}x faster than over the exec stream")
        rows[f"ratio_vs_cli_p50_{label.replace(' ', '_')}"] = {"x": ratio_cli}
        rows[f"ratio_vs_exec_run_p50_{label.replace(' ', '_')}"] = {"x": ratio_py}
        rows[f"ratio_vs_exec_stream_p50_{label.replace(' ', '_')}"] = {"x": ratio_stream}
    return rows


FLOOR_PROBE = r"""
import json, os, statistics, subprocess, time
def median(fn, n=40):
    out = []
    for _ in range(n):
        time.sleep(0.01)
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3
BASH = "/opt/harness/bin/bash" if os.access("/opt/harness/bin/bash", os.X_OK) else "/bin/bash"   # the server's
def spawn():
    subprocess.run(["/bin/bash", "-c", "true"], executable=BASH, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, start_new_session=True)
def warm():
    r, w = os.pipe()
    p = subprocess.Popen(["/bin/bash", "-c", 'read -r c <&%d; eval "$c"' % r], executable=BASH, pass_fds=(r,),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    time.sleep(0.01)
    t = time.perf_counter()
    os.write(w, b"true\n"); os.close(w); p.communicate()
    return time.perf_counter() - t
def pipe_round_trips(rounds, pause):
    a, b = os.pipe(); c, d = os.pipe()
    if os.fork() == 0:
        for _ in range(rounds):
            os.read(a, 1); os.write(d, b"x")
        os._exit(0)
    out = []
    for _ in range(rounds):
        if pause:
            time.sleep(pause)
        t = time.perf_counter(); os.write(b, b"x"); os.read(c, 1); out.append(time.perf_counter() - t)
    os.wait()
    return out
warm_ms = statistics.median(warm() for _ in range(40)) * 1e3
print(json.dumps({"spawn": median(spawn), "warm": warm_ms, "pipe": statistics.mean(pipe_round_trips(200, 0)) * 1e3,
                  "paced_pipe": statistics.median(pipe_round_trips(30, 0.05)) * 1e3, "bash": BASH}))
"""


def _floors(box: DockerSandbox) -> dict[str, dict[str, float]]:
    """What a command costs in this container without the harness: starting `bash -c true` (fork and exec),
    running `true` in a bash already started, and a pipe round trip between two processes."""
    box.write_file("/tmp/floor_probe.py", FLOOR_PROBE.encode())
    result = box.exec("python3 /tmp/floor_probe.py", timeout=120)
    got = json.loads(result.stdout.text.strip().splitlines()[-1])
    print(f"  {'floor: start bash -c true':<34} p50 {got['spawn']:8.2f} ms   ({got['bash']}, as the channel runs it)")
    print(f"  {'floor: true in a started bash':<34} p50 {got['warm']:8.2f} ms")
    print(f"  {'floor: pipe round trip':<34} mean {got['pipe']:7.3f} ms")
    print(f"  {'floor: the same, 50 ms apart':<34} p50 {got['paced_pipe']:8.3f} ms   (waking processes on idle "
          "CPUs; a command is two such round trips)")
    return {"floor_bash_spawn": {"p50_ms": got["spawn"]}, "floor_warm_bash": {"p50_ms": got["warm"]},
            "floor_pipe_round_trip": {"mean_ms": got["pipe"]},
            "floor_paced_pipe_round_trip": {"p50_ms": got["paced_pipe"]}}


STARTS_PROBE = r"""
import json, statistics, subprocess, sys, time
def median(argv, n=30):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e3
print(json.dumps({" ".join(a): median(a) for a in json.loads(sys.argv[1])}))
"""
EVERYDAY = [["/bin/true"], ["/bin/bash", "-c", "true"], ["ls", "/"], ["grep", "-c", "x", "/etc/passwd"],
            ["git", "--version"], ["python3", "-c", "pass"]]


def _process_starts(box: DockerSandbox) -> dict[str, dict[str, float]]:
    """How long everyday programs take to start and exit in this container (the image's part of every
    command: the dynamic loader, the locale, Python's start), with the sandbox's environment."""
    box.write_file("/tmp/starts_probe.py", STARTS_PROBE.encode())
    result = box.exec(f"python3 /tmp/starts_probe.py '{json.dumps(EVERYDAY)}'", timeout=120)
    got = json.loads(result.stdout.text.strip().splitlines()[-1])
    rows = {}
    for name, ms in got.items():
        print(f"  {'start: ' + name:<34} p50 {ms:8.2f} ms")
        rows[f"start_{name.replace(' ', '_')}"] = {"p50_ms": ms}
    return rows


def _start_to_ready(image: str, tied: bool) -> tuple[float, float]:
    """One sandbox's start to its first command's answer, and its teardown, in seconds."""
    box = DockerSandbox(_spec(image))
    box.deployment.tied = tied
    started = time.perf_counter()
    box.start()
    box.exec("true", timeout=10)
    ready = time.perf_counter() - started
    started = time.perf_counter()
    box.close()
    return ready, time.perf_counter() - started


def lifecycle(image: str, rounds: int) -> dict[str, dict[str, float]]:
    print("sandbox lifecycle (image built, no project files); with and without the lifeline, alternately:")
    DockerSandbox(_spec(image)).__enter__().close()   # warm the reaper and the image cache
    ready, teardown, untied, bare, bare_tied = [], [], [], [], []
    client = docker.from_env()
    for _ in range(rounds):
        for tied in (True, False):
            up, down = _start_to_ready(image, tied)
            (ready if tied else untied).append(up)
            if tied:
                teardown.append(down)
        # the baseline: docker-py's create and start of the same container, hardening included
        options = container_options(_spec(image))
        started = time.perf_counter()
        container = client.containers.run(image, ["sleep", "infinity"], detach=True, **options)
        bare.append(time.perf_counter() - started)
        container.remove(force=True, v=True)
        # and the same container on its lifeline (create, attach, start): the container part of the cost
        options = container_options(_spec(image))
        started = time.perf_counter()
        container, lifeline = start_tied(client, image, **options)
        bare_tied.append(time.perf_counter() - started)
        container.remove(force=True, v=True)
        lifeline.close()
    rows = {"start_to_ready": _row("start to ready (first command run)", ready),
            "start_to_ready_untied": _row("the same without the lifeline", untied),
            "docker_run": _row("docker run of it (docker-py, started)", bare),
            "docker_run_tied": _row("the same on its lifeline", bare_tied),
            "teardown": _row("teardown (container removed)", teardown)}
    p50, run = rows["start_to_ready"]["p50_ms"], rows["docker_run"]["p50_ms"]
    print(f"  => start-to-ready p50 {p50:.0f} ms (goal <= 250 ms: {'met' if p50 <= 250 else 'NOT met'}), "
          f"{p50 / run:.2f}x a docker run of the same container ({run:.0f} ms; the rest is the channel "
          f"server's exec and start, and the first command)")
    print(f"  => the lifeline: start-to-ready p50 {p50 / rows['start_to_ready_untied']['p50_ms']:.3f}x the "
          f"same start without it (goal: not slower); the container alone "
          f"{rows['docker_run_tied']['p50_ms'] / run:.3f}x")
    return rows


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def one_gib_child(image: str) -> None:
    """Run in a fresh process: 1 GiB through the bash tool, then print figures as JSON."""
    tool = bash_tool(ToolsConfig())
    with DockerSandbox(_spec(image)) as box:
        ctx = ToolContext(sandbox=box, session=box.session)
        tool.function(ctx, command="seq 1 100000")          # warm every code path once
        before = _rss_kib("VmRSS")
        started = time.perf_counter()
        result = tool.function(ctx, command=ONE_GIB_COMMAND, timeout=600)
        elapsed = time.perf_counter() - started
        observation = result.text if isinstance(result, Observation) else result
        floor = box.exec(f"{ONE_GIB_COMMAND} | cat > /dev/null", timeout=600).duration   # the same stream, read by cat
        peak = _rss_kib("VmHWM")
        assert box._channel is not None
        server = box.exec(f"grep VmHWM /proc/{box._channel.server_pid}/status", timeout=10).stdout.text.split()
    print(json.dumps({"seconds": elapsed, "cat_seconds": floor, "extra_peak_mib": max(0, peak - before) / 1024,
                      "server_peak_mib": int(server[1]) / 1024 if len(server) > 1 else -1,
                      "observation_chars": len(observation), "status": observation.splitlines()[0]}))


def one_gib(image: str) -> dict[str, float]:
    print(f"1 GiB of output through the bash tool (`{ONE_GIB_COMMAND}`):")
    done = subprocess.run([sys.executable, __file__, "--one-gib-child", image], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the 1 GiB run failed:\n{done.stderr[-3000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"  {data['status']}")
    print(f"  time {data['seconds']:.2f} s = {1024 / data['seconds']:.0f} MiB/s (target >= 500 MiB/s: "
          f"{'met' if 1024 / data['seconds'] >= 500 else 'NOT met'}); observation {data['observation_chars']} "
          f"characters")
    print(f"  `cat > /dev/null` of the same stream in the sandbox: {data['cat_seconds']:.2f} s = "
          f"{1024 / data['cat_seconds']:.0f} MiB/s; the bash tool takes {data['seconds'] / data['cat_seconds']:.1f}x")
    print(f"  harness extra peak memory {data['extra_peak_mib']:.1f} MiB (target < 100 MiB: "
          f"{'met' if data['extra_peak_mib'] < 100 else 'NOT met'}); channel server peak in the sandbox "
          f"{data['server_peak_mib']:.1f} MiB")
    data["mib_per_s"] = 1024 / data["seconds"]
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200, help="timed round trips of the bash tool")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, and skip the 1 GiB run")
    parser.add_argument("--image", default=None,
                        help="measure this sandbox image instead of the current one (an earlier build, to compare)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--lifecycle", type=int, default=0, metavar="N",
                        help="only the lifecycle figures, over N rounds (with and without the lifeline)")
    parser.add_argument("--one-gib-child", metavar="IMAGE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_gib_child:
        one_gib_child(args.one_gib_child)
        return 0
    image = args.image or ensure_image(python="3.11")
    print(f"image {image}; {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    if args.lifecycle:
        figures: dict[str, object] = {"image": image, "lifecycle": lifecycle(image, args.lifecycle)}
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    rounds = 40 if args.quick else args.rounds
    figures = {"image": image, "round_trip": round_trips(image, rounds)}
    print()
    figures["lifecycle"] = lifecycle(image, 5 if args.quick else 10)
    if not args.quick:
        print()
        figures["one_gib"] = one_gib(image)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
