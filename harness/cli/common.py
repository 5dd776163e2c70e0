"""Small pieces the subcommands share: config loading, the sandbox image, a sandbox for a folder."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Callable

from harness.config import Config, load
from sandbox.api import SandboxSpec
from sandbox.docker_sandbox import DockerSandbox
from sandbox.images import ensure_image


def stderr_progress(prefix: str = "harness") -> Callable[[str], None]:
    def report(message: str) -> None:
        print(f"{prefix}: {message}", file=sys.stderr, flush=True)
    return report


def sandbox_image(config: Config, quiet: bool = False) -> str:
    if config.sandbox.image != "auto":
        return config.sandbox.image
    progress = (lambda _m: None) if quiet else stderr_progress("sandbox build")
    return ensure_image(python=config.sandbox.python, base=config.sandbox.base, progress=progress)


def open_sandbox(directory: Path | None, config: Config | None = None, session: str | None = None,
                 quiet: bool = False) -> DockerSandbox:
    """A started sandbox holding `directory`'s files (caller closes it, or uses `with`)."""
    config = config or load()[0]
    spec = SandboxSpec(image=sandbox_image(config, quiet), session=session or f"cli-{uuid.uuid4().hex[:8]}",
                       project_dir=directory, limits=config.sandbox.limits)
    box = DockerSandbox(spec)
    box.start()
    return box
