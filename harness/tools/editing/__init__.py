"""Viewing and changing files: `view`, `write`, `edit` (anchor replacement) and `apply_patch` (unified
diff), each committed through `commit` (compare-and-swap on SHA-256 fingerprints, idempotency keys)
and checked by the `lint` gate (pyflakes). `unified_diff` and `anchors` are the engines.

Internal to `harness.tools`: the catalog (`harness.tools.default_catalog`) is how others get these tools.
"""
