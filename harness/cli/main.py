"""The `harness` command: parsing and dispatch only. Each subcommand lives in its own module.

Exit codes: 0 success; 1 the job ran and failed (tests failed, command exited non-zero is passed
through by `harness exec`); 2 bad input; 3 infrastructure (Docker, image, model API) failure;
130 interrupted (Ctrl-C or SIGTERM; containers are removed first); 141 the output pipe closed.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from types import TracebackType

from harness.cli.common import EXIT_BROKEN_PIPE, EXIT_INFRA, EXIT_INTERRUPTED, EXIT_USAGE, print_safe
from harness.core import process_tree
from harness.errors import ConfigError, HarnessError, TaskError, UnsafePathError
from sandbox.errors import DockerUnavailable, SandboxError

STUCK_GRACE_SECONDS = 5.0   # after an interruption, how long threads still running get before the process ends

SUBCOMMANDS = ["demo", "run", "apply", "exec", "shell", "sandbox", "tools", "approvals", "tasks", "eval", "mcp",
               "web", "model"]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; given the command line, of the one subcommand it names only.

    Registering a subcommand imports its module, and with it what the command needs (the MCP SDK, the
    web server, Ray's backend...): all fourteen took 0.4 s of every command's start here. A command
    line that names none (`harness`, `harness --help`, a misspelt name) gets all of them, so help and
    the error list every choice."""
    parser = argparse.ArgumentParser(
        prog="harness",
        description="A sandboxed coding-agent harness: repair code with an LLM agent in a hardened, "
                    "network-less Docker sandbox; evaluate agents in batch.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = [argv[0]] if argv and argv[0] in SUBCOMMANDS else SUBCOMMANDS
    for name in named:
        module = importlib.import_module(f"harness.cli.{name}_cmd")
        module.register(sub)
    return parser


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every `with` block removes its containers on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def _print_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """A bug's traceback, escaped like every other line: its message may quote a hostile value."""
    print_safe(sys.stderr, "".join(traceback.format_exception(kind, exc, tb)).rstrip())


def main(argv: list[str] | None = None) -> int:
    sys.excepthook = _print_uncaught
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # the reader went away (`harness tools | head`): stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print_safe(sys.stderr, "interrupted; containers of this run were removed")
        _end_if_stuck(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except (ConfigError, TaskError, UnsafePathError) as exc:   # messages quote hostile values: ids, commits
        print_safe(sys.stderr, f"harness: error: {exc}")
        return EXIT_USAGE
    except DockerUnavailable as exc:
        print_safe(sys.stderr, f"harness: Docker is not available: {exc}")
        return EXIT_INFRA
    except (SandboxError, HarnessError) as exc:
        print_safe(sys.stderr, f"harness: {type(exc).__name__}: {exc}")
        return EXIT_INFRA


def _end_if_stuck(code: int) -> None:
    """After an interruption, end the process now if a worker thread is still blocked.

    A cancelled `harness eval` has removed its containers and written its outputs by the time it gets
    here, but a worker may still be inside a call that does not return soon: the stream of a `docker
    build` (an environment's install runs for many minutes), a `pip download` or a resolver on the
    host. Python's exit joins every such thread, so the command would go on for as long as that call
    does. Instead, after `STUCK_GRACE_SECONDS`: the host processes this process started are killed
    (with their own children), the exit handlers run (temporary folders are removed), and the process
    ends with `code`. Its sockets close with it: the daemon cancels a build whose client is gone, and
    every sandbox tied to its lifeline stops (`sandbox.deployment.lifeline`)."""
    deadline = time.monotonic() + STUCK_GRACE_SECONDS
    for thread in _running_threads():
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = _running_threads()
    if not stuck:
        return
    names = ", ".join(sorted({t.name.rsplit("_", 1)[0] for t in stuck}))
    print_safe(sys.stderr, f"{len(stuck)} worker thread(s) ({names}) still blocked; ending them with the process")
    kill_descendants(os.getpid())
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _running_threads() -> list[threading.Thread]:
    """The threads Python's exit would wait for: alive, not daemons, not this one."""
    return [t for t in threading.enumerate()
            if t.is_alive() and not t.daemon and t is not threading.current_thread()]


def kill_descendants(pid: int) -> list[int]:
    """SIGKILL every process below `pid` (children, their children...); returns their pids."""
    found = sorted(process_tree(pid) - {pid})
    for child in found:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)
    return found


if __name__ == "__main__":
    sys.exit(main())
