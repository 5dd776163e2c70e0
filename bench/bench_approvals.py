"""Figures of the approval queue, printed (not asserted):

    .venv/bin/python bench/bench_approvals.py

1. queue throughput: submit + decide + claim + finish cycles per second on one SQLite file (WAL);
2. resume latency: from `harness approvals approve ID` returning to the request reaching the counting
   server, for a session waiting in another process (poll interval 0.25 s, the default);
3. a race: N processes asking with one key, approved once: how many requests the server received.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.approval.queue import ApprovalQueue  # noqa: E402
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


if __name__ == "__main__":
    print(f"queue throughput: {throughput():.0f} full cycles/s (submit, decide, claim, finish; WAL, one process)")
    delays = resume_latency()
    print(f"decision -> request sent by the waiting session: median {statistics.median(delays) * 1000:.0f} ms, "
          f"max {max(delays) * 1000:.0f} ms over {len(delays)} rounds (poll 0.05 s in the test caller)")
    hits, same = race()
    print(f"race: 6 processes, one key, one approval -> {hits} request(s) received; {same} of 6 got that result")
