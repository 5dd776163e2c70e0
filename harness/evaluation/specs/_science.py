"""The specs of the scientific projects: astropy, matplotlib, scikit-learn, seaborn, xarray, sympy,
pvlib, pydicom and pyvista."""

from __future__ import annotations

from harness.evaluation.specs.spec import Key, Spec, for_versions

_PYTEST = "pytest -rA"
_EDITABLE = "python -m pip install -e ."
SYMPY_TEST = "bin/test -C --verbose"

_ASTROPY_PINS = (
    "attrs==23.1.0", "exceptiongroup==1.1.3", "execnet==2.0.2", "hypothesis==6.82.6", "iniconfig==2.0.0",
    "numpy==1.25.2", "packaging==23.1", "pluggy==1.3.0", "psutil==5.9.5", "pyerfa==2.0.0.3",
    "pytest-arraydiff==0.5.0", "pytest-astropy-header==0.2.2", "pytest-astropy==0.10.0", "pytest-cov==4.1.0",
    "pytest-doctestplus==1.0.0", "pytest-filter-subpackage==0.1.2", "pytest-mock==3.11.1",
    "pytest-openfiles==0.5.0", "pytest-remotedata==0.4.0", "pytest-xdist==3.3.1", "pytest==7.4.0",
    "PyYAML==6.0.1", "setuptools==68.0.0", "sortedcontainers==2.4.0", "tomli==2.0.1",
)
_ASTROPY_OLD_PINS = (
    "attrs==17.3.0", "exceptiongroup==0.0.0a0", "execnet==1.5.0", "hypothesis==3.44.2", "cython==0.27.3",
    "jinja2==2.10", "MarkupSafe==1.0", "numpy==1.16.0", "packaging==16.8", "pluggy==0.6.0", "psutil==5.4.2",
    "pyerfa==1.7.0", "pytest-arraydiff==0.1", "pytest-astropy-header==0.1", "pytest-astropy==0.2.1",
    "pytest-cov==2.5.1", "pytest-doctestplus==0.1.2", "pytest-filter-subpackage==0.1", "pytest-forked==0.2",
    "pytest-mock==1.6.3", "pytest-openfiles==0.2.0", "pytest-remotedata==0.2.0", "pytest-xdist==1.20.1",
    "pytest==3.3.1", "PyYAML==3.12", "sortedcontainers==1.5.9", "tomli==0.2.0",
)
_ASTROPY_PIN_SETUPTOOLS = (
    "sed -i 's/requires = \\[\"setuptools\",/requires = \\[\"setuptools==68.0.0\",/' pyproject.toml",
)
_astropy = Spec(repo="astropy/astropy", version="", python="3.9",
                install="python -m pip install -e .[test] --verbose", test_cmd=_PYTEST, runner="pytest",
                parser="pytest_v2", pip_packages=_ASTROPY_PINS, compiled=True)
ASTROPY: dict[Key, Spec] = {
    **for_versions(_astropy, ["3.0", "3.1", "3.2"]),
    **for_versions(_astropy, ["4.1", "4.2", "4.3", "5.0", "5.1", "5.2"], pre_install=_ASTROPY_PIN_SETUPTOOLS),
    **for_versions(_astropy, ["v5.3"], pre_install=_ASTROPY_PIN_SETUPTOOLS, python="3.10"),
    **for_versions(_astropy, ["0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3"], python="3.6",
                   packages=("setuptools==38.2.4",), pip_packages=_ASTROPY_OLD_PINS,
                   test_cmd="pytest -rA -vv -o console_output_style=classic --tb=no"),
}

_QHULL_DOWNLOAD = (  # the official recipe fetches qhull into the checkout's build/ (/testbed is its checkout)
    'QHULL_URL="http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz"',
    'QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"',
    'QHULL_BUILD_DIR="/testbed/build"',
    'wget -O "$QHULL_TAR" "$QHULL_URL"',
    'mkdir -p "$QHULL_BUILD_DIR"',
    'tar -xvzf "$QHULL_TAR" -C "$QHULL_BUILD_DIR"',
)
_TEX = ("texlive", "texlive-latex-extra", "texlive-fonts-recommended", "texlive-xetex", "texlive-luatex",
        "cm-super")
_MPL_DOWNLOADS = (
    "matplotlib 3.x downloads FreeType 2.6.1 (and, in this recipe, qhull from qhull.org) at build time; "
    "neither source is on PyPI or the Debian mirror, and its image-comparison tests are calibrated to that "
    "FreeType, so a system FreeType would fail them")
_matplotlib = Spec(repo="matplotlib/matplotlib", version="", python="3.11", install=_EDITABLE,
                   test_cmd=_PYTEST, runner="pytest", parser="matplotlib", compiled=True,
                   offline_blocker=_MPL_DOWNLOADS,
                   packages="requirements.txt",
                   package_files=("requirements/dev/dev-requirements.txt", "requirements/testing/travis_all.txt"),
                   system_setup=_QHULL_DOWNLOAD)
_MATPLOTLIB_ENV = {
    "packages": "environment.yml", "package_files": ("environment.yml",),
    "apt_packages": ("imagemagick", "ffmpeg", *_TEX, "dvipng"),
    "pip_packages": ("contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "ghostscript",
                     "kiwisolver==1.4.5", "numpy==1.25.2", "packaging==23.1", "pillow==10.0.0", "pikepdf",
                     "pyparsing==3.0.9", "python-dateutil==2.8.2", "six==1.16.0", "setuptools==68.1.2",
                     "setuptools-scm==7.1.0", "typing-extensions==4.7.1"),
}
MATPLOTLIB: dict[Key, Spec] = {
    **for_versions(_matplotlib, ["3.5", "3.6", "3.7"], **_MATPLOTLIB_ENV),
    **for_versions(_matplotlib, ["3.8", "3.9"], **_MATPLOTLIB_ENV,
                   install='python -m pip install --no-build-isolation -e ".[dev]"'),
    **for_versions(_matplotlib, ["3.1", "3.2", "3.3", "3.4"], python="3.8", pip_packages=("pytest", "ipython"),
                   apt_packages=("imagemagick", "ffmpeg", "libfreetype6-dev", "pkg-config", *_TEX)),
    **for_versions(_matplotlib, ["3.0"], python="3.7", pip_packages=("pytest",),
                   apt_packages=("imagemagick", "ffmpeg", "libfreetype6-dev", "pkg-config")),
    **for_versions(_matplotlib, ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0", "2.1", "2.2"], python="3.5",
                   install="python setup.py build; python setup.py install", packages=(), package_files=(),
                   system_setup=(), pip_packages=("pytest",), apt_packages=("imagemagick", "ffmpeg"),
                   tests_as_nonroot=True, offline_blocker=None),
}

_sklearn = Spec(repo="scikit-learn/scikit-learn", version="", python="3.6",
                install="python -m pip install -v --no-use-pep517 --no-build-isolation -e .", test_cmd=_PYTEST,
                runner="pytest", parser="pytest_v2", compiled=True)
SCIKIT_LEARN: dict[Key, Spec] = {
    **for_versions(_sklearn, ["0.20"],
                   packages=("numpy", "scipy", "cython", "pytest", "pandas", "matplotlib"),
                   pip_packages=("cython", "numpy==1.19.2", "setuptools", "scipy==1.5.2")),
    # 0.21 and 0.22 require joblib (setup.py's install_requires, built at run time, so no file lists it),
    # which the official `pip install -e .` fetched from the index; offline it must be in the environment
    **for_versions(_sklearn, ["0.21", "0.22"],
                   packages=("numpy", "scipy", "cython", "pytest", "pandas", "matplotlib", "joblib"),
                   pip_packages=("cython", "numpy==1.19.2", "setuptools", "scipy==1.5.2")),
    **for_versions(_sklearn, ["1.3", "1.4", "1.5", "1.6"], python="3.9",
                   packages=("numpy==1.19.2", "scipy==1.5.2", "cython==3.0.10", "pytest", "pandas<2.0.0",
                             "matplotlib<3.9.0", "setuptools", "pytest", "joblib", "threadpoolctl"),
                   pip_packages=("cython", "setuptools", "numpy", "scipy")),
}


def _seaborn_pins(pandas: str) -> tuple[str, ...]:
    return ("contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "importlib-resources==6.0.1",
            "kiwisolver==1.4.5", "matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", f"pandas=={pandas}",
            "pillow==10.0.0", "pyparsing==3.0.9", "pytest", "python-dateutil==2.8.2", "pytz==2023.3.post1",
            "scipy==1.11.2", "six==1.16.0", "tzdata==2023.1", "zipp==3.16.2")


_seaborn = Spec(repo="mwaskom/seaborn", version="", python="3.9", install=_EDITABLE,
                test_cmd="pytest --no-header -rA", runner="pytest", parser="seaborn")
SEABORN: dict[Key, Spec] = {
    **for_versions(_seaborn, ["0.11"], pip_packages=_seaborn_pins("1.3.5")),
    **for_versions(_seaborn, ["0.12", "0.13", "0.14"], install="python -m pip install -e .[dev]",
                   pip_packages=_seaborn_pins("2.0.0")),
}

XARRAY: dict[Key, Spec] = for_versions(
    Spec(repo="pydata/xarray", version="", python="3.10", install=_EDITABLE, test_cmd=_PYTEST, runner="pytest",
         parser="pytest", packages="environment.yml",
         package_files=("ci/requirements/environment.yml", "environment.yml"),
         pip_packages=("numpy==1.23.0", "packaging==23.1", "pandas==1.5.3", "pytest==7.4.0",
                       "python-dateutil==2.8.2", "pytz==2023.3", "six==1.16.0", "scipy==1.11.1",
                       "setuptools==68.0.0", "dask==2022.8.1")),
    ["0.12", "0.18", "0.19", "0.20", "2022.03", "2022.06", "2022.09", "2023.07", "2024.05"])

_sympy = Spec(repo="sympy/sympy", version="", python="3.9", install=_EDITABLE, test_cmd=SYMPY_TEST,
              runner="sympy", parser="sympy", env={"PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning"})
SYMPY: dict[Key, Spec] = {
    **for_versions(_sympy, ["0.7", "1.0", "1.1", "1.2", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11",
                            "1.12"],
                   packages=("mpmath", "flake8"), pip_packages=("mpmath==1.3.0", "flake8-comprehensions")),
    **for_versions(_sympy, ["1.13", "1.14"], packages="requirements.txt",
                   package_files=("requirements-dev.txt", "requirements-test.txt"), pip_packages=("mpmath==1.3.0",)),
}

PVLIB: dict[Key, Spec] = for_versions(
    Spec(repo="pvlib/pvlib-python", version="", python="3.9", install="python -m pip install -e .[all]",
         test_cmd=_PYTEST, runner="pytest", parser="pytest", packages=("pandas", "scipy"),
         pip_packages=("jupyter", "ipython", "matplotlib", "pytest", "flake8")),
    ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"])

_pydicom = Spec(repo="pydicom/pydicom", version="", python="3.6", install=_EDITABLE, test_cmd=_PYTEST,
                runner="pytest", parser="pytest_options", packages=("numpy",), pip_packages=("pytest",))
PYDICOM: dict[Key, Spec] = {
    **for_versions(_pydicom, ["1.0", "1.1", "1.2", "1.3"]),
    **for_versions(_pydicom, ["1.4", "2.0"], python="3.8"),
    **for_versions(_pydicom, ["2.1", "2.2"], python="3.9"),
    **for_versions(_pydicom, ["2.3"], python="3.10"),
    **for_versions(_pydicom, ["2.4", "3.0"], python="3.11"),
}

_pyvista = Spec(repo="pyvista/pyvista", version="", python="3.9", install=_EDITABLE, test_cmd=_PYTEST,
                runner="pytest", parser="pytest", pip_packages=("pytest",))
PYVISTA: dict[Key, Spec] = {
    **for_versions(_pyvista, ["0.20", "0.21", "0.22", "0.23"]),
    **for_versions(_pyvista, [f"0.{minor}" for minor in range(24, 44)], packages="requirements.txt",
                   package_files=("requirements_test.txt", "requirements.txt"),
                   apt_packages=("ffmpeg", "libsm6", "libxext6", "libxrender1")),
}
