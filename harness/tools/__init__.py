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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.tools.base import Approver, Effect, Tool, ToolContext, error_kind, key_schema
    from harness.tools.catalog import Catalog, default_catalog

__all__ = ["Approver", "Catalog", "Effect", "Tool", "ToolContext", "default_catalog", "error_kind", "key_schema"]

_MODULE = {"Approver": "base", "Effect": "base", "Tool": "base", "ToolContext": "base", "error_kind": "base",
           "key_schema": "base", "Catalog": "catalog", "default_catalog": "catalog"}


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"harness.tools.{module}"), name)
    globals()[name] = value
    return value
