"""The model's tool catalog: each tool is data (name, description, JSON Schema, effect) plus a function.

Folders by job: `shell/` (bash and its truncated observation), `editing/` (view, write, edit,
apply_patch, the compare-and-swap commit, the lint gate), `retrieval/` (search, find_code),
`outbound/` (actions that leave the sandbox; the approval gate holds them). `catalog` validates
arguments and runs calls; `paths` is the one path check. Imports the core layer and `sandbox`; never
`approval`, `models` or anything above.
"""

from harness.tools.base import Approver, Effect, Tool, ToolContext, error_kind, key_schema
from harness.tools.catalog import Catalog, default_catalog

__all__ = ["Approver", "Catalog", "Effect", "Tool", "ToolContext", "default_catalog", "error_kind", "key_schema"]
