"""SWE-bench 5.0 rows that bring their own eval script: read, checked, and run in the grading sandbox.

Since 5.0.0 (2026-08) SWE-bench's datasets carry, beside the classic fields, what its harness needs to
grade a row without any recipe of its own (`swebench/harness/utils.py: make_test_spec`, `types.py:
TestSpec`, `task/checks.py` at commit 7a21e05):

    eval_script    the bash script the official harness runs in the instance's container, after the model
                   patch: activate the conda environment, `cd /testbed`, informational git commands,
                   reinstall the project, `git checkout <base_commit> <test files>`, apply the test patch
                   (a heredoc), then the test command between the lines ``: '>>>>> Start Test Output'`` and
                   ``: '>>>>> End Test Output'``, then the test files checked out again
    log_parser     the name of the parser of its log, as SWE-bench's registry spells it (`parse_log_django`)
    eval_type      ``pass_and_fail`` (every Python dataset) or ``fail_only`` (JavaScript datasets)
    image          the official image the script was written for (swebench/sweb.eval.x86_64.<id>:latest)
    image_assets   binary files of some multimodal rows, fetched by URL at grading time

Such a row is graded here with its own script and its own parser, in the usual fresh, network-less
grading sandbox on the harness's own offline environment image (the row's `image` names an image this
machine cannot pull: it is recorded at the top of the test log, never pulled or run). The harness first
prepares the tree as for every row (the model patch with 5.0's command chain, the test files put back,
the test patch applied); the row's script then runs as written, with the functions of
`harness/container_scripts/eval_compat.sh` standing in for what the official image has and ours has not
(conda, /testbed, the base commit's history, en_US.UTF-8, a network for the reinstall): each says on the
log what it did instead. The script runs up to its end marker: the test command is its last command, so
the exit status Docker reports for the script is the test command's own (5.0 records it by adding
``$?`` to the script's output, where a patch's code could print a forged one); the lines after the marker
only put the test files back in a container that is thrown away.

The script is hostile input: it is written into the sandbox as a file and run there by bash; no part of
it becomes a host path, a host command or an argument of one. The fields checked here are those that
decide how it runs: an unknown parser name is an error listing the known ones; a script without both
marker lines (outside its heredocs), a `fail_only` row, a row with binary assets, or one without a test
patch is refused with what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.core.task import Task
from harness.errors import TaskError
from harness.evaluation.log_parsers import UnknownParserError, parser_named

START_MARKER = ">>>>> Start Test Output"
END_MARKER = ">>>>> End Test Output"
START_LINE = f": '{START_MARKER}'"
END_LINE = f": '{END_MARKER}'"
MAX_SCRIPT_BYTES = 8 << 20        # the largest published script (a test patch in a heredoc) is under 1 MiB
EXTRA_KEY = "eval_script"         # where a task carries its row's script (`Task.extra`)

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1\s*$")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
_SCRIPT_EXAMPLE = ("#!/bin/bash\\nset -uxo pipefail\\n...\\n: '>>>>> Start Test Output'\\npytest -rA tests/test_x.py\\n"
                   ": '>>>>> End Test Output'\\n")


@dataclass(frozen=True)
class EvalScript:
    """A row's own eval script and the official image it names (recorded, never pulled)."""

    text: str
    image: str | None = None

    def until_tests_end(self) -> str:
        """The script's lines before its end marker line: what runs here (the test command is its last)."""
        lines, _, end = marker_lines(self.text)
        if end is None:       # checked when the row was read
            raise TaskError(f"the eval script has no {END_LINE!r} line")
        return "\n".join(lines[:end]) + "\n"


def marker_lines(text: str) -> tuple[list[str], int | None, int | None]:
    """The script's lines and the indexes of its start and end marker lines (None when absent), outside
    heredocs: a line inside a heredoc (the test patch) is data, never a marker."""
    lines = text.split("\n")
    start = end = None
    closing: str | None = None
    for number, line in enumerate(lines):
        if closing is not None:
            if line.strip() == closing:
                closing = None
            continue
        heredoc = _HEREDOC.search(line)
        if heredoc is not None:
            closing = heredoc.group(2)
        elif line.strip() == START_LINE and start is None:
            start = number
        elif line.strip() == END_LINE and start is not None and end is None:
            end = number
    return lines, start, end


def row_problems(row: dict[str, Any], where: str) -> list[str]:
    """Every problem of a row's 5.0 fields (none when the row has no `eval_script`)."""
    if row.get("eval_script") is None:
        return [] if row.get("log_parser") is None else _parser_problems(row.get("log_parser"), where)
    problems = _script_problems(row.get("eval_script"), where) + _parser_problems(row.get("log_parser"), where)
    eval_type = row.get("eval_type")
    if eval_type == "fail_only":
        problems.append(f"{where}: eval_type 'fail_only' is not supported: the harness grades as SWE-bench's "
                        "'pass_and_fail' (every Python dataset); 'fail_only' belongs to JavaScript datasets whose "
                        "parsers record failures only. Expected \"eval_type\": \"pass_and_fail\" or no eval_type")
    elif eval_type not in (None, "pass_and_fail"):
        problems.append(f"{where}: eval_type {eval_type!r} is not one of SWE-bench's; expected \"pass_and_fail\"")
    image = row.get("image")
    if image is not None and not (isinstance(image, str) and _IMAGE.fullmatch(image)):
        problems.append(f"{where}: image {str(image)[:80]!r} is not an image reference (letters, digits and "
                        "'._/:@+-', at most 255); expected e.g. \"swebench/sweb.eval.x86_64.owner_1776_name-1:latest\"")
    if row.get("image_assets") not in (None, "", "{}", {}):
        problems.append(f"{where}: image_assets are not supported: SWE-bench 5.0 fetches them by URL at grading "
                        "time, which an offline grading sandbox cannot; give the row without them")
    if not (isinstance(row.get("test_patch"), str) and row["test_patch"].strip()):
        problems.append(f"{where}: a row with an eval_script needs its test_patch: the script's `git checkout "
                        "<base_commit> <test files>` puts back the files of the test patch, which grading records")
    return problems


def _script_problems(script: object, where: str) -> list[str]:
    if not isinstance(script, str) or not script.strip():
        return [f"{where}: eval_script must be the text of a bash script, got {type(script).__name__}; "
                f"expected e.g. \"{_SCRIPT_EXAMPLE}\""]
    if len(script.encode("utf-8", errors="replace")) > MAX_SCRIPT_BYTES:
        return [f"{where}: eval_script is {len(script)} characters, more than the {MAX_SCRIPT_BYTES} bytes "
                "a script may have (MAX_SCRIPT_BYTES)"]
    lines, start, end = marker_lines(script)
    if start is None or end is None:
        missing = " and ".join(repr(m) for m, at in ((START_LINE, start), (END_LINE, end)) if at is None)
        return [f"{where}: eval_script has no {missing} line (outside its heredocs, after the start line for the "
                "end line): SWE-bench 5.0's scripts bracket the test command with these two lines, and only "
                f"the output between them is graded; expected e.g. \"{_SCRIPT_EXAMPLE}\""]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines[start + 1:end]):
        return [f"{where}: eval_script has no command between {START_LINE!r} and {END_LINE!r}: the test "
                f"command goes there; expected e.g. \"{_SCRIPT_EXAMPLE}\""]
    return []


def _parser_problems(name: object, where: str) -> list[str]:
    if name is None:
        return []
    try:
        parser_named(name)
    except UnknownParserError as exc:
        return [f"{where}: log_parser: {exc}"]
    return []


def row_parser(row: dict[str, Any]) -> str | None:
    """Our parser for the row's `log_parser` (checked by `row_problems`), None when the row names none."""
    name = row.get("log_parser")
    return None if name is None else parser_named(name)


def row_script(row: dict[str, Any]) -> EvalScript | None:
    """The row's eval script (checked by `row_problems`), None when it has none."""
    script = row.get("eval_script")
    if script is None:
        return None
    image = row.get("image")
    return EvalScript(text=str(script), image=image if isinstance(image, str) else None)


def script_of(task: Task) -> EvalScript | None:
    """The eval script a task carries from its row, if any."""
    script = task.extra.get(EXTRA_KEY)
    return script if isinstance(script, EvalScript) else None


def tests_part(log: str) -> str | None:
    """The part of a run's log that 5.0 grades: after the first start marker, up to the end marker if any;
    None when the script never reached its start marker."""
    _, found, after = log.partition(START_MARKER)
    if not found:
        return None
    return after.split(END_MARKER, 1)[0]
