"""The shell tool: `bash` in the sandbox, its output cut the smart way (`truncation`: errors first, head
and tail, where to read the rest) with exit code and duration.

Internal to `harness.tools`: the catalog (`harness.tools.default_catalog`) is how others get these tools.
"""
