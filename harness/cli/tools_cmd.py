"""`harness tools`: print the tool catalog a session gets (`--json`: the exact definitions sent).

The catalog is the one `harness run` builds: the default tools plus the outbound tools (held for
approval) that every session receives.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from harness import config as config_module
from harness.cli.common import print_safe
from harness.tools.catalog import default_catalog
from harness.tools.outbound.registry import outbound_tools


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tools", help="print the tools the model gets",
                       description="Print the tool catalog of a session: each tool's name, effect class "
                                   "(read / sandbox / outbound) and description. With --json, the full "
                                   "definitions (name, description, JSON Schema of the arguments, effect).")
    p.add_argument("--json", action="store_true", help="print the definitions as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    cfg, _ = config_module.load()
    catalog = default_catalog(cfg, outbound_tools(cfg))
    if args.json:
        specs = [{**tool.spec(), "effect": tool.effect.value} for tool in catalog.tools.values()]
        print(json.dumps(specs, indent=2))   # ASCII JSON: nothing a terminal would act on
        return 0
    for tool in catalog.tools.values():
        required = set(tool.parameters.get("required", []))
        params = ", ".join(n if n in required else f"[{n}]" for n in tool.parameters.get("properties", {}))
        print_safe(sys.stdout, f"{tool.name}({params})  [{tool.effect.value}]")   # names and texts of the config
        for line in tool.description.split("\n"):
            print_safe(sys.stdout, textwrap.fill(line, 100, initial_indent="    ", subsequent_indent="    "))
        print_safe(sys.stdout, "")
    outbound = sum(1 for t in catalog.tools.values() if t.effect.value == "outbound")
    print_safe(sys.stdout, f"{len(catalog.tools)} tools ({outbound} outbound: each call waits for approval and "
                           "runs once); `harness tools --json` prints their full definitions.")
    return 0
