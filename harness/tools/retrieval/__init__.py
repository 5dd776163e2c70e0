"""Finding code: `search` (grep in the sandbox, capped, with counts) and `find_code` (BM25 over code
chunks, `chunks` and `code_index`).

Internal to `harness.tools`: the catalog (`harness.tools.default_catalog`) is how others get these tools.
"""
