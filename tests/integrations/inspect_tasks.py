"""Inspect tasks that `inspect eval` runs against the `harness` sandbox (tests/integrations/test_inspect.py).

`probe`: a scripted solver checks exec, read_file and write_file against Inspect's contract and records
each check in the sample's metadata; the scorer is CORRECT only if every check held.
`bash_agent`: Inspect's own bash tool driven by mockllm (a scripted tool call, then an answer).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import OutputLimitExceededError, SandboxUserUnsupportedError, sandbox


async def _raises(call: Callable[[], Awaitable[Any]], error: type[BaseException]) -> str:
    try:
        await call()
    except error:
        return error.__name__           # Inspect may raise a subclass (its SandboxTimeoutError, say)
    except BaseException as exc:  # noqa: BLE001 - the check records what was raised instead
        return f"wrong: {type(exc).__name__}: {exc}"
    return "wrong: nothing raised"


async def _checks() -> dict[str, Any]:
    box = sandbox()
    got: dict[str, Any] = {}
    r = await box.exec(["bash", "-c", "pwd; echo $FOO; cat note.txt; printf 'e\\r\\n' >&2; exit 3"], env={"FOO": "bar"})
    got["exec"] = [r.success, r.returncode, r.stdout, r.stderr]
    got["stdin"] = (await box.exec(["cat"], input="fed in\n")).stdout
    got["cwd"] = (await box.exec(["pwd"], cwd="sub")).stdout if (await box.exec(["mkdir", "sub"])).success else "?"
    got["testbed"] = (await box.exec(["pwd"], cwd="/testbed")).stdout
    got["missing_program"] = (await box.exec(["no-such-program"])).returncode
    await box.write_file("deep/dir/bytes.bin", b"\x00\x01\r\n")
    got["bytes"] = list(await box.read_file("deep/dir/bytes.bin", text=False))
    await box.write_file("crlf.txt", "a\r\nb\n")
    got["text"] = await box.read_file("crlf.txt")
    got["not_found"] = await _raises(lambda: box.read_file("nope.txt"), FileNotFoundError)
    got["read_dir"] = await _raises(lambda: box.read_file("deep"), IsADirectoryError)
    got["write_dir"] = await _raises(lambda: box.write_file("deep", "x"), IsADirectoryError)
    got["write_denied"] = await _raises(lambda: box.write_file("/etc/passwd", "x"), PermissionError)
    got["read_denied"] = await _raises(lambda: box.read_file("/etc/shadow"), PermissionError)
    got["exec_denied"] = await _raises(lambda: box.exec(["/etc/passwd"]), PermissionError)
    got["root"] = await _raises(lambda: box.exec(["id"], user="root"), SandboxUserUnsupportedError)
    got["timeout"] = await _raises(lambda: box.exec(["bash", "-c", "sleep 30"], timeout=1), TimeoutError)
    got["after_timeout"] = (await box.exec(["bash", "-c", "ps -eo comm= | grep -c '^sleep$'"])).stdout
    got["output_limit"] = await _raises(lambda: box.exec(["bash", "-c", "head -c 5000 /dev/zero"]),
                                        OutputLimitExceededError)
    await box.exec(["bash", "-c", "head -c 5000 /dev/zero > big.bin"])
    got["read_limit"] = await _raises(lambda: box.read_file("big.bin", text=False), OutputLimitExceededError)
    return got


EXPECTED = {
    "exec": [False, 3, "/workspace\nbar\nhello\n", "e\r\n"], "stdin": "fed in\n", "cwd": "/workspace/sub\n",
    "testbed": "/workspace\n", "missing_program": 127, "bytes": [0, 1, 13, 10], "text": "a\r\nb\n",
    "not_found": "FileNotFoundError", "read_dir": "IsADirectoryError", "write_dir": "IsADirectoryError",
    "write_denied": "PermissionError", "read_denied": "PermissionError", "exec_denied": "PermissionError",
    "root": "SandboxUserUnsupportedError", "timeout": "TimeoutError", "after_timeout": "0\n",
    "output_limit": "OutputLimitExceededError", "read_limit": "OutputLimitExceededError",
}


@solver
def run_checks() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.metadata["checks"] = await _checks()
        return state
    return solve


@scorer(metrics=[accuracy()])
def all_checks_hold() -> Any:
    async def score(state: TaskState, target: Target) -> Score:
        got = state.metadata["checks"]
        wrong = {k: {"got": got.get(k), "expected": v} for k, v in EXPECTED.items() if got.get(k) != v}
        return Score(value=CORRECT if not wrong else INCORRECT, explanation=json.dumps(wrong))
    return score


@task
def probe() -> Task:
    return Task(dataset=[Sample(input="probe the sandbox", files={"note.txt": "hello\n"})],
                solver=run_checks(), scorer=all_checks_hold(), sandbox="harness")


@scorer(metrics=[accuracy()])
def file_written() -> Any:
    async def score(state: TaskState, target: Target) -> Score:
        content = await sandbox().read_file("out.txt")
        tool_said = [m.text for m in state.messages if m.role == "tool"]
        return Score(value=CORRECT if content == target.text else INCORRECT,
                     explanation=json.dumps({"file": content, "tool": tool_said}))
    return score


@task
def bash_agent() -> Task:
    call = {"command": "echo hi > out.txt && cat out.txt && whoami"}
    outputs = [ModelOutput.for_tool_call("mockllm/model", "bash", call),
               ModelOutput.from_content("mockllm/model", "done")]
    for output in outputs:   # given usage, mockllm does not count tokens (tiktoken would download its tables)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    model = get_model("mockllm/model", custom_outputs=outputs)
    return Task(dataset=[Sample(input="write hi into out.txt", target="hi\n")],
                solver=[use_tools(bash(timeout=30)), generate()], scorer=file_written(), sandbox="harness",
                model=model)
