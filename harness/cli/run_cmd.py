"""`harness run TASK`: one repair session on a task, with live progress and a short summary.

Exit codes: 0 the tests pass (or, without tests, the agent finished); 1 the session ran and did
not succeed (tests fail, turn cap, cut response, budget); 2 bad input; 3 the model API or the
sandbox failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from harness import checks
from harness.agent.external import run_external_session
from harness.agent.inplace import RepoTask, read_problem, repo_task, selection_lines, write_base
from harness.agent.loop import StepEvent, StopReason
from harness.agent.session import SessionOutcome, run_session, session_image
from harness.approval.wiring import resolve_mode
from harness.cli.common import EXIT_FAILED, EXIT_INFRA, print_safe, safe_line, stderr_progress
from harness.config import APPROVAL_MODES, Config, Secrets, load
from harness.core.records import SessionResult
from harness.core.task import Task, load_task
from harness.errors import ConfigError, TaskError
from harness.external import parse_agent
from harness.mcp.connect import start_servers
from harness.mcp.specs import parse_server
from harness.models.factory import make_model, resolve_auto, running
from harness.outputs import record_output
from sandbox.text import escape_ident

STOP_WORDS: dict[StopReason, str] = {
    "end": "the agent finished", "cap": "turn limit reached, the agent did not finish",
    "truncated": "a response was cut at max_tokens", "error": "the model API or the harness failed",
    "budget": "a budget ran out", "stuck": "the model repeated itself"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run one repair session on your repository or a task, in a fresh sandbox",
                       description="Run an agent on your project (--repo PATH with --problem or --problem-file) or "
                                   "on TASK (a task directory: task.json, problem.md, repo/) in a fresh "
                                   "network-less sandbox; write trajectory.jsonl, patch.diff and result.json. "
                                   "Your folder is only read: apply the patch with `harness apply RUN_DIR`.",
                       epilog="e.g. harness run --repo ~/code/shop --problem-file bug.md --test-cmd 'pytest -q'")
    p.add_argument("task", type=Path, nargs="?", help="task directory, e.g. tasks/wordcount")
    r = p.add_argument_group("repair in place (instead of TASK)")
    r.add_argument("--repo", type=Path, metavar="PATH", help="your project's folder (a git checkout or any folder)")
    r.add_argument("--problem", metavar="TEXT", help="the bug report or request, as text")
    r.add_argument("--problem-file", type=Path, metavar="FILE", help="the bug report or request, from a file")
    r.add_argument("--test-cmd", metavar="CMD", help="how the project's tests run, e.g. 'python -m pytest -q'")
    r.add_argument("--python", metavar="X", default="3.11", help="the sandbox's Python: 3.9, 3.11 or 3.13 "
                                                                 "(default 3.11)")
    r.add_argument("--include", action="append", default=[], metavar="PATTERN",
                   help="put back a file left out as a secret (a path or glob, e.g. --include config/.env.test)")
    r.add_argument("--requirements", type=Path, metavar="FILE",
                   help="the environment's requirements, instead of the project's own declarations")
    add_session_options(p)
    p.add_argument("--out", type=Path, help="output directory (default: runs/TASK-YYYYmmdd-HHMMSS)")
    p.add_argument("--resume", type=Path, metavar="DIR",
                   help="continue the run in DIR (its trajectory.jsonl) in a new sandbox")
    p.add_argument("--json", action="store_true", help="print result.json instead of the summary")
    b = p.add_argument_group("budgets (each stops the run as `budget` before the next model call)")
    b.add_argument("--max-total-tokens", type=int, metavar="N", help="input + output tokens")
    b.add_argument("--max-seconds", type=float, metavar="S", help="wall time of the agent loop")
    b.add_argument("--max-cost", type=float, metavar="USD", help="cost; needs --price (or model.prices)")
    p.set_defaults(func=_run)


def apply_budgets(config: Config, args: argparse.Namespace) -> Config:
    loop, model = config.loop, config.model
    for option, field_name in (("max_total_tokens", "max_total_tokens"), ("max_seconds", "max_wall_seconds"),
                               ("max_cost", "max_cost_usd")):
        value = getattr(args, option)
        if value is not None:
            if value <= 0:
                raise ConfigError(f"--{option.replace('_', '-')} must be positive, got {value}; "
                                  f"e.g. --{option.replace('_', '-')} 100000")
            loop = dataclasses.replace(loop, **{field_name: value})
    return config.replace(loop=loop, model=model)


def add_session_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="anthropic:MODEL, openai:MODEL, local:gemma3-270m, scripted:PATH, gold, empty "
                                   "(default: HARNESS_MODEL, else by the API key found)")
    p.add_argument("--agent", metavar="NAME",
                   help="run a third-party agent inside the sandbox instead of the harness's own loop, its model "
                        "calls answered through the host's gateway: mini-swe-agent, aider (NAME==VERSION pins "
                        "one), or 'cmd:COMMAND' for any other (docs/agents.md), e.g. --agent mini-swe-agent")
    p.add_argument("--max-turns", type=int, help="model calls per attempt (default 40)")
    p.add_argument("--price", type=float, nargs="+", metavar="USD",
                   help="USD per million tokens of this model, for its cost and --max-cost: input and output, then "
                        "optionally cached input read and written (else charged as input), e.g. --price 3 15 or "
                        "--price 3 15 0.3 3.75; without it the cost is unknown")
    p.add_argument("--tool-format", choices=["auto", "native", "react"],
                   help="native tool calls or a ReAct text prompt; auto (default): native, except for local: "
                        "models, which use the format that measured better (docs/loop.md)")
    p.add_argument("--attempts", type=int, help="Reflexion: attempts while the tests fail (default 1)")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://localhost:8000/v1")
    p.add_argument("--approve", choices=["auto", *APPROVAL_MODES],
                   help="who approves outbound calls: ask (prompt here, or `harness approvals`), queue (no "
                        "prompt), deny (policy rules only); auto = ask on a terminal, else deny")
    p.add_argument("--mcp", action="append", default=[], metavar="NAME=COMMAND",
                   help="an MCP server whose tools the model gets, as mcp_NAME_TOOL, each call held for approval "
                        "(repeatable), e.g. --mcp time='python -m mcp_server_time'")
    p.add_argument("--mcp-trust", action="append", default=[], metavar="NAME",
                   help="trust MCP server NAME's tool hints: its tools marked read-only and closed-world may be "
                        "approved by a policy rule (repeatable); an untrusted server's calls always ask "
                        "(docs/mcp.md)")


def apply_options(config: Config, args: argparse.Namespace) -> Config:
    """The config with the command line's choices applied (each option given overrides)."""
    model, loop = config.model, config.loop
    if getattr(args, "mcp", None):
        servers, named = dict(config.mcp.servers), set()
        for given in args.mcp:
            spec = parse_server(given)
            if spec.name in named:
                raise ConfigError(f"--mcp names the server {spec.name!r} twice; give each server its own name, "
                                  "e.g. --mcp time='python -m mcp_server_time'")
            named.add(spec.name)
            servers[spec.name] = given.partition("=")[2]
        config = config.replace(mcp=dataclasses.replace(config.mcp, servers=servers))
    if getattr(args, "mcp_trust", None):
        config = config.replace(mcp=dataclasses.replace(config.mcp, trusted=_trusted(config, args.mcp_trust)))
    if getattr(args, "approve", None):
        config = config.replace(approval=dataclasses.replace(config.approval, mode=args.approve))
    if args.model:
        model = dataclasses.replace(model, spec=args.model)
    if args.tool_format:
        model = dataclasses.replace(model, tool_format=args.tool_format)
    if args.base_url:
        model = dataclasses.replace(model, base_url=args.base_url)
    if getattr(args, "price", None):
        if len(args.price) not in (2, 4):
            raise ConfigError(f"--price takes 2 or 4 numbers (USD per million tokens: input, output[, cache read, "
                              f"cache write]), got {len(args.price)}: {args.price}; e.g. --price 3 15 0.3 3.75")
        model = dataclasses.replace(model, prices={**model.prices, model.spec: list(args.price)})
    if getattr(args, "agent", None):
        parse_agent(args.agent)        # a bad name fails here, before any build
        loop = dataclasses.replace(loop, agent=args.agent)
    for name in ("max_turns", "attempts"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}; "
                                  f"e.g. --{name.replace('_', '-')} 3")
            loop = dataclasses.replace(loop, **{name: value})
    return config.replace(model=model, loop=loop)


def _trusted(config: Config, names: list[str]) -> tuple[str, ...]:
    """The servers `--mcp-trust` names, each one a configured server (a typo would trust nothing, silently)."""
    unknown = [name for name in names if name not in config.mcp.servers]
    if unknown:
        raise ConfigError(f"--mcp-trust names {unknown}, which no --mcp (or mcp.servers) starts; configured: "
                          f"{sorted(config.mcp.servers)}; e.g. --mcp time='python -m mcp_server_time' "
                          "--mcp-trust time")
    return tuple(sorted({*config.mcp.trusted, *names}))


def find_task(path: Path) -> Task:
    if not path.exists() and (Path("tasks") / path).is_dir():
        path = Path("tasks") / path
    if not path.is_dir():
        raise TaskError(f"task directory {str(path)!r} does not exist; pass a folder holding task.json, "
                        "problem.md and repo/, e.g. harness run tasks/wordcount")
    return load_task(path)


def _run(args: argparse.Namespace) -> int:
    config, secrets = load()
    config = apply_options(config, args)
    config = apply_budgets(config.replace(model=dataclasses.replace(
        config.model, spec=resolve_auto(config.model.spec, config, secrets))), args)
    start_servers(config, say=stderr_progress())     # --mcp servers started now: a broken one fails the run here
    repo = _repo_task(args)
    task = repo.task if repo is not None else find_task(args.task)
    try:
        return _run_task(args, config, secrets, task, repo)
    finally:
        if repo is not None:
            repo.cleanup()


def _repo_task(args: argparse.Namespace) -> RepoTask | None:
    """The task of `--repo` (its files selected and staged, what was left out said), or None for TASK."""
    given = [f"--{n.replace('_', '-')}" for n in ("problem", "problem_file", "test_cmd", "requirements", "include")
             if getattr(args, n)]
    if args.repo is None:
        if args.task is None:
            raise TaskError("nothing to run: pass --repo PATH with --problem TEXT (your project) or a task "
                            "directory, e.g. harness run --repo . --problem-file bug.md, or harness run "
                            "tasks/wordcount")
        if given:
            raise TaskError(f"{', '.join(given)} go with --repo PATH; a task directory carries its own "
                            f"(task.json, problem.md), e.g. harness run --repo ~/code/shop --problem-file bug.md")
        return None
    if args.task is not None:
        raise TaskError(f"pass either a task directory ({args.task}) or --repo {args.repo}, not both")
    if args.resume is not None:
        raise TaskError("--resume continues a task directory's run; with --repo start a new run")
    problem = read_problem(args.problem, args.problem_file)
    repo = repo_task(args.repo, problem, test_cmd=args.test_cmd, python=args.python,
                     include=tuple(args.include), requirements=args.requirements)
    for line in selection_lines(repo.project):
        print_safe(sys.stderr, line)
    return repo


def _run_task(args: argparse.Namespace, config: Config, secrets: Secrets, task: Task,
              repo: RepoTask | None) -> int:
    out = args.out or args.resume or default_out(task, repo, config)
    for folder in (out, args.resume):   # a reused folder: no output may go through a planted link
        if folder is not None and (folder.exists() or folder.is_symlink()):
            checks.refuse_links(folder)
    resume = _resume_file(args.resume, args.out) if args.resume else None
    try:
        outcome = execute(task, config, secrets, out, resume_from=resume)
    except KeyboardInterrupt:
        again = (f"continue with: harness run {args.task} --resume {out} --model {config.model.spec}"
                 if repo is None else f"{repo.project.root} was not changed")
        print_safe(sys.stderr, f"harness run: interrupted; everything done so far is in {out}/trajectory.jsonl; "
                               f"{again}")
        raise
    if repo is not None:
        try:
            write_base(out, repo, outcome.patch)
        except TaskError as exc:
            print_safe(sys.stderr, f"harness apply cannot take this run's patch: {exc}; it is in {out}/patch.diff")
    if args.json:   # ASCII JSON: the same data, with nothing a terminal would act on
        result = out / "result.json"
        print(json.dumps(SessionResult.from_dict(json.loads(result.read_text()), str(result)).to_dict(), indent=2))
    else:
        print_summary(task, outcome)
        if repo is not None and outcome.patch.strip():
            print_safe(sys.stdout, f"review and apply: harness apply {out}   (or --branch NAME to commit it "
                                   f"on a new branch; {repo.project.root} was not changed)")
    return exit_code(outcome)


def _resume_file(folder: Path, out: Path | None) -> Path:
    """The trajectory to resume from; continuing in place keeps the earlier lines aside first."""
    trajectory = folder / "trajectory.jsonl"
    if not trajectory.is_file():
        attempts = sorted(str(p.parent) for p in folder.glob("attempt-*/trajectory.jsonl"))
        hint = f"; the attempts' folders are: {', '.join(attempts)}" if attempts else ""
        raise ConfigError(f"--resume {folder}: there is no {trajectory}; pass the --out folder of an earlier "
                          f"run, e.g. --resume runs/wordcount-20261129-124012{hint}")
    if out is not None:
        return trajectory
    kept = folder / "trajectory.before-resume.jsonl"
    trajectory.replace(kept)
    return kept


def default_out(task: Task, repo: RepoTask | None = None, config: Config | None = None) -> Path:
    """runs/TASK-YYYYmmdd-HHMMSS; for `--repo` run from inside that folder, the same under the state
    folder instead (the operator's folder is only read, never given a runs/ of ours)."""
    name = f"{task.id}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"
    if repo is not None and config is not None and Path.cwd().resolve().is_relative_to(repo.project.root):
        return config.approval.state_dir / "runs" / name
    return Path("runs") / name


def execute(task: Task, config: Config, secrets: Secrets, out: Path, *,
            resume_from: Path | None = None) -> SessionOutcome:
    """Make the model, build the images if needed, run the session with live progress on stderr: the
    harness's own loop, or the third-party agent `config.loop.agent` inside the sandbox."""
    agent = parse_agent(config.loop.agent) if config.loop.agent else None
    if agent is not None and resume_from is not None:
        raise ConfigError("--resume continues a run of the harness's own loop; a third-party agent's run starts "
                          f"anew: drop --resume, e.g. harness run {task.repo_dir.parent} --agent {agent.label}")
    model = make_model(config.model.spec, config, secrets, task=task,   # a bad spec fails before any build
                       for_agent=agent is not None)
    record_output(config.approval.state_dir, out)      # so `harness web` finds it wherever it is
    image = session_image(task, config, progress=stderr_progress("environment"))
    with running(model, say=stderr_progress("model")), \
            LiveProgress(task, model.name, spinner=_may_prompt(config) is False) as progress:
        if agent is not None:
            return run_external_session(task, agent, model, config, out, image=image, progress=progress)
        return run_session(task, model, config, out, image=image, secrets=secrets, progress=progress,
                           resume_from=resume_from)


def _may_prompt(config: Config) -> bool:
    """Whether an approval prompt may appear on this terminal (then no spinner redraws over it)."""
    return resolve_mode(config.approval.mode) == "ask"


class LiveProgress:
    """Turn, last tool and elapsed time on a terminal (rich): a line per tool call, and a spinner with
    the current state (its clock ticks while the model thinks) unless an approval prompt may need the
    terminal. Phase lines only when stderr is not a terminal. Names, phases and the model's name are
    hostile (the model picks tool names, a script's file name is the model's name): all shown escaped."""

    def __init__(self, task: Task, model: str, spinner: bool = True) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.spinner = spinner and self.live
        self.title = f"{task.id} · {model}"
        self.status: Any = None
        self.turn, self.tool, self.tokens = 0, "", 0
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        return safe_line(f"{self.title} · turn {self.turn} · last tool {self.tool or '-'} · "
                         f"{time.monotonic() - self.started:.0f}s · {self.tokens} tokens")

    def __enter__(self) -> Callable[[StepEvent | str], None]:
        self.started = time.monotonic()
        if self.spinner:
            self.status = self.console.status(self)
            self.status.start()
        return self.report

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def report(self, event: StepEvent | str) -> None:
        if isinstance(event, str):
            print_safe(self.console, f"{self.title}: {event}")
            return
        self.turn = event.turn
        self.tokens += event.usage.input_tokens + event.usage.output_tokens
        if event.kind == "tool":
            self.tool = f"{escape_ident(event.tool or '?')}{' (error)' if event.is_error else ''}"
            if self.live:
                print_safe(self.console, f"  turn {event.turn:>3}  {self.tool:<24} {event.elapsed:7.1f}s")
        elif self.live and not self.spinner:   # no status line: say when the model has answered
            used = event.usage.input_tokens + event.usage.output_tokens
            print_safe(self.console, f"  turn {event.turn:>3}  {'(model answered)':<24} {event.elapsed:7.1f}s"
                                     f"{f'  {used} tokens' if used else ''}", style="dim")


def print_summary(task: Task, o: SessionOutcome) -> None:
    tests = {True: "tests pass", False: "tests FAIL", None: "no tests"}[o.tests_passed]
    cost = f"${o.cost_usd:.4f}" if o.cost_usd is not None else "cost n/a (no price configured)"
    added = sum(1 for x in o.patch.splitlines() if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in o.patch.splitlines() if x.startswith("-") and not x.startswith("---"))
    files = sum(1 for x in o.patch.splitlines() if x.startswith("diff --git "))
    out = sys.stdout
    print_safe(out, f"{task.id}: {tests} · stopped: {o.stop_reason} ({STOP_WORDS.get(o.stop_reason, '')}) · "
                    f"{o.turns} turn(s) · {o.attempts} attempt(s) · {o.duration:.1f}s")
    print_safe(out, f"tokens: {o.usage.input_tokens} in, {o.usage.output_tokens} out, "
                    f"{o.usage.cache_read_tokens} cached · {cost}")
    print_safe(out, f"patch: {files} file(s), +{added} -{removed}")
    if o.stop_reason != "end" and o.final_text:
        print_safe(out, f"why it stopped: {o.final_text[:400]}")
    print_safe(out, f"files: {o.out_dir}/trajectory.jsonl, patch.diff, result.json")


def exit_code(o: SessionOutcome) -> int:
    if o.stop_reason == "error":
        return EXIT_INFRA
    if o.tests_passed is None:
        return 0 if o.stop_reason == "end" else EXIT_FAILED
    return 0 if o.tests_passed else EXIT_FAILED

