"""Domain types and host-side helpers that every layer may import.

Modules here import only the standard library, third-party libraries and the bottom-layer modules
`harness.checks` and `harness.errors`; never session, loop, tools, models, approval, evaluation or cli.
"""
