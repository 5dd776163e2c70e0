"""An MCP server written with the official SDK for the client-side tests: one tool per behaviour a
real server can have (text and structured content, an error result, a hang, a crash, hostile text,
a `key` argument the approval gate reserves, schemas whose patterns are catastrophic for a backtracking
engine, and tool annotations: the behaviour tools are marked read-only and closed-world, and `lookup`,
`wipe`, `web_search` and `read_any` each carry one kind of hints, `plain` none).
Run: python probe_server.py"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

REDOS = "^(a+)+$"
LOOKAHEAD = "^(?=a)a+$"
OBJECT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False)
ANNOTATED = {   # name -> its hints: one of each kind the approval gate tells apart
    "lookup": READ_ONLY,                                                   # read-only, closed world
    "wipe": types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
    "web_search": types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
    "read_any": types.ToolAnnotations(read_only_hint=True),                # open world by the MCP default
    "plain": None,                                                         # no annotations at all
}
TOOLS = [
    types.Tool(name="echo", description="Echo the text back, with its length as structured content.",
               input_schema=OBJECT, annotations=READ_ONLY,
               output_schema={"type": "object", "properties": {"length": {"type": "integer"}},
                              "required": ["length"]}),
    types.Tool(name="fail", description="Always reports an error result.", input_schema=OBJECT,
               annotations=READ_ONLY),
    types.Tool(name="hang", description="Never answers.", input_schema={"type": "object", "properties": {}},
               annotations=READ_ONLY),
    types.Tool(name="crash", description="Exits the server process.", annotations=READ_ONLY,
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="hostile", description="Returns terminal escapes and bidi marks.", annotations=READ_ONLY,
               input_schema={"type": "object", "properties": {}}),
    *(types.Tool(name=name, description=f"Says its name ({name}); annotated {hints!r}.", input_schema=OBJECT,
                 annotations=hints) for name, hints in ANNOTATED.items()),
    types.Tool(name="keyed", description="Takes an argument named key.",
               input_schema={"type": "object", "properties": {"key": {"type": "string"}}}),
    # hostile schemas: a pattern Python's `re` takes hours on for "a" * 35 + "b", one no linear-time engine
    # runs (lookahead), and a catastrophic pattern in the output schema the SDK's client checks results with
    types.Tool(name="redos", description="Echoes a text that must match a catastrophic pattern.", annotations=READ_ONLY,
               input_schema={"type": "object", "properties": {"text": {"type": "string", "pattern": REDOS}},
                             "required": ["text"]}),
    types.Tool(name="lookahead", description="Its pattern needs lookahead.",
               input_schema={"type": "object", "properties": {"text": {"type": "string", "pattern": LOOKAHEAD}}}),
    types.Tool(name="redos_out", description="Its output schema holds a catastrophic pattern.",
               input_schema={"type": "object", "properties": {}},
               output_schema={"type": "object", "properties": {"id": {"type": "string", "pattern": REDOS}}}),
]


async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    print(f"call {params.name} {args}", file=sys.stderr, flush=True)
    if params.name == "echo":
        text = str(args["text"])
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo: {text}")],
                                    structured_content={"length": len(text)})
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(type="text", text="the probe failed on purpose")],
                                    is_error=True)
    if params.name == "hang":
        await anyio.sleep(3600)
    if params.name == "crash":
        os._exit(3)
    if params.name == "redos":
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"matched: {args['text']}")])
    if params.name in ANNOTATED:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran: {args}")])
    if params.name == "hostile":
        return types.CallToolResult(content=[types.TextContent(
            type="text", text="\x1b]0;owned\x07\x1b[2Jclear \u202eevil\u202c [bold]markup[/bold]")])
    return types.CallToolResult(content=[types.TextContent(type="text", text="?")], is_error=True)


async def main() -> None:
    server = Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    time.sleep(float(os.environ.get("PROBE_START_DELAY", "0")))
    anyio.run(main)
