"""Figures of the approval queue, printed (not asserted):

    .venv/bin/python bench/bench_approvals.py

1. queue throughput: submit + decide + claim + finish cycles per second on one SQLite file (WAL);
2. resume latency: from `harness approvals approve ID` returning to the request reaching the counting
   server, for a session waiting in another process (poll interval 0.25 s, the default);
3. a race: N processes asking with one key, approved once: how many requests the server received;
4. prompts of the 40-call session of tests/approval/test_grants_measure.py (documentation GETs on two
   hosts, pinned packages from a local index, one POST with a body, one git_push; a real sandbox):
   an approver answering each request vs one giving the grants a reasonable approver would give.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.approval.queue import ApprovalQueue  # noqa: E402
from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402
from tests.approval.grant_session import always, prepare_workspace, publish, reasonable, run_mix  # noqa: E402
from tests.approval.helpers import CountingServer, finish_call, harness_cli, start_call, wait_for  # noqa: E402


def throughput(n: int = 300) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        queue = ApprovalQueue(Path(tmp))
        t0 = time.perf_counter()
        for i in range(n):
            req, _ = queue.submit(session="s", tool="http_request", key=f"k{i}", call_args={"i": i},
                                  args={"i": i}, preview=f"request {i}")
            queue.decide(req.id, True, "bench", seen_hash=req.request_hash)
            queue.claim(req.id)
            queue.finish(req.id, True, "ok")
        return n / (time.perf_counter() - t0)


def resume_latency(rounds: int = 5) -> list[float]:
    delays = []
    with tempfile.TemporaryDirectory() as tmp, CountingServer() as server:
        state = Path(tmp)
        queue = ApprovalQueue(state)
        for i in range(rounds):
            proc = start_call(state, server.url(), f"lat-{i}")
            request = wait_for(lambda: queue.requests(("pending",)), what="pending")[0]  # type: ignore[index]
            harness_cli("approve", str(request.id), "--hash", request.request_hash, state_dir=state)
            decided = queue.get(request.id).decided_at or 0.0
            wait_for(lambda n=i + 1: server.count() == n, what="the request")
            delays.append(time.time() - decided)
            finish_call(proc)
    return delays


def race(processes: int = 6) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as tmp, CountingServer() as server:
        state = Path(tmp)
        procs = [start_call(state, server.url(), "one-key") for _ in range(processes)]
        queue = ApprovalQueue(state)
        request = wait_for(lambda: queue.requests(("pending",)), what="pending")[0]  # type: ignore[index]
        time.sleep(1.0)
        harness_cli("approve", str(request.id), "--hash", request.request_hash, state_dir=state)
        results = [finish_call(p) for p in procs]
        return server.count(), sum(1 for r in results if "hit 1 POST" in str(r["text"]))


def grant_prompts() -> dict[str, tuple[int, int]]:
    """(prompts, requests executed) of the measured session, without and with grants."""
    figures = {}
    with tempfile.TemporaryDirectory() as tmp, CountingServer() as docs, CountingServer() as guide, \
            CountingServer() as api, CountingServer() as index:
        publish(index, "pkg_a", ("1.0", "1.1", "1.2"))
        publish(index, "pkg_b", ("1.0", "1.1", "1.2"))
        project = Path(tmp) / "project"
        project.mkdir()
        spec = SandboxSpec(image=ensure_image("3.11"), session=f"bench-{uuid.uuid4().hex[:8]}", project_dir=project)
        with DockerSandbox(spec) as box:
            prepare_workspace(box)
            for name, answer in (("without grants", always("y")), ("with grants", reasonable)):
                remote = Path(tmp) / f"{name.replace(' ', '-')}.git"
                subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
                run = run_mix(Path(tmp) / name.replace(" ", "-"), box, answer, docs, guide, api, index, remote)
                done = len([r for r in run.queue.requests(limit=1000) if r.status == "done"])
                figures[name] = (len(run.human.asked), done)
    return figures


if __name__ == "__main__":
    print(f"queue throughput: {throughput():.0f} full cycles/s (submit, decide, claim, finish; WAL, one process)")
    delays = resume_latency()
    print(f"decision -> request sent by the waiting session: median {statistics.median(delays) * 1000:.0f} ms, "
          f"max {max(delays) * 1000:.0f} ms over {len(delays)} rounds (poll 0.05 s in the test caller)")
    hits, same = race()
    print(f"race: 6 processes, one key, one approval -> {hits} request(s) received; {same} of 6 got that result")
    prompts = grant_prompts()
    (base, ran0), (granted, ran1) = prompts["without grants"], prompts["with grants"]
    print(f"40-call session: {base} prompts without grants ({ran0} executed), {granted} with grants ({ran1} "
          f"executed): {base / max(granted, 1):.1f}x fewer prompts")
