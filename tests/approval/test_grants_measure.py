"""The measured session of issue "approvals without fatigue": 40 outbound calls of a realistic mix
(documentation GETs on two hosts, pinned package downloads from a local index, one POST with a body,
one git_push) against counting servers on 127.0.0.1 and a real sandbox, once with an approver who
answers yes to each request and once with one who gives the grants a reasonable approver would give.

Asserted: at least 5x fewer prompts with grants; every request executed exactly once; nothing executed
that no person approved and no grant covered; the POST and the push asked about in both runs.
bench/bench_approvals.py prints the same figures.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.approval.grant_session import MixRun, always, prepare_workspace, publish, reasonable, run_mix
from tests.approval.helpers import CountingServer

pytestmark = pytest.mark.docker


def _check_run(run: MixRun, remote: Path) -> None:
    done = [r for r in run.queue.requests(limit=1000) if r.status == "done"]
    assert len(done) == 40, [r for r in run.results if r.startswith("ERROR")]
    for request in done:                  # each ran because a person approved it or a grant covered it
        assert request.decided_by == "scripted-approver" or (
            request.grant_id is not None and request.decided_by == f"grant:G{request.grant_id}"), request
    executed = [e.request_id for e in run.queue.audit() if e.event == "executing"]
    assert sorted(executed) == sorted(r.id for r in done)            # each once
    asked = {(r.tool, r.args.get("method")) for r in run.human.asked}
    assert ("git_push", None) in asked and ("http_request", "POST") in asked
    pushed = subprocess.run(["git", "--git-dir", str(remote), "log", "--format=%s", "main"], capture_output=True,
                            text=True, check=True).stdout
    assert pushed.strip() == "fix the counter"


def test_grants_cut_prompts_at_least_5x_and_run_nothing_unapproved(tmp_path: Path, sandbox: Any) -> None:
    prepare_workspace(sandbox)
    runs = {}
    with CountingServer() as docs, CountingServer() as guide, CountingServer() as api, CountingServer() as index:
        publish(index, "pkg_a", ("1.0", "1.1", "1.2"))
        publish(index, "pkg_b", ("1.0", "1.1", "1.2"))
        for name, answer in (("without", always("y")), ("with", reasonable)):
            remote = tmp_path / f"{name}.git"
            subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
            runs[name] = run_mix(tmp_path / name, sandbox, answer, docs, guide, api, index, remote)
            _check_run(runs[name], remote)
        assert docs.count() == 40 and guide.count() == 24 and api.count() == 2       # each call once, per run
        wheels = [h.path for h in index.hits if h.path.endswith(".whl")]
        assert len(wheels) == 12 and len(set(wheels)) == 6                            # each version once per run
    without, with_grants = len(runs["without"].human.asked), len(runs["with"].human.asked)
    assert without == 40
    assert without >= 5 * with_grants, f"{without} prompts without grants, {with_grants} with"
    assert {g.decided for g in runs["with"].queue.grants()} == {19, 11, 2}           # docs, guide, each package
