"""One approval queue used by many threads at once, as `harness mcp --http` uses it for its sessions and
`harness web` for its browsers: every transaction lands whole, none is refused for another's."""

from __future__ import annotations

import threading
from pathlib import Path

from harness.approval.queue import ApprovalQueue


def test_threads_sharing_a_queue_submit_decide_claim_and_finish_without_a_refusal(tmp_path: Path) -> None:
    queue = ApprovalQueue(tmp_path)
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def session(n: int) -> None:
        try:
            start.wait()
            for i in range(15):
                request, created = queue.submit(session=f"s{n}", tool="http_request", key=f"k{n}-{i}",
                                                call_args={"url": f"http://x/{n}/{i}"}, args={"url": "u"},
                                                preview=f"GET {n} {i}")
                assert created
                queue.requests(("pending",))
                queue.decide(request.id, True, "a human", seen_hash=request.request_hash)
                claimed = queue.claim(request.id)
                assert claimed is not None and claimed.status == "executing"
                queue.finish(request.id, True, f"done {n} {i}")
                queue.version()
        except BaseException as exc:  # noqa: BLE001 - every thread's failure is the test's subject
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    done = queue.requests(("done",), limit=1000)
    assert len(done) == 8 * 15 and {r.result for r in done} == {f"done {n} {i}" for n in range(8) for i in range(15)}
    assert len(queue.audit()) == 8 * 15 * 4         # submitted, approved, executing, done: each once
