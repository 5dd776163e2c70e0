"""A scripted approver and an outbound session for the grant tests and bench/bench_approvals.py.

`ScriptedHuman` is the person at the prompt (the gate's `Prompt`): it counts every request it is asked
about and answers as its `answer` function says, through the same queue calls as the terminal prompt
(`g`: approve by a grant for this run, `d`: deny by one, `y`, `n`). Everything else is real: the gate,
the SQLite queue, the outbound tools, the counting HTTP servers, the sandbox container.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.approval.gate import ApprovalGate
from harness.approval.grants import NotGrantable
from harness.approval.policy import Policy
from harness.approval.queue import ApprovalQueue
from harness.approval.records import Request
from harness.config import Config
from harness.errors import ToolError
from harness.tools.base import Tool, ToolContext
from harness.tools.outbound.registry import outbound_tools
from tests.approval.helpers import CountingServer, make_wheel

Answer = Callable[[Request], str]


@dataclass
class ScriptedHuman:
    answer: Answer
    asked: list[Request] = field(default_factory=list)
    told: list[Request] = field(default_factory=list)

    def ask(self, queue: ApprovalQueue, request: Request, deadline: float,
            ended: Callable[[], str | None]) -> Request:
        self.asked.append(request)
        word = self.answer(request)
        if word in ("g", "d"):
            try:
                rule = queue.derive_grant(request.id, word == "g")
            except NotGrantable:          # the prompt says why and asks again: this approver then says yes
                return queue.decide(request.id, True, "scripted-approver", seen_hash=request.request_hash)
            return queue.decide_with_grant(request.id, word == "g", "scripted-approver", shown_rule=rule,
                                           seen_hash=request.request_hash, scope_kind="run")[0]
        return queue.decide(request.id, word == "y", "scripted-approver", seen_hash=request.request_hash)

    def tell(self, request: Request) -> None:
        self.told.append(request)


def always(word: str) -> Answer:
    return lambda request: word


def session(state: Path, human: ScriptedHuman, box: Any = None, scope: str = "run:grants",
            **approval: Any) -> tuple[dict[str, Tool], ToolContext, ApprovalGate]:
    """The outbound tools of one run, its gate (mode ask, the scripted human at the prompt) and context."""
    config = Config()
    config = config.replace(approval=dataclasses.replace(config.approval, state_dir=state, **approval))
    gate = ApprovalGate(ApprovalQueue(state), Policy(), mode="ask", timeout=60, prompt=human, poll_interval=0.05)
    ctx = ToolContext(sandbox=box, session=getattr(box, "session", "grant-session"), tool_use_id="toolu_1",
                      approver=gate, key_scope=scope)
    return {t.name: t for t in outbound_tools(config)}, ctx, gate


def call(tools: dict[str, Tool], ctx: ToolContext, tool: str, **arguments: Any) -> str:
    """The observation of one call, or "ERROR <type>: <message>" when it was refused."""
    try:
        return str(tools[tool].function(ctx, **arguments))
    except ToolError as exc:
        return f"ERROR {type(exc).__name__}: {exc}"


def publish(index: CountingServer, name: str, versions: tuple[str, ...]) -> None:
    """`name` at these versions on a simple index served by `index` (one pure-Python wheel each)."""
    links = []
    for version in versions:
        wheel = make_wheel(name, version)
        path = f"/files/{name}-{version}-py3-none-any.whl"
        index.routes[path] = ("application/octet-stream", wheel)
        digest = hashlib.sha256(wheel).hexdigest()
        links.append(f'<a href="{path}#sha256={digest}">{name}-{version}-py3-none-any.whl</a>')
    page = f"<html><body>{''.join(links)}</body></html>".encode()
    index.routes[f"/simple/{name.replace('_', '-')}/"] = ("text/html", page)


def reasonable(request: Request) -> str:
    """What a reasonable approver answers: a grant for documentation GETs and pinned packages, every other
    request (a POST with a body, a push) approved once."""
    if request.tool == "http_request" and request.args.get("method") == "GET" and not request.args.get("body"):
        return "g"
    if request.tool == "pip_download":
        return "g"
    return "y"


@dataclass
class Mix:
    """The 40 calls of the measured session and what happened to them."""

    calls: list[tuple[str, dict[str, Any]]]
    results: list[str] = field(default_factory=list)


def mix_calls(docs: CountingServer, guide: CountingServer, api: CountingServer) -> list[tuple[str, dict[str, Any]]]:
    """20 documentation GETs on one host, 12 on another, 6 pinned package downloads of two packages, one
    POST with a body, one push: 40 outbound calls, each with its own key."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(20):
        folder = "docs/3/api" if i % 5 == 4 else "docs/3"
        calls.append(("http_request", {"method": "GET", "url": f"http://127.0.0.1:{docs.port}/{folder}/page{i}.html",
                                       "headers": {"Accept": "text/html"}, "key": f"doc-{i}"}))
    for i in range(12):
        calls.append(("http_request", {"method": "GET", "url": f"http://localhost:{guide.port}/guide/ch{i}.html",
                                       "key": f"guide-{i}"}))
    for name in ("pkg_a", "pkg_b"):
        for version in ("1.0", "1.1", "1.2"):
            calls.append(("pip_download", {"requirement": f"{name.replace('_', '-')}=={version}",
                                           "key": f"{name}-{version}"}))
    calls.insert(10, ("http_request", {"method": "POST", "url": f"http://127.0.0.1:{api.port}/notify",
                                       "body": "tests pass", "key": "notify"}))
    calls.insert(30, ("git_push", {"remote": "origin", "branch": "main", "key": "push"}))
    return calls


@dataclass
class MixRun:
    """One run of the measured session: who was asked, the observations, the queue it left."""

    human: ScriptedHuman
    results: list[str]
    queue: ApprovalQueue


def run_mix(state: Path, box: Any, answer: Answer, docs: CountingServer, guide: CountingServer,
            api: CountingServer, index: CountingServer, remote: Path) -> MixRun:
    """The 40 calls of `mix_calls`, in one run (one key scope), with `answer` at the prompt."""
    human = ScriptedHuman(answer)
    tools, ctx, gate = session(state, human, box, scope=f"run:{state}", pip_index_url=index.url("/simple"),
                               git_remotes={"origin": str(remote)})
    results = [call(tools, ctx, tool, **args) for tool, args in mix_calls(docs, guide, api)]
    return MixRun(human, results, gate.queue)


def prepare_workspace(box: Any) -> None:
    """A git repository with one commit in the sandbox's /workspace, for the session's one push."""
    made = box.exec("git init -q -b main && echo fixed > fix.txt && git add fix.txt && git -c user.name=agent "
                    "-c user.email=agent@sandbox commit -qm 'fix the counter'")
    assert made.ok, made.stderr.text
