"""MCP benchmark: what serving the sandbox over MCP adds to one trivial `bash` call.

    .venv/bin/python bench/bench_mcp.py [--rounds 300]

Round trip of `true` through the `bash` tool, three ways, in the same run:
  channel   the tool called in-process on a started sandbox (what `harness exec` does per command)
  mcp       the official SDK's client over stdio to a `harness mcp --dir DIR` process (JSON-RPC framing,
            validation, the worker thread, structured content) calling the same tool in its sandbox
  no-op     a `bash` tool that does nothing, served the same way (SDK server, stdio transport, worker
            thread): the floor of any MCP stdio call on this machine
  docker    `docker exec` of `true` in the same kind of sandbox, for scale
Each back to back and 50 ms apart (a model thinks for seconds between calls). Prints p50/p95 and the
MCP overhead (mcp p50 - channel p50) against its goal (< 2 ms at p50).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mcp_types as types  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.server.lowlevel.server import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402

from harness.config import ToolsConfig  # noqa: E402
from harness.mcp.server import _claimed_stdio, _PipeLines, _PipeWriter  # noqa: E402
from harness.tools.base import ToolContext  # noqa: E402
from harness.tools.shell.bash import bash_tool  # noqa: E402
from sandbox.api import SandboxSpec  # noqa: E402
from sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from sandbox.images import ensure_image  # noqa: E402

PAUSE = 0.05
GOAL_MS = 2.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _channel(image: str, project: Path, rounds: int, pause: float) -> list[float]:
    spec = SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", project_dir=project,
                       labels={"harness.bench": "1"})
    tool = bash_tool(ToolsConfig())
    with DockerSandbox(spec) as box:
        ctx = ToolContext(sandbox=box, session=spec.session)
        for _ in range(5):
            tool.function(ctx, command="true")
        out = []
        for _ in range(rounds):
            time.sleep(pause)
            started = time.perf_counter()
            tool.function(ctx, command="true")
            out.append(time.perf_counter() - started)
        return out


def _docker_exec(image: str, rounds: int) -> list[float]:
    spec = SandboxSpec(image=image, session=f"bench-{uuid.uuid4().hex[:8]}", labels={"harness.bench": "1"})
    with DockerSandbox(spec) as box:
        cid = box.container.id
        out = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(["docker", "exec", "-u", "1000:1000", cid, "bash", "-c", "true"], check=True)
            out.append(time.perf_counter() - started)
        return out


def _serve_noop() -> None:
    """A `bash` tool that does nothing, served as `harness mcp` serves (same SDK server, same stdio
    transport, same worker-thread hop): what any MCP stdio call costs here before our tool runs."""
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="bash", input_schema={"type": "object"})])

    async def call_tool(_ctx: Any, _params: Any) -> types.CallToolResult:
        await anyio.to_thread.run_sync(lambda: None)
        return types.CallToolResult(content=[types.TextContent(type="text", text="[exit 0]")],
                                    structured_content={"exit_code": 0})

    server = Server("noop", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main(wire_in: int, wire_out: int) -> None:
        async with stdio_server(_PipeLines(wire_in), _PipeWriter(wire_out)) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    with _claimed_stdio() as (wire_in, wire_out):
        anyio.run(main, wire_in, wire_out)


def _mcp(project: Path, state: Path, rounds: int, pause: float, noop: bool = False) -> list[float]:
    args = [str(Path(__file__).resolve()), "--serve-noop"] if noop else \
        ["-m", "harness.cli.main", "mcp", "--dir", str(project)]
    params = StdioServerParameters(command=sys.executable, args=args,
                                   env={"HARNESS_STATE_DIR": str(state), "PATH": "/usr/local/bin:/usr/bin:/bin"})
    out: list[float] = []

    async def main() -> None:
        async with Client(params) as client:
            for _ in range(5):
                result = await client.call_tool("bash", {"command": "true"})
                assert not result.is_error and (result.structured_content or {}).get("exit_code") == 0
            for _ in range(rounds):
                await anyio.sleep(pause)
                started = time.perf_counter()
                await client.call_tool("bash", {"command": "true"})
                out.append(time.perf_counter() - started)

    anyio.run(main)
    return out


def _line(label: str, values: list[float]) -> str:
    if not values:
        return f"  {label:<42} (not measured)"
    return f"  {label:<42} p50 {_pct(values, 0.5) * 1000:7.2f} ms   p95 {_pct(values, 0.95) * 1000:7.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--serve-noop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_noop:
        _serve_noop()
        return 0
    image = ensure_image(python="3.11")
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "app.py").write_text("print('hello')\n")
        figures: dict[str, list[float]] = {}
        for pause, tag in ((0.0, "back to back"), (PAUSE, "50 ms apart")):
            figures[f"channel, {tag}"] = _channel(image, project, args.rounds, pause)
            figures[f"mcp stdio, {tag}"] = _mcp(project, Path(tmp) / "state", args.rounds, pause)
            figures[f"no-op tool over MCP stdio, {tag}"] = _mcp(project, Path(tmp) / "state", args.rounds, pause,
                                                                 noop=True)
        figures["docker exec"] = _docker_exec(image, max(20, args.rounds // 10))
    print(f"bash `true` round trip, {args.rounds} calls each")
    for label, values in figures.items():
        print(_line(label, values))
    report = {}
    for tag in ("back to back", "50 ms apart"):
        added = (_pct(figures[f"mcp stdio, {tag}"], 0.5) - _pct(figures[f"channel, {tag}"], 0.5)) * 1000
        ratio = _pct(figures[f"mcp stdio, {tag}"], 0.5) / _pct(figures[f"channel, {tag}"], 0.5)
        floor = _pct(figures[f"no-op tool over MCP stdio, {tag}"], 0.5) * 1000
        verdict = "met" if added < GOAL_MS else "NOT met"
        print(f"MCP adds {added:.2f} ms at p50 {tag} ({ratio:.2f}x the channel); goal < {GOAL_MS:g} ms: {verdict}; "
              f"a no-op tool over the same SDK stdio transport and thread hop takes {floor:.2f} ms")
        report[tag] = {"added_ms": round(added, 3), "ratio": round(ratio, 3), "noop_ms": round(floor, 3)}
    if figures["docker exec"]:
        scale = _pct(figures["docker exec"], 0.5) / _pct(figures["mcp stdio, back to back"], 0.5)
        print(f"`docker exec` takes {scale:.1f}x an MCP bash call")
    if args.json:
        args.json.write_text(json.dumps({"p50_ms": {k: round(_pct(v, 0.5) * 1000, 3) for k, v in figures.items() if v},
                                         "mcp": report}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
