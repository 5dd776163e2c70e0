"""The `harness` command (`harness.cli.main:main`): one module per subcommand, parsing and printing
only; nothing imports it. It re-exports nothing: `python -m harness.cli.main` must find `main` not yet
imported.

Hostile text (anything the model or an input file controls) reaches the terminal only through
`common.print_safe` / `common.safe_line`.
"""
