"""mini-swe-agent's environment, backed by the harness's hardened sandbox (`pip install 'harness[mini]'`).

mini names its environment by import path, so its own CLIs run unchanged with every command executed
in a network-less sandbox through the harness's channel:

    mini -c mini.yaml -c environment.environment_class=harness.integrations.mini.HarnessEnvironment \\
         -c environment.project=/path/to/repo -t "fix the failing test"

`execute` honours the working directory (mini's SWE-bench config says /testbed: mapped onto the
sandbox's /workspace, `_sandbox.sandbox_path`), the environment variables and the timeout, and answers
in mini's shape: {"output", "returncode", "exception_info"}, stderr merged into the output as mini's
docker environment does, plus "extra" on a timeout. A command that times out is killed inside the
sandbox with every process it started (the channel kills the process group and sweeps leftovers;
mini's own docker environment only kills the `docker exec` client). Output beyond what the channel
keeps is cut in the middle, and the cut says how much and where the whole output is saved.

The sandbox starts when the environment is made and is removed by `close()`; mini's runners never
call a cleanup, so a `weakref.finalize` removes it when mini drops the object or the interpreter exits
(and the sandbox's labels let `harness sandbox reap` remove it if the process is killed).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import platform
import shlex
import subprocess
import weakref
from dataclasses import dataclass, field
from typing import Any

from minisweagent.exceptions import Submitted
from minisweagent.utils.serialize import recursive_merge

from harness.errors import HarnessError
from harness.integrations._sandbox import AdapterSandbox, Target, open_for_adapter, sandbox_path
from sandbox.api import WORKDIR, ExecResult, StreamCapture
from sandbox.errors import ChannelClosed
from sandbox.text import escape_ident

logger = logging.getLogger(__name__)

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""The first output line by which mini's prompts end a run (the rest of the output is the submission)."""


@dataclass
class HarnessEnvironmentConfig:
    """The keys mini's `environment:` section may hold for this class; any other key is refused.

    `cwd`, `env`, `forward_env`, `timeout` and `interpreter` mean what they mean for mini's docker
    environment. The files and the image come from one of `project`, `task`, `instances` +
    `instance_id` (see `_sandbox.Target`); `image` overrides the image.
    """

    cwd: str = WORKDIR
    env: dict[str, str] = field(default_factory=dict)
    forward_env: list[str] = field(default_factory=list)   # host variables copied in when set
    timeout: int = 30
    interpreter: list[str] = field(default_factory=lambda: ["bash", "-c"])
    project: str | None = None
    task: str | None = None
    instances: str | None = None
    instance_id: str | None = None
    repos: str | None = None
    image: str | None = None

    def target(self) -> Target:
        return Target.from_config("mini", project=self.project, task=self.task, instances=self.instances,
                                  instance_id=self.instance_id, repos=self.repos, image=self.image)


def make_config(kwargs: dict[str, Any]) -> HarnessEnvironmentConfig:
    """The config from mini's keyword arguments; every unknown key named at once, with the known ones."""
    known = {f.name for f in dataclasses.fields(HarnessEnvironmentConfig)}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise HarnessError(f"harness.integrations.mini.HarnessEnvironment does not know the key(s) {unknown}; "
                           f"known keys: {sorted(known)}; e.g. environment: {{cwd: /testbed, timeout: 60, "
                           "project: /path/to/repo}")
    return HarnessEnvironmentConfig(**kwargs)


class HarnessEnvironment:
    """mini's `Environment` protocol (`execute`, `get_template_vars`, `serialize`) on a harness sandbox."""

    def __init__(self, *, config_class: type = HarnessEnvironmentConfig, **kwargs: Any) -> None:
        self.config: HarnessEnvironmentConfig = (make_config(kwargs) if config_class is HarnessEnvironmentConfig
                                                 else config_class(**kwargs))
        self.sandbox: AdapterSandbox = open_for_adapter(self.config.target())
        self._finalizer = weakref.finalize(self, self.sandbox.close)
        self._drop_unreadable_bash_env()

    def _drop_unreadable_bash_env(self) -> None:
        """mini's SWE-bench config sets BASH_ENV=/root/.bashrc (its images activate conda there); the
        sandbox's user cannot read /root, so bash would print an error into every output. Such a BASH_ENV
        is left out, and said so once; in a harness environment image the project's environment is
        already on PATH."""
        path = self.config.env.get("BASH_ENV")
        if not path:
            return
        probe = self.sandbox.box.exec(f"test -r {shlex.quote(path)}", timeout=30, save_output=False)
        if probe.exit_code != 0:
            self.config.env = {k: v for k, v in self.config.env.items() if k != "BASH_ENV"}
            logger.warning("BASH_ENV=%s is not readable by the sandbox's user: left out", escape_ident(path))

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run `action["command"]` in the sandbox; mini's output dict. Raises `Submitted` when the
        output's first line is the submit marker and the command succeeded, as mini's environments do.

        Raises:
            Submitted: the agent submitted (mini's control flow).
            SandboxError: the sandbox itself failed (not a failed command).
        """
        command = str(action.get("command", ""))
        seconds = timeout or self.config.timeout
        where = posix_cwd(cwd or self.config.cwd)
        try:
            result = self.sandbox.box.exec(_script(command, self.config.interpreter, where), timeout=seconds,
                                           cwd=WORKDIR, env=self._env())
        except ChannelClosed as exc:
            self.sandbox.box.restart_channel()
            output = _failure("", exc, f"the sandbox's channel closed while the command ran, so its outcome is "
                                       f"unknown ({exc}); the channel was restarted, run the command again")
        else:
            output = mini_output(command, seconds, result)
        _check_submitted(output)
        return output

    def _env(self) -> dict[str, str]:
        forwarded = {k: v for k in self.config.forward_env if (v := os.environ.get(k)) is not None}
        return {**forwarded, **self.config.env}

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        uname = platform.uname()._asdict()
        merged: dict[str, Any] = recursive_merge(dataclasses.asdict(self.config), uname, kwargs)
        return merged

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {
            "environment": dataclasses.asdict(self.config),
            "environment_type": f"{type(self).__module__}.{type(self).__name__}",
            "sandbox": {"session": self.sandbox.session, "image": self.sandbox.image},
        }}}

    def patch(self) -> str:
        """The change made in the project since the start, as a unified diff."""
        return self.sandbox.patch()

    def close(self) -> None:
        """Remove the sandbox. Idempotent."""
        self._finalizer()

    cleanup = close   # the name mini's docker environment uses

    def __enter__(self) -> HarnessEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def posix_cwd(cwd: str) -> str:
    """The sandbox directory for mini's `cwd`: /testbed is the project (WORKDIR); relative is under it."""
    if not cwd.startswith("/"):
        cwd = f"{WORKDIR}/{cwd}"
    return sandbox_path(cwd)


def _script(command: str, interpreter: list[str], cwd: str) -> str:
    """The bash script the channel runs: stderr into stdout (one stream, in order, as mini reads it),
    into `cwd` (a missing folder is the command's failure, exit 1 and bash's message, not the
    sandbox's), then the command; through `interpreter` unless it is plain bash -c (the channel's shell)."""
    body = command if interpreter == ["bash", "-c"] else shlex.join([*interpreter, command])
    return f"exec 2>&1\ncd -- {shlex.quote(cwd)} || exit 1\n{body}"


def stream_text(capture: StreamCapture) -> str:
    """A stream as mini shows it; when the channel cut it, the cut says how much and where the rest is."""
    if not capture.truncated:
        return capture.head
    kept = len(capture.head.encode()) + len(capture.tail.encode())
    where = (f"the first {capture.saved_bytes} bytes are saved in {capture.saved_path} inside the sandbox; "
             "page them with sed -n or head/tail") if capture.saved_path else "the whole output was not saved"
    return (f"{capture.head}\n[... {max(0, capture.total_bytes - kept)} bytes of {capture.total_bytes} cut here; "
            f"{where} ...]\n{capture.tail}")


def mini_output(command: str, seconds: int, result: ExecResult) -> dict[str, Any]:
    """mini's output dict for `result`; a timeout in the shape mini's own environments give it."""
    text = stream_text(result.stdout) + stream_text(result.stderr)
    if result.timed_out:
        expired = subprocess.TimeoutExpired(command, seconds)
        return _failure(text, expired, f"An error occurred while executing the command: {expired} "
                                       "(it was killed in the sandbox, with every process it started)")
    return {"output": text, "returncode": result.exit_code, "exception_info": ""}


def _failure(text: str, exc: BaseException, info: str) -> dict[str, Any]:
    return {"output": text, "returncode": -1, "exception_info": info,
            "extra": {"exception_type": type(exc).__name__, "exception": str(exc)}}


def _check_submitted(output: dict[str, Any]) -> None:
    lines = str(output.get("output", "")).lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
        submission = "".join(lines[1:])
        raise Submitted({"role": "exit", "content": submission,
                         "extra": {"exit_status": "Submitted", "submission": submission}})


__all__ = ["HarnessEnvironment", "HarnessEnvironmentConfig", "SUBMIT_MARKER"]
