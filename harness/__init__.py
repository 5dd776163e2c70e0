"""harness: a sandboxed coding-agent harness.

Layers, each importing only those below it (`tests/test_imports.py` holds the table; the README's
Architecture section explains it): `core`, `checks`, `errors`, `config`, `messages`, `trajectory`,
`history` at the bottom; then `environments`; `models` and `tools`; `approval`; `loop`, `workspace`,
`session`; `evaluation`; `cli` on top. Each package's `__init__` names what other packages may use.
"""
