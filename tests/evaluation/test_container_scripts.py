"""The scripts that run in containers are files of harness/container_scripts/, and they name the paths
and markers the host uses (`harness.environments.recipe`), which the Dockerfiles name too."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from harness import container_scripts
from harness.container_scripts import grading_record, instance_build, layer_diff, script_text, venv_link
from harness.environments import recipe
from harness.environments.instance_layer import LAYER

FOLDER = Path(container_scripts.__file__).parent


def test_every_script_the_map_names_is_shipped_and_read() -> None:
    table = [line.split()[0] for line in (container_scripts.__doc__ or "").splitlines() if line.startswith("    ")]
    named = {name.rstrip(",") for name in table if name.endswith((".py", ".sh", ".sh,", ".py,"))}
    present = {p.name for p in FOLDER.iterdir() if p.suffix in (".py", ".sh") and p.name != "__init__.py"}
    assert named == present and len(present) == 10
    for name in present:
        assert script_text(name) == (FOLDER / name).read_text(encoding="utf-8")
    with pytest.raises(FileNotFoundError):
        script_text("no-such-script.sh")


def test_the_scripts_name_the_hosts_paths_and_markers() -> None:
    assert (instance_build.HERE, instance_build.OVERLAY, instance_build.PROJECT) == (
        recipe.INSTANCE_DIR, recipe.OVERLAY, recipe.PROJECT_ARCHIVE)
    assert instance_build.WHEELS == f"{recipe.ENV_DIR}/wheels" and instance_build.VENV_BIN == f"{recipe.VENV}/bin"
    assert (instance_build.INSTALL_FAILED, instance_build.IMPORT_FAILED) == (recipe.INSTALL_FAILED,
                                                                            recipe.IMPORT_FAILED)
    assert layer_diff.HERE == recipe.LAYER_DIR and layer_diff.LAYER == LAYER
    assert layer_diff.STEPS == recipe.INSTANCE_DIR and layer_diff.PROJECT == recipe.PROJECT_ARCHIVE.rsplit("/", 1)[0]
    assert venv_link.VENV == recipe.VENV
    scripts = recipe.venv_scripts()
    assert sorted(scripts) == sorted(recipe.VENV_SCRIPTS)
    for name, text in scripts.items():   # each names the venv and the env folder, never another /opt/harness path
        assert recipe.VENV in text or recipe.ENV_DIR in text, name
        assert set(re.findall(r"/opt/harness/[\w-]+", text)) <= {recipe.VENV, recipe.ENV_DIR, recipe.INSTANCE_DIR,
                                                                   recipe.OVERLAY}, name
    assert recipe.FAILED_SDISTS in scripts["build-sdists.sh"]
    assert all(f"{recipe.ENV_DIR}/{name}" in recipe.env_dockerfile(sdists=True, labels={}) or name ==
               "link-scripts.sh" for name in recipe.VENV_SCRIPTS)


def test_importing_the_scripts_on_the_host_runs_nothing(tmp_path: Path) -> None:
    path = list(sys.path)
    for module in (instance_build, layer_diff, venv_link, grading_record):
        importlib.reload(module)
    assert sys.path == path and not Path(layer_diff.BEFORE).exists()
    assert not venv_link.through_venv_link()     # the host's interpreter is no link into /opt/harness/venv
