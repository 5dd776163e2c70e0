"""The instance image of a recipe task: its environment image (`venv_image.py`) plus one layer made in a
network-less build container (`instance_layer.py`): the project installed, its import checked, the
install's products kept in /opt/harness/overlay, the project packed as `PROJECT_ARCHIVE`.
`harness-env:inst-<hash of the environment image, the project's files and the install steps>`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time

import docker

from harness.container_scripts import script_text
from harness.core.task import Environment, Task
from harness.environments.declarations import project_name
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.instance_layer import BUILD_SCRIPT, build_instance
from harness.environments.recipe import (
    IMPORT_FAILED,
    INSTANCE_BUILD,
    PROJECT_ARCHIVE,
    RECIPE_VERSION,
    VENV_LINK,
    env_lines,
    label_line,
    venv_link_files,
)
from harness.environments.standin import standin_files
from harness.environments.tags import HASH_LABEL, KEY_LABEL, KIND_LABEL, REPOSITORY, build_lock, tree_hash
from harness.environments.venv_image import ensure_venv_image
from sandbox.api import Progress, quiet
from sandbox.docker_sandbox import PROJECT_ARCHIVE_LABEL
from sandbox.images import BASE_LABEL, image_exists


def ensure_instance_image(task: Task, base_image: str, *, client: docker.DockerClient,
                          progress: Progress = quiet, env_tag: str | None = None) -> str:
    """The tag of `task`'s instance image (its environment image built first if missing; `env_tag`: the
    one `ensure_venv_image` already gave for it).

    Raises:
        EnvironmentUnsupported: it cannot be built offline; the reason names what is missing.
        EnvironmentBuildError: the build failed (the project's install, the import check).
    """
    env_tag = env_tag or ensure_venv_image(task, base_image, client=client, progress=progress)
    assert task.environment is not None
    return _ensure_instance(task, task.environment, env_tag, base_image, client, progress)


def _ensure_instance(task: Task, env: Environment, env_tag: str, base_image: str, client: docker.DockerClient,
                     progress: Progress) -> str:
    env_vars = env_lines(env.test_env, task.id)      # validated (plain names, no newline in a value)
    version = str(task.extra.get("version", ""))
    settings = {"installed": bool(task.install_cmd), "project": project_name(task.repo_dir) or "",
                "scm_version": f"{version}.0" if re.fullmatch(r"\d+(\.\d+){0,2}", version) else "0.0.0"}
    scripts = {BUILD_SCRIPT: script_text(INSTANCE_BUILD), "pre-install.sh": "".join(c + "\n" for c in env.pre_install),
               "install.sh": (task.install_cmd + "\n") if task.install_cmd else "",
               "settings.json": json.dumps(settings)}
    h = hashlib.sha256(json.dumps([RECIPE_VERSION, env_tag, env_vars, scripts, script_text(VENV_LINK)]).encode())
    h.update(tree_hash(task.repo_dir).encode())
    shims = standin_files(env.python_requested, task.python)     # the stand-in's shims, if any
    h.update(b"".join(path.encode() + b"\0" + shims[path] for path in sorted(shims)))
    digest = h.hexdigest()[:16]
    tag = f"{REPOSITORY}:inst-{digest}"
    labels = {HASH_LABEL: digest, BASE_LABEL: base_image, KIND_LABEL: "instance", KEY_LABEL: env.key,
              PROJECT_ARCHIVE_LABEL: PROJECT_ARCHIVE}
    label_line(labels)       # refuses a value with a newline or NUL, as the environment image's LABEL does
    with build_lock(digest):
        if image_exists(client, tag):
            return tag
        started = time.monotonic()
        progress(f"building instance {tag} for {task.id} on {env_tag}")
        try:
            output = build_instance(client, env_tag, tag, task.repo_dir, scripts, dict(env.test_env), labels,
                                    system_files={**venv_link_files(task.python), **shims})
        except EnvironmentBuildError as exc:
            raise _on_another_interpreter(task, env, exc) from exc
        said = output.splitlines()
        for line in [x for x in said[:-5] if x.startswith("build isolation:")] + said[-5:]:
            progress(f"{task.id}: {line}")
        progress(f"built {tag} in {time.monotonic() - started:.1f}s")
        return tag


def _on_another_interpreter(task: Task, env: Environment, exc: EnvironmentBuildError) -> EnvironmentBuildError:
    """`exc`, or, when the project installed but does not import on the interpreter that stands in for the
    one its recipe asks (scikit-learn 0.20's vendored cloudpickle on 3.9 for 3.6) with an error that is
    not a missing module, EnvironmentUnsupported: the project does not support the interpreter available
    offline. A missing module stays a build error (a dependency the environment should have had)."""
    text = str(exc)
    if IMPORT_FAILED not in text or env.python_requested == task.python:
        return exc
    lines = [line.strip() for line in text.split(IMPORT_FAILED)[0].splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Warning)\b", line)),
                 None)
    if error is None or error.startswith(("ModuleNotFoundError", "ImportError")):
        return exc
    where = next((line for line in reversed(lines) if line.startswith('File "/workspace/')), "")
    return EnvironmentUnsupported(task.id, f"the project does not import on Python {task.python}, the nearest "
                                           f"interpreter available offline to the {env.python_requested} its recipe "
                                           f"asks: {error}" + (f" ({where})" if where else ""))
