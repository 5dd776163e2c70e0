"""The model's tool catalog: each tool is data (name, description, JSON Schema, effect) plus a function.

Folders by job: `shell/` (bash and its truncated observation), `editing/` (view, write, edit,
apply_patch, the compare-and-swap commit, the lint gate), `retrieval/` (search, find_code),
`outbound/` (actions that leave the sandbox; the approval gate holds them). `catalog` validates
arguments and runs calls; `paths` is the one path check. Imports the core layer and `sandbox`; never
`approval`, `models` or anything above.

The names below are imported on first use: a process that needs one module of a folder (a worker of
`find_code`'s analysis imports `retrieval.analysis` alone) does not pay for the whole catalog and its
JSON Schema validator (170 ms of a worker's start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sandbox.surface import lazy_names

if TYPE_CHECKING:
    from harness.tools.base import Approver, Effect, Observation, Tool, ToolContext, error_kind, key_schema
    from harness.tools.catalog import Catalog, default_catalog, unknown_tool_message
    from harness.tools.outbound.action import OutboundAction, Prepared, outbound_tool
    from harness.tools.outbound.preview import field_lines, gutter
    from harness.tools.outbound.registry import outbound_tools
    from harness.tools.retrieval.chunk_cache import shared_cache
    from harness.tools.retrieval.code_index import CodeIndex
    from harness.tools.retrieval.find_code import warm_index
    from harness.tools.schema import regular_expressions, schema_problems
    from harness.tools.shell.bash import budget_of, run_command

__all__ = [
    "Approver", "Catalog", "CodeIndex", "default_catalog", "Effect", "error_kind", "field_lines", "gutter",
    "key_schema", "Observation", "outbound_tool", "outbound_tools", "OutboundAction", "Prepared",
    "regular_expressions", "run_command", "budget_of", "schema_problems", "shared_cache", "Tool", "ToolContext",
    "unknown_tool_message", "warm_index",
]

__getattr__ = lazy_names(__name__, {
    "harness.tools.base": ("Approver", "Effect", "Observation", "Tool", "ToolContext", "error_kind", "key_schema"),
    "harness.tools.catalog": ("Catalog", "default_catalog", "unknown_tool_message"),
    "harness.tools.outbound.action": ("OutboundAction", "Prepared", "outbound_tool"),
    "harness.tools.outbound.preview": ("field_lines", "gutter"),
    "harness.tools.outbound.registry": ("outbound_tools",),
    "harness.tools.retrieval.chunk_cache": ("shared_cache",),
    "harness.tools.retrieval.code_index": ("CodeIndex",),
    "harness.tools.retrieval.find_code": ("warm_index",),
    "harness.tools.schema": ("regular_expressions", "schema_problems"),
    "harness.tools.shell.bash": ("budget_of", "run_command"),
})
