"""A small world for loop tests: pure tools over an in-memory folder, and scripted models.

The tools are real `Tool`s in a real `Catalog`; only the sandbox is a `Shelf`, a dict of files and a
count of calls, so the loop contract is tested without Docker. Sandbox-backed runs are in test_session.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.config import Config, LoopConfig, ToolsConfig
from harness.errors import HarnessError, ToolError
from harness.tools.base import Effect, Tool, ToolContext
from harness.tools.catalog import Catalog

FILES = {"list.txt": "bread, milk", "recipes/gazpacho.txt": "tomatoes, cucumber", "recipes/omelette.txt": "eggs"}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


@dataclass
class Shelf:
    """What the loop world's tools act on, in place of a sandbox."""

    files: dict[str, str] = field(default_factory=lambda: dict(FILES))
    calls: dict[str, int] = field(default_factory=dict)


def shelf(ctx: ToolContext) -> Shelf:
    assert isinstance(ctx.sandbox, Shelf), ctx.sandbox
    return ctx.sandbox


def make_catalog() -> Catalog:
    def files(ctx: ToolContext) -> dict[str, str]:
        return shelf(ctx).files

    def count(ctx: ToolContext, name: str) -> None:
        calls = shelf(ctx).calls
        calls[name] = calls.get(name, 0) + 1

    def list_folder(ctx: ToolContext, folder: str) -> str:
        count(ctx, "list")
        return "\n".join(sorted(p for p in files(ctx) if p.startswith(folder)))

    def read(ctx: ToolContext, path: str) -> str:
        count(ctx, "read")
        if path not in files(ctx):
            raise ToolError(f"no file {path!r}; the files are {sorted(files(ctx))}")
        return files(ctx)[path]

    def write(ctx: ToolContext, path: str, content: str) -> str:
        count(ctx, "write")
        files(ctx)[path] = content
        return f"wrote {len(content)} characters to {path}"

    def explode(ctx: ToolContext) -> str:
        raise HarnessError("the sandbox channel died")

    s = {"type": "string"}
    return Catalog([
        Tool("list", "List the files under a folder.", _obj({"folder": s}, ["folder"]), Effect.READ, list_folder),
        Tool("read", "Read a file.", _obj({"path": s}, ["path"]), Effect.READ, read, example={"path": "list.txt"}),
        Tool("write", "Replace a file.", _obj({"path": s, "content": s}, ["path", "content"]), Effect.SANDBOX, write),
        Tool("explode", "Fails as the harness would.", _obj({}, []), Effect.SANDBOX, explode),
    ])


def make_ctx() -> ToolContext:
    return ToolContext(sandbox=Shelf(), session="loop-test")  # type: ignore[arg-type]  # the world's tools only


def config(max_turns: int = 10, keep: int = 100, **loop: Any) -> Config:
    return Config(loop=LoopConfig(max_turns=max_turns, **loop), tools=ToolsConfig(history_window=keep))


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": args}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}
