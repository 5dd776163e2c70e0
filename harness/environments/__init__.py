"""Task environments: host-built wheelhouses and the environment images built from them.

Used by the session (the image a task runs in), the `pip_download` tool (the same wheel download) and
evaluation (grading images). Imports harness.core, harness.checks, harness.errors and sandbox only.
"""
