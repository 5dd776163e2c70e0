"""Task environments: host-built wheelhouses and the images a task's sandbox runs in.

Used by the session (the image a task runs in), the `pip_download` tool (the same wheel download) and
evaluation (grading images). Imports harness.core, harness.checks, harness.errors, harness.config,
harness.container_scripts and sandbox only. One job per module:

    task_image.py       the entry point: the sandbox image for a task, and the image it runs in
    pinned_image.py     the image of a task's hand-pinned requirements (and project install)
    recipe tasks (`Task.environment`: SWE-bench rows, and tasks that install their project with their
    own requirements): two images, the second on the first
      venv_image.py     the environment image shared per lock: a venv of exactly the lock's files
      sdist_image.py    the lock's source-only releases built into wheels, network-less
      instance_image.py the instance image of one task: when and under which tag it is built
      instance_layer.py its one layer, made in a hardened build container and loaded
      recipe.py         the recipe's paths, Dockerfile texts and scripts (files of container_scripts)
    the lock: one per (repository, version, interpreter), shipped or made once
      lock.py           what a lock holds (files, hashes, toolchain, inputs, outcome); found, stored
      locking.py        found or made: resolved, its files read from the index, its sdists built
      lock_files.py     each pin's file on the index; files fetched by URL and checked by sha256
      versions.py       the version's date (its environment_setup_commit's) and tree
    resolving a recipe's pins as of the version's date
      recipe_pins.py    what goes in: declarations, build requirements, the recipe's pins, the toolchain
      declarations.py   a source tree's declared requirements, read as text (nothing of it runs)
      resolver.py       uv as of a date, cached; stand-ins for source-only releases
      resolution.py     its values (Resolution, SdistOnly, ResolveError) and the rules of pins and dates
      index.py          what the package index says of a project; the wheel tags a target accepts
      network.py        reads from the index tried again after a momentary network failure; downloads
      sdists.py         source-only releases' metadata read without building, and their stand-in wheels
    wheelhouse.py       wheels downloaded on the host with pip for a target Python (nothing built)
    tags.py             the images' repository, labels and input hashes, and one build per tag
    errors.py           EnvironmentBuildError, EnvironmentUnsupported

A recipe that cannot be built offline raises `EnvironmentUnsupported`.
"""

from harness.environments.declarations import read_declarations
from harness.environments.errors import EnvironmentBuildError, EnvironmentUnsupported
from harness.environments.lock import Lock, LockKey, find_lock
from harness.environments.lock_files import LockUnsatisfiable
from harness.environments.locking import environment_lock, lock_identity
from harness.environments.pinned_image import env_hash
from harness.environments.recipe_pins import resolved_pins
from harness.environments.resolution import ResolveError
from harness.environments.resolver import resolve
from harness.environments.standin import shims, stand_in
from harness.environments.tags import HASH_LABEL, KIND_LABEL, REPOSITORY, build_lock
from harness.environments.task_image import ensure_task_image, sandbox_image
from harness.environments.venv_image import ensure_venv_image
from harness.environments.wheelhouse import (
    WheelhouseError,
    build_wheelhouse,
    checked,
    download_wheels,
    pinned_wheelhouse,
)

__all__ = [
    "HASH_LABEL", "KIND_LABEL", "REPOSITORY", "EnvironmentBuildError", "EnvironmentUnsupported", "Lock", "LockKey",
    "LockUnsatisfiable", "ResolveError", "WheelhouseError", "build_lock", "build_wheelhouse", "checked",
    "download_wheels", "ensure_task_image", "ensure_venv_image", "env_hash", "environment_lock", "find_lock",
    "lock_identity", "pinned_wheelhouse", "read_declarations", "resolve", "resolved_pins", "sandbox_image", "shims",
    "stand_in",
]
