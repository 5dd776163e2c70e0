"""The three stages of one attempt at an instance: its environment image, its patch, its grade.

Each stage fills in the instance's record and writes its files into the instance's folder; an
exception is left to the runner, which records it as the instance's infrastructure error. With a
warm pool (`EvalOptions.pool`), once the environment is known the sandboxes the instance will take
(its session's, its grading runs') start in the background, so the grading sandbox is ready when the
agent finishes.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import checks
from harness.agent.external import run_external_session
from harness.agent.session import run_session, session_spec
from harness.config import Config, Secrets
from harness.core.task import Task
from harness.environments import ensure_task_image, ensure_venv_image, sandbox_image
from harness.environments.standin import shims, stand_in
from harness.evaluation.grading import Grade, grade_patch, grading_spec
from harness.evaluation.instance_files import Prediction
from harness.evaluation.options import Cancelled, EvalOptions
from harness.evaluation.progress import Events
from harness.evaluation.report import InstanceRecord, InstanceStatus
from harness.external import parse_agent
from harness.models.factory import open_model
from sandbox.docker_client import client_or_default
from sandbox.pool import SandboxPool

REFERENCE_MODELS = ("gold", "empty")


class Stages:
    def __init__(self, config: Config, secrets: Secrets, options: EvalOptions, labels: Mapping[str, str],
                 cancel: threading.Event, events: Events, predictions: Mapping[str, Prediction] | None) -> None:
        self.config = config
        self.secrets = secrets
        self.options = options
        self.labels = dict(labels)
        self.cancel = cancel
        self.events = events
        self.predictions = predictions
        self.sandboxes = SandboxPool(options.pool, report=events.message) if options.pool > 0 else None

    def close(self) -> None:
        """Close the warm pool's sandboxes still waiting (none is left behind)."""
        if self.sandboxes is not None:
            pool = self.sandboxes
            pool.close()
            if pool.hits or pool.misses:
                self.events.message(f"warm pool: {pool.hits} of {pool.hits + pool.misses} sandbox(es) taken from "
                                    f"the pool, {pool.misses} started on demand, {pool.discarded} started "
                                    "ahead and not needed")

    def _check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def environment(self, task: Task, record: InstanceRecord) -> str:
        """The task's environment image, built if needed."""
        self._check()
        t0 = time.monotonic()
        record.repo = str(task.extra["repo"]) if task.extra.get("repo") else None
        record.python_used = task.python
        record.python_requested = task.environment.python_requested if task.environment else task.python
        record.stand_in = stand_in(record.python_requested, task.python)
        record.shims = list(shims(record.python_requested, task.python))

        def say(text: str) -> None:   # called only while something is being built
            self.events.stage(record.key, text)
            if not text.startswith("Step "):     # the environment's words often name the task already
                self.events.message(f"{record.key}: {text.removeprefix(f'{task.id}: ')}")

        if self.config.sandbox.image == "auto":
            self.events.stage(record.key, f"sandbox image for Python {task.python}")
        base = sandbox_image(self.config, task.python, say, task=task)
        env_tag = None
        if task.environment is not None:   # the shared environment (built, or waited for), then the instance
            env_tag = ensure_venv_image(task, base, client=client_or_default(None), progress=say)
            record.durations["environment"] = round(time.monotonic() - t0, 3)
        t1 = time.monotonic()
        image = ensure_task_image(task, base, progress=say, env_tag=env_tag,
                                 direct_references=self.options.allow_direct_references)
        if task.environment is not None:
            record.durations["instance"] = round(time.monotonic() - t1, 3)
        else:
            record.durations["environment"] = round(time.monotonic() - t0, 3)
        if self.sandboxes is not None:
            if self.predictions is None:
                self.sandboxes.expect(session_spec(task, self.config, image, self.labels))
            self.sandboxes.expect(grading_spec(task, image, self.labels), uses=max(1, self.options.grade_runs))
        return image

    def patch(self, task: Task, folder: Path, image: str, record: InstanceRecord) -> str | None:
        """The instance's patch: the given prediction, or the one an agent session produces."""
        self._check()
        if self.predictions is not None:
            prediction = self.predictions[task.id]
            record.model_name_or_path = prediction.model_name_or_path
            record.model_patch = prediction.model_patch
            checks.write_file(folder / "patch.diff", prediction.model_patch or "")
            return prediction.model_patch
        return self._session(task, folder, image, record)

    def _session(self, task: Task, folder: Path, image: str, record: InstanceRecord) -> str:
        spec = self.options.model or ""
        # the reference models never read test output: skip the session's own test run for them
        session_task = dataclasses.replace(task, test_cmd=None) if spec in REFERENCE_MODELS else task
        # nor do they query code: no find_code index is prepared for them
        config = self.config if spec not in REFERENCE_MODELS else self.config.replace(
            tools=dataclasses.replace(self.config.tools, prewarm_index=False))
        key = record.key
        self.events.stage(key, "agent session")
        t0 = time.monotonic()
        agent = parse_agent(config.loop.agent) if config.loop.agent else None
        with open_model(spec, self.config, self.secrets, task=task, for_agent=agent is not None,
                        attempt=record.epoch or 1,     # a scripted plan replays each attempt's own script
                        say=lambda m: self.events.stage(key, m)) as model:   # a local: model's server runs here
            if agent is not None:   # a third-party agent inside the sandbox, its model calls through the gateway
                outcome = run_external_session(session_task, agent, model, config, folder, image=image,
                                               labels=self.labels, progress=lambda e: self._session_event(key, e),
                                               sandboxes=self.sandboxes)
            else:
                outcome = run_session(session_task, model, config, folder, image=image, secrets=self.secrets,
                                      labels=self.labels, progress=lambda e: self._session_event(key, e),
                                      sandboxes=self.sandboxes)
        record.durations["session"] = round(time.monotonic() - t0, 3)
        record.agent = agent.label if agent is not None else None
        record.turns = outcome.turns
        record.tokens = dataclasses.asdict(outcome.usage)
        record.cost_usd = outcome.cost_usd
        record.stop_reason = outcome.stop_reason
        record.model_patch = outcome.patch
        return outcome.patch

    def _session_event(self, instance_id: str, event: Any) -> None:
        if isinstance(event, str):
            self.events.stage(instance_id, event)
        elif hasattr(event, "turn"):
            self.events.stage(instance_id, f"agent turn {event.turn}")

    def grade(self, task: Task, patch: str | None, image: str, folder: Path, record: InstanceRecord) -> None:
        """Grade the patch in fresh sandboxes and set the record's status."""
        self._check()
        self.events.stage(record.key, "grading")
        t0 = time.monotonic()
        grade = grade_patch(task, patch, image, runs=self.options.grade_runs,
                            timeout=self.options.test_timeout, labels=self.labels, sandboxes=self.sandboxes)
        record.durations["grading"] = round(time.monotonic() - t0, 3)
        record.durations["tests"] = round(grade.test_seconds, 3)
        write_grade_files(folder, task, grade)
        record.flaky = grade.flaky
        record.tests_resolved = grade.resolved if grade.runs else None
        record.status = instance_status(patch, grade)
        record.failure_reason = grade.failure_reason if record.status == "unresolved" else None


def instance_status(patch: str | None, grade: Grade) -> InstanceStatus:
    """The status of an instance whose patch was graded (or was empty)."""
    if not patch or not patch.strip():
        return "empty_patch"
    if not grade.patch_applied:
        return "patch_failed"
    return "resolved" if grade.resolved else "unresolved"


def write_grade_files(folder: Path, task: Task, grade: Grade) -> None:
    checks.write_file(folder / "patch_apply.txt", grade.patch_output + "\n")
    checks.write_file(folder / "report.json", json.dumps(grade.report(task.id).to_dict(), indent=2) + "\n")
    for number, run in enumerate(grade.runs, 1):
        name = "test_output.txt" if number == 1 else f"test_output.run{number}.txt"
        checks.write_file(folder / name, run.output)
    if grade.runs:
        details = [{"run": n, "exit_code": r.exit_code, "duration": round(r.duration, 3), "timed_out": r.timed_out,
                    "resolved": r.resolved, "rejected": r.rejected.to_dict() if r.rejected else None,
                    "tests": r.status} for n, r in enumerate(grade.runs, 1)]
        checks.write_file(folder / "grading.json", json.dumps(details, indent=2) + "\n")
