"""The local OpenAI-compatible model server: llama-cpp-python's `llama_cpp.server` app in a child process
(`harness.models.llama_serve`: its app without its any-origin CORS, behind a Host check, an optional
API key and an optional single CORS origin).

`LocalServer` starts it on 127.0.0.1 in its own process group, says how loading goes (a line every
few seconds) until `GET /v1/models` answers, and stops it (SIGTERM to the group, then SIGKILL) when
its `with` block ends, whatever ended it: an error, Ctrl-C or SIGTERM. The server's own output goes
to an unnamed temporary file; when the server dies before it is ready, the error quotes its end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from harness.core.interpreter import python_command
from harness.errors import ConfigError, HarnessError

Say = Callable[[str], None]
KEY_VARIABLE = "HARNESS_MODEL_SERVER_API_KEY"
"""How the API key reaches the server's process (its environment; never its command line)."""
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
"""What `python -m llama_cpp.server` imports: llama-cpp-python and its `[server]` extra."""
INSTALL = ("scripts/install --local-model   (or: CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'harness[local]'; "
           "llama.cpp is compiled from source, about 7 minutes on two cores)")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def check_port(port: int) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"the port must be a number from 1 to 65535, got {port!r}; e.g. --port 8080 "
                          "(or leave it out: a free port is picked)")
    return port


class LocalServer:
    """`python -m llama_cpp.server` serving `model_path` at `base_url` while the `with` block runs."""

    def __init__(self, model_path: Path, *, chat_format: str, n_ctx: int, port: int | None = None,
                 alias: str = "local", threads: int | None = None, start_timeout: float = 180.0,
                 python: str = sys.executable, tool_format: str = "", api_key: str | None = None,
                 cors_origin: str | None = None) -> None:
        self.model_path, self.chat_format, self.n_ctx, self.alias = model_path, chat_format, n_ctx, alias
        self.port = check_port(port) if port is not None else free_port()
        self.threads = threads   # None: llama-cpp-python's default (half the CPUs), measured faster on 2 shared cores
        self.start_timeout, self.python = start_timeout, python
        self.tool_format = tool_format   # the harness's tool format this chat format serves, for its caller
        self.api_key = api_key           # None: no key asked (loopback only, no CORS, Host checked)
        self.cors_origin = cors_origin   # None: no CORS at all; else the one origin allowed, never with credentials
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        cors = ["--cors-origin", self.cors_origin] if self.cors_origin else []
        return [*python_command("-m", "harness.models.llama_serve", python=self.python), *cors, "--",
                "--model", str(self.model_path),
                "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--chat_format", self.chat_format,
                "--n_ctx", str(self.n_ctx), *(["--n_threads", str(self.threads)] if self.threads else [])]

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, say: Say = lambda _m: None) -> None:
        """Start the server and wait until it answers; on any failure it is stopped first.

        Raises:
            HarnessError: the server exited, or did not answer within `start_timeout` seconds
                (the message quotes the end of its output).
        """
        self._log = tempfile.TemporaryFile()
        say(f"starting the model server ({self.model_path.name}, chat format {self.chat_format}) at {self.base_url}")
        env = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE} | ({KEY_VARIABLE: self.api_key}
                                                                            if self.api_key else {})
        self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log, env=env,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(say)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, say: Say) -> None:
        started = time.monotonic()
        deadline, next_line = started + self.start_timeout, started + 5.0
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise HarnessError(f"the model server exited with code {self.process.returncode} before it was "
                                   f"ready; its output ends with:\n{self.output_tail()}\ncommand: "
                                   f"{' '.join(self.command())}")
            if self._answers():
                say(f"model server ready in {time.monotonic() - started:.1f}s")
                return
            now = time.monotonic()
            if now >= deadline:
                raise HarnessError(f"the model server did not answer {self.base_url}/models within "
                                   f"{self.start_timeout:.0f}s; its output ends with:\n{self.output_tail()}")
            if now >= next_line:
                say(f"loading the model ... {now - started:.0f}s")
                next_line = now + 5.0
            time.sleep(0.25)

    def _answers(self) -> bool:
        try:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            with urllib.request.urlopen(urllib.request.Request(f"{self.base_url}/models", headers=headers),
                                        timeout=2) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def output_tail(self, lines: int = 20) -> str:
        """The last lines the server printed (unescaped: print it through the escaper)."""
        return "\n".join(self.output(16_000).splitlines()[-lines:])

    def output(self, max_bytes: int | None = None) -> str:
        """What the server printed so far (its last `max_bytes` bytes), e.g. llama.cpp's per-request timings."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(0 if max_bytes is None else max(0, size - max_bytes))
        text = self._log.read().decode("utf-8", "replace")
        self._log.seek(0, os.SEEK_END)
        return text

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self) -> int:
        """Block until the server exits on its own (for `harness model serve`); its exit code."""
        assert self.process is not None
        return self.process.wait()

    def stop(self) -> None:
        """Stop the server's whole process group: SIGTERM, then SIGKILL after 10 s. Safe to call twice."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:   # it exited between the poll and the signal
        return
