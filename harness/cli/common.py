"""Small pieces the subcommands share: printing hostile text, the exit codes, and the workspace of a folder
(`harness exec`, `harness shell`: the one a session gets, from `harness.agent.assembly`).

Every line the CLI prints goes through `print_safe`: names, ids, paths, model text, command output and
exception messages may all come from the model or an input file, so each is escaped by the one
escaper (`sandbox.text.escape_unsafe`) and is never read as rich markup. Rich renderables get their
text from `safe_line`. The other `print(` calls left print ASCII JSON (`json.dumps` escapes every
control and non-ASCII character).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.text import Text

from harness.agent.assembly import Workspace, new_session_name, open_workspace, sandbox_spec
from harness.config import Config
from harness.environments import sandbox_image
from sandbox.text import escape_unsafe

# The exit codes of every subcommand, defined here only. 124 and 125 follow `timeout(1)` and `docker run`;
# 130 and 141 are the shell's for SIGINT and SIGPIPE.
EXIT_FAILED = 1             # the work ran and did not succeed (tests fail, the agent did not finish, refused)
EXIT_USAGE = 2              # bad input: arguments, config, a task or a request that does not exist
EXIT_INFRA = 3              # the harness, Docker or the model API failed
EXIT_NOT_CONFIRMED = 3      # `harness approvals approve` without --hash: the human did not confirm
EXIT_TIMEOUT = 124          # `harness exec`: the command was killed at its timeout
EXIT_HARNESS_FAILED = 125   # `harness exec`: the harness failed; the command did not run or its outcome is unknown
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def safe_line(text: object, style: str = "") -> Text:
    """`text` as a rich `Text`: controls and invisible characters shown as escapes (`\\x1b`), and
    `[bold]` shown as written, never applied as markup."""
    return Text(escape_unsafe(str(text)), style=style)


def print_safe(out: Console | TextIO, text: object, *, style: str = "") -> None:
    """Print `text`, which may hold values the model or an input file chose, on `out` (a rich console
    or a stream), escaped and never interpreted as markup or highlighted."""
    if isinstance(out, Console):
        out.print(safe_line(text, style), highlight=False)
    else:
        out.write(escape_unsafe(str(text)) + "\n")
        out.flush()


def stderr_progress(prefix: str = "harness") -> Callable[[str], None]:
    def report(message: str) -> None:   # build output: the task's install steps print what they like
        said = message if message.startswith(f"{prefix}: ") else f"{prefix}: {message}"   # named once
        print_safe(sys.stderr, said)
    return report


def open_folder_workspace(directory: Path | None, config: Config, *, quiet: bool = False) -> Workspace:
    """The workspace a session gets, holding `directory`'s files (none: an empty /workspace): the sandbox
    image, the configured limits, /workspace the agent's git repository on its baseline, the session's
    catalog and context (no approver: outbound calls are refused). The caller closes it, or uses `with`."""
    progress = (lambda _m: None) if quiet else stderr_progress("sandbox build")
    image = sandbox_image(config, config.sandbox.python, progress)
    spec = sandbox_spec("cli", image, new_session_name("cli"), config.sandbox.limits, project_dir=directory)
    return open_workspace(spec, config, None)
