"""The `harness` command: one module per subcommand, parsing and printing only; nothing imports it.

Hostile text (anything the model or an input file controls) reaches the terminal only through
`common.print_safe` / `common.safe_line`.
"""

from harness.cli.main import main

__all__ = ["main"]
