"""The patch out of an MCP session: `propose_changes` shows it, `apply_changes` writes it into the folder.

    propose_tool(lookup, root)                   a read tool: the session's diff, as text and as data
    apply_action(lookup, root, allow_binary)     an outbound action: the diff written into `root` on the
                                                 host once the operator approves it, and only while every
                                                 file it touches is as the session found it (`harness apply`)

`lookup(ctx)` gives the calling session's workspace and its staged folder (`harness.mcp.service`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import checks
from harness.agent.assembly import Workspace
from harness.agent.inplace import RepoTask, write_base
from harness.core.apply import PatchConflict, apply_to_tree, load_run
from harness.errors import ToolArgumentsError, ToolError
from harness.mcp.patch_preview import binary_changes, describe_binary, refusal, shown_patch
from harness.tools.base import Effect, Observation, Tool, ToolContext
from harness.tools.outbound.action import OutboundAction, Prepared
from sandbox.text import escape_unsafe

Lookup = Callable[[ToolContext], tuple[Workspace, RepoTask]]

PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"}, "description": "paths the patch touches"},
        "patch": {"type": "string", "description": "unified diff against the folder as the session found it"},
    },
    "required": ["files", "patch"],
}


def patch_files(patch: str) -> list[str]:
    """The paths a unified diff touches (its `b/` side), sorted."""
    return sorted({line.split(" b/", 1)[1] for line in patch.splitlines()
                   if line.startswith("diff --git ") and " b/" in line})


def propose_tool(lookup: Lookup, root: Path) -> Tool:
    def run(ctx: ToolContext) -> Observation:
        patch = lookup(ctx)[0].patch()
        files = patch_files(patch)
        if not files:
            return Observation("no changes: /workspace holds the folder's files as the session found them",
                               {"files": [], "patch": ""})
        text = (f"{len(files)} file(s) changed: {', '.join(files)}. Nothing was written outside the "
                f"sandbox; `apply_changes` asks the operator to apply it to {root}.\n\n{patch}")
        return Observation(text, {"files": files, "patch": patch})

    parameters: dict[str, Any] = {"type": "object", "properties": {}, "required": [],
                                  "additionalProperties": False}
    return Tool(name="propose_changes", effect=Effect.READ, function=run, parameters=parameters,
                output_schema=PATCH_SCHEMA,
                description="Show the session's changes: the unified diff of /workspace against the files "
                            "as the session found them (caches left out). Changes nothing; use "
                            "`apply_changes` to have them written into the operator's folder.")


def apply_action(lookup: Lookup, root: Path, allow_binary: bool) -> OutboundAction:
    def prepare(_args: dict[str, Any], ctx: ToolContext) -> Prepared:
        workspace, repo = lookup(ctx)
        patch = workspace.patch()
        if not patch_files(patch):
            raise ToolArgumentsError("apply_changes: there are no changes to apply; /workspace holds the "
                                     "folder's files as the session found them")
        binary = binary_changes(patch)
        if binary and not allow_binary:
            raise refusal(binary, str(root))
        with tempfile.TemporaryDirectory(prefix="harness-mcp-") as tmp:
            base = json.loads(write_base(Path(tmp), repo, patch).read_text(encoding="utf-8"))
        shown = [line for change in binary for line in ["", *describe_binary(workspace.sandbox, change)]]
        preview = "\n".join([f"apply_changes: write this patch into {escape_unsafe(str(root))} "
                              f"({len(base['files'])} file(s), only if each is still as the session found it)",
                              "", escape_unsafe(shown_patch(patch)).rstrip("\n"), *shown])
        return Prepared({"folder": str(root), "patch": patch, "base": base}, preview)

    def execute(args: dict[str, Any], _ctx: ToolContext) -> str:
        if args.get("folder") != str(root):
            raise ToolError(f"not applied: request names the folder {escape_unsafe(str(args.get('folder')))}, this "
                            f"server serves {escape_unsafe(str(root))}")
        with tempfile.TemporaryDirectory(prefix="harness-mcp-") as tmp:
            run_dir = Path(tmp)
            checks.write_file(run_dir / "patch.diff", str(args["patch"]))
            checks.write_file(run_dir / "base.json", json.dumps(args["base"], indent=2) + "\n")
            try:
                applied = apply_to_tree(load_run(run_dir, root))
            except PatchConflict as exc:
                raise ToolError(f"not applied: {exc}") from exc
        return f"applied to {applied.repo}: {', '.join(applied.files)}"

    return OutboundAction(
        name="apply_changes", parameters={"type": "object", "properties": {}, "required": []},
        prepare=prepare, execute=execute, example={"key": "apply-1"},
        description="Write the session's changes (what `propose_changes` shows) into the operator's folder "
                    "on the host, after the operator approves the diff. Refused, with nothing written, "
                    "when a file it touches changed in the folder since the session started.")
