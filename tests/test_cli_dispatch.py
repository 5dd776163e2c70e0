"""The `harness` command imports only the subcommand it runs; help and a misspelt name still list them all."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.cli.common import stderr_progress
from harness.cli.main import SUBCOMMANDS

PROBE = """
import sys
from harness.cli.main import build_parser
build_parser({argv!r})
names = [m.split(".")[-1] for m in sys.modules if m.startswith("harness.cli.")]
print(" ".join(sorted(n[:-4] for n in names if n.endswith("_cmd"))))
"""


def _registered(argv: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-P", "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


def test_a_command_line_registers_only_the_subcommand_it_names() -> None:
    assert _registered(["exec", "--dir", "x", "--", "true"]) == ["exec"]
    evaluation = _registered(["eval", "--help"])    # and the modules that one imports itself
    assert "eval" in evaluation and "web" not in evaluation and "mcp" not in evaluation
    assert _registered([]) == sorted(SUBCOMMANDS)              # positive control: all of them
    assert _registered(["--help"]) == sorted(SUBCOMMANDS)
    assert _registered(["-h", "exec"]) == sorted(SUBCOMMANDS)


def test_help_and_a_misspelt_command_still_list_every_subcommand() -> None:
    harness = [sys.executable, "-P", "-m", "harness.cli.main"]
    listed = subprocess.run([*harness, "--help"], capture_output=True, text=True, check=True).stdout
    assert all(name in listed for name in SUBCOMMANDS)
    wrong = subprocess.run([*harness, "exce"], capture_output=True, text=True)
    assert wrong.returncode == 2
    assert "invalid choice: 'exce' (choose from " in wrong.stderr and all(f"'{n}'" in wrong.stderr for n in SUBCOMMANDS)
    own = subprocess.run([*harness, "exec", "--help"], capture_output=True, text=True, check=True).stdout
    assert own.startswith("usage: harness exec ")


def test_progress_names_the_instance_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The environment builds already name their task in what they say; the batch printer does not name
    it again (it printed "django__django-15202: django__django-15202: imports: django")."""
    report = stderr_progress("django__django-15202")
    report("django__django-15202: imports: django")
    report("built harness-env:inst-1 in 3.0s")
    assert capsys.readouterr().err.splitlines() == ["django__django-15202: imports: django",
                                                     "django__django-15202: built harness-env:inst-1 in 3.0s"]
