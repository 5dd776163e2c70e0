"""The scripts that run in containers are files of harness/container_scripts/, and they name the paths
and markers the host uses (`harness.environments.recipe`), which the Dockerfiles name too."""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from harness import container_scripts
from harness.container_scripts import grading_record, instance_build, layer_diff, script_text, venv_link
from harness.environments import recipe
from harness.environments.instance_layer import LAYER

FOLDER = Path(container_scripts.__file__).parent


def test_every_script_the_map_names_is_shipped_and_read() -> None:
    table = [line.split()[0] for line in (container_scripts.__doc__ or "").splitlines() if line.startswith("    ")]
    named = {name.rstrip(",") for name in table if name.endswith((".py", ".sh", ".sh,", ".py,"))}
    present = {p.name for p in FOLDER.iterdir() if p.suffix in (".py", ".sh") and p.name != "__init__.py"}
    assert named == present and len(present) == 13
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
    dockerfiles = recipe.env_dockerfile(sdists=True, labels={}) + recipe.sdist_dockerfile({})
    assert all(f"{recipe.ENV_DIR}/{name}" in dockerfiles or name == "link-scripts.sh" for name in recipe.VENV_SCRIPTS)


def test_importing_the_scripts_on_the_host_runs_nothing(tmp_path: Path) -> None:
    path = list(sys.path)
    for module in (instance_build, layer_diff, venv_link, grading_record):
        importlib.reload(module)
    assert sys.path == path and not Path(layer_diff.BEFORE).exists()
    assert not venv_link.through_venv_link()     # the host's interpreter is no link into /opt/harness/venv


def _wheelhouse(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, version in files.items():
        (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")   # a wheel's own spelling


def test_the_build_isolation_is_left_out_only_when_it_would_install_what_the_venv_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance build drops pip's isolated build environment (`PIP_NO_BUILD_ISOLATION=0`) only when
    each build requirement, and each of their requirements, is installed at the newest version the
    wheelhouse has for it: the build then sees the same packages. Run here against this interpreter's
    installed packages (jsonschema and what it requires, read from their metadata)."""
    work, wheels = tmp_path / "work", tmp_path / "wheels"
    work.mkdir()
    monkeypatch.setattr(instance_build, "WORK", str(work))
    monkeypatch.setattr(instance_build, "WHEELS", str(wheels))
    closure: dict[str, str] = {}
    todo = ["jsonschema"]
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name not in closure:
            closure[name] = metadata.version(name)
            todo += metadata.requires(name) or []
    assert len(closure) >= 4, closure        # jsonschema, attrs, referencing, rpds-py, ...
    only_closure = [d for d in metadata.distributions()
                    if re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() in closure]
    monkeypatch.setattr(metadata, "distributions", lambda: iter(only_closure))     # nothing else installed here
    differs = instance_build.isolation_differs
    assert differs() == "no pyproject.toml: pip does not isolate this build"
    (work / "pyproject.toml").write_text('[build-system]\nrequires = ["jsonschema>=4", "pywin32; sys_platform == '
                                         '\'win32\'"]\nbuild-backend = "backend"\n')
    _wheelhouse(wheels, closure)
    (wheels / "jsonschema-1.0.tar.gz").write_bytes(b"")             # an older sdist: not the one taken
    assert differs() is None
    last = sorted(closure)[-1]
    newer = closure[last] + ".post99"
    _wheelhouse(wheels, {last: newer})       # the isolated build would take a newer one of a requirement's requirement
    assert differs() == f"{last}: the venv holds {closure[last]}, the isolated build would take {newer}"
    for version in (newer, closure[last]):
        (wheels / f"{last.replace('-', '_')}-{version}-py3-none-any.whl").unlink()
    assert differs() == f"{last}: the venv holds {closure[last]}, the isolated build would take none"
    _wheelhouse(wheels, {last: closure[last]})
    assert differs() is None
    (work / "pyproject.toml").write_text('[build-system]\nrequires = ["jsonschema>=4", "no-such-dist-here"]\n'
                                         'build-backend = "backend"\n')
    assert differs() == "no-such-dist-here is a build requirement the venv does not hold"
    (work / "pyproject.toml").write_text('[project]\nname = "x"\n')      # pip's default: setuptools and wheel
    assert differs() is not None and ("setuptools" in differs() or "wheel" in differs())   # type: ignore[operator]
    (work / "pyproject.toml").write_text("[build-system\n")
    assert differs() == "pyproject.toml could not be read here"


def _dist_info(site: Path, name: str, version: str, entry_points: str = "") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)


SCM_3_3_3 = ("[distutils.setup_keywords]\nuse_scm_version = setuptools_scm.integration:version_keyword\n\n"
             "[setuptools.file_finders]\nsetuptools_scm = setuptools_scm.integration:find_files\n")   # its own file


@pytest.mark.parametrize("name, version, entry_points, setup_py, python, said", [
    # setuptools on Python < 3.10 imports importlib_metadata when installed: 0.17 breaks it on 3.9 (pytest-5103)
    ("importlib-metadata", "0.17", "", "", (3, 9), "importlib-metadata 0.17 is in the venv, and the build imports"),
    ("importlib-metadata", "0.17", "", "", (3, 11), None),          # control: 3.10 on, setuptools does not
    ("importlib-resources", "1.0.2", "", "", (3, 9), None),         # control: setuptools takes its vendored one
    ("setuptools-scm", "3.3.3", SCM_3_3_3, "", (3, 9), "setuptools-scm 3.3.3 is in the venv and plugs into the "
     "build (setuptools.file_finders: setuptools_scm)"),
    ("setuptools-scm", "7.1.0", "[setuptools.finalize_distribution_options]\nsetuptools_scm = setuptools_scm."
     "integration:infer_version\n", "", (3, 9), "(setuptools.finalize_distribution_options: setuptools_scm)"),
    ("pbr", "5.11.1", "[egg_info.writers]\npbr.json = pbr.pbr_json:write_pbr_json\n", "", (3, 9),
     "(egg_info.writers: pbr.json)"),
    ("hatch-vcs", "0.3.0", "[hatch]\nvcs = hatch_vcs.hooks\n", "", (3, 9), "(hatch: vcs)"),
    # a setup keyword's handler runs only when the project's setup passes the keyword
    ("cffi", "1.15.1", "[distutils.setup_keywords]\ncffi_modules = cffi.setuptools_ext:cffi_modules\n",
     'setup(name="x", cffi_modules=["x/build.py:ffi"])\n', (3, 9), "(distutils.setup_keywords: cffi_modules)"),
    ("cffi", "1.15.1", "[distutils.setup_keywords]\ncffi_modules = cffi.setuptools_ext:cffi_modules\n",
     'setup(name="django", install_requires=["asgiref"])\n', (3, 9), None),          # django's venvs hold cffi
    # a command class, when pip's build runs that command
    ("shadow", "1.0", "[distutils.commands]\nbuild_py = shadow:build_py\n", "", (3, 9),
     "(distutils.commands: build_py)"),
    ("sphinx", "5.0.2", "[distutils.commands]\nbuild_sphinx = sphinx.setup_command:BuildDoc\n", "", (3, 9), None),
    # controls: a console script, and a plugin the build requirements hold themselves
    ("requests", "2.31.0", "[console_scripts]\nx = y:z\n", "", (3, 9), None),
    ("wheel", "0.41.2", "[distutils.commands]\nbdist_wheel = wheel.bdist_wheel:bdist_wheel\n", "", (3, 9), None),
])
def test_the_build_isolation_stays_when_the_venv_holds_what_a_build_sees_beyond_its_requirements(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, version: str, entry_points: str,
        setup_py: str, python: tuple[int, int], said: str | None) -> None:
    """A build in the venv sees every installed distribution's plugins and the modules its backend imports
    when present; the isolated build sees its requirements alone. Each kind that acts keeps the isolation."""
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    (work / "setup.py").write_text(setup_py)
    monkeypatch.setattr(instance_build, "WORK", str(work))
    _dist_info(site, name, version, entry_points)
    _dist_info(site, "pip", "23.2.1", "[console_scripts]\npip = pip._internal.cli.main:main\n")
    real = metadata.distributions
    monkeypatch.setattr(metadata, "distributions", lambda: real(path=[str(site)]))
    found = instance_build._seen_by_the_build({"setuptools", "wheel"}, python)
    assert (found is None) if said is None else (found is not None and said in found), found


def test_pyproject_is_read_without_tomllib_through_pips_vendored_parser(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv of Python 3.9 or 3.10 has no tomllib: pip's vendored tomli (pip 21.2 on) or toml (before)
    reads pyproject.toml (pytest 4.5's build on pip 20.3.3 had said "pyproject.toml could not be read")."""
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=40.8"]\n')
    real = importlib.import_module
    asked: list[str] = []

    def without_tomllib(name: str, package: str | None = None) -> object:
        asked.append(name)
        if name == "tomllib":
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(instance_build.importlib, "import_module", without_tomllib)
    assert instance_build._pyproject(str(tmp_path / "pyproject.toml")) == {
        "build-system": {"requires": ["setuptools>=40.8"]}}
    assert asked == ["tomllib", "pip._vendor.tomli"]
