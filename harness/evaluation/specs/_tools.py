"""The specs of the developer tools: pytest, pylint, astroid, sphinx, sqlfluff and marshmallow."""

from __future__ import annotations

from dataclasses import replace

from harness.evaluation.specs.spec import Key, Spec, for_versions

_PYTEST = "pytest -rA"
_EDITABLE = "python -m pip install -e ."
SPHINX_TEST = "tox --current-env -epy39 -v --"

_pytest = Spec(repo="pytest-dev/pytest", version="", python="3.9", install=_EDITABLE, test_cmd=_PYTEST,
               runner="pytest", parser="pytest")
_PYTEST_PINS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("4.4",): ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.13.1",
               "py==1.11.0", "setuptools==68.0.0", "six==1.16.0"),
    ("4.5",): ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.11.0",
               "py==1.11.0", "setuptools==68.0.0", "six==1.16.0", "wcwidth==0.2.6"),
    ("4.6",): ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1",
               "pluggy==0.13.1", "py==1.11.0", "six==1.16.0", "wcwidth==0.2.6"),
    ("5.0", "5.1", "5.2"): ("atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0",
                            "packaging==23.1", "pluggy==0.13.1", "py==1.11.0", "wcwidth==0.2.6"),
    ("5.3",): ("attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1",
               "py==1.11.0", "wcwidth==0.2.6"),
    ("5.4",): ("py==1.11.0", "packaging==23.1", "attrs==23.1.0", "more-itertools==10.1.0",
               "pluggy==0.13.1"),
    ("6.0",): ("attrs==23.1.0", "iniconfig==2.0.0", "more-itertools==10.1.0", "packaging==23.1",
               "pluggy==0.13.1", "py==1.11.0", "toml==0.10.2"),
    ("6.2", "6.3"): ("attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1",
                     "py==1.11.0", "toml==0.10.2"),
    ("7.0",): ("attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1", "py==1.11.0"),
    ("7.1", "7.2"): ("attrs==23.1.0", "iniconfig==2.0.0", "packaging==23.1", "pluggy==0.13.1",
                     "py==1.11.0", "tomli==2.0.1"),
    ("7.4", "8.0", "8.1", "8.2", "8.3", "8.4"): ("iniconfig==2.0.0", "packaging==23.1", "pluggy==1.3.0",
                                                 "exceptiongroup==1.1.3", "tomli==2.0.1"),
}
PYTEST: dict[Key, Spec] = {
    key: spec for versions, pins in _PYTEST_PINS.items()
    for key, spec in for_versions(_pytest, versions, pip_packages=pins).items()
}
PYTEST[("pytest-dev/pytest", "6.3")] = replace(PYTEST[("pytest-dev/pytest", "6.3")],
                                               pre_install=("sed -i 's/>=>=/>=/' setup.cfg",))

_pylint = Spec(repo="pylint-dev/pylint", version="", python="3.9", install=_EDITABLE, test_cmd=_PYTEST,
               runner="pytest", parser="pytest_options", packages="requirements.txt",
               package_files=("requirements_test.txt",))
PYLINT: dict[Key, Spec] = {
    **for_versions(_pylint, ["2.8"], pip_packages=("pyenchant==3.2",),
                   apt_packages=("libenchant-2-dev", "hunspell-en-us")),
    **for_versions(_pylint, ["2.9", "2.10", "2.11", "2.13", "2.16"]),
    **for_versions(_pylint, ["2.14", "2.15", "2.17"], cpus=2),
    **for_versions(_pylint, ["3.0", "3.1", "3.2", "3.3", "4.0"], cpus=2,
                   pip_packages=("astroid==3.0.0a6", "setuptools")),
}

ASTROID: dict[Key, Spec] = for_versions(
    Spec(repo="pylint-dev/astroid", version="", python="3.9", install=_EDITABLE, test_cmd=_PYTEST,
         runner="pytest", parser="pytest", pip_packages=("pytest",)),
    ["2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.12", "2.13", "2.14", "2.15", "2.16", "3.0"])

SQLFLUFF: dict[Key, Spec] = for_versions(
    Spec(repo="sqlfluff/sqlfluff", version="", python="3.9", install=_EDITABLE, test_cmd=_PYTEST,
         runner="pytest", parser="pytest", packages="requirements.txt",
         package_files=("requirements_dev.txt",)),
    ["0.4", "0.5", "0.6", "0.8", "0.9", "0.10", "0.11", "0.12", "0.13", "1.0", "1.1", "1.2", "1.3", "1.4",
     "2.0", "2.1", "2.2"])

MARSHMALLOW: dict[Key, Spec] = for_versions(
    Spec(repo="marshmallow-code/marshmallow", version="", python="3.9",
         install="python -m pip install -e '.[dev]'", test_cmd=_PYTEST, runner="pytest", parser="pytest"),
    ["2.18", "2.19", "2.20", "3.0", "3.1", "3.2", "3.4", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13",
     "3.15", "3.16", "3.19"])

_SPHINX_TOX = "sed -i 's/pytest/pytest -rA/' tox.ini"
_SPHINX_OLD_PINS = (
    "sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py",
    "sed -i 's/sphinxcontrib-applehelp/sphinxcontrib-applehelp<=1.0.7/' setup.py",
    "sed -i 's/sphinxcontrib-devhelp/sphinxcontrib-devhelp<=1.0.5/' setup.py",
    "sed -i 's/sphinxcontrib-qthelp/sphinxcontrib-qthelp<=1.0.6/' setup.py",
    "sed -i 's/alabaster>=0.7,<0.8/alabaster>=0.7,<0.7.12/' setup.py",
    "sed -i \"s/'packaging',/'packaging', 'markupsafe<=2.0.1',/\" setup.py",
)
_HTMLHELP = "sphinxcontrib-htmlhelp"
_SERIALIZING = "sphinxcontrib-serializinghtml"
# the two help builders capped by name (3.0 to 4.0), by their >= bound (4.2 to 4.4), or either way (4.1)
_SPHINX_HELP_PINS = {
    "by_name": (f"sed -i 's/{_HTMLHELP}/{_HTMLHELP}<=2.0.4/' setup.py",
                f"sed -i 's/{_SERIALIZING}/{_SERIALIZING}<=1.1.9/' setup.py"),
    "by_bound": (f"sed -i 's/{_HTMLHELP}>=2.0.0/{_HTMLHELP}>=2.0.0,<=2.0.4/' setup.py",
                 f"sed -i 's/{_SERIALIZING}>=1.1.5/{_SERIALIZING}>=1.1.5,<=1.1.9/' setup.py"),
    "either": (f"grep -q '{_HTMLHELP}>=2.0.0' setup.py && "
               f"sed -i 's/{_HTMLHELP}>=2.0.0/{_HTMLHELP}>=2.0.0,<=2.0.4/' setup.py || "
               f"sed -i 's/{_HTMLHELP}/{_HTMLHELP}<=2.0.4/' setup.py",
               f"grep -q '{_SERIALIZING}>=1.1.5' setup.py && "
               f"sed -i 's/{_SERIALIZING}>=1.1.5/{_SERIALIZING}>=1.1.5,<=1.1.9/' setup.py || "
               f"sed -i 's/{_SERIALIZING}/{_SERIALIZING}<=1.1.9/' setup.py"),
}
_sphinx = Spec(repo="sphinx-doc/sphinx", version="", python="3.9", install="python -m pip install -e .[test]",
               test_cmd=SPHINX_TEST, runner="pytest", parser="pytest_v2", pre_install=(_SPHINX_TOX,),
               pip_packages=("tox==4.16.0", "tox-current-env==0.0.11", "Jinja2==3.0.3"))
_SPHINX_PINNED = (_SPHINX_TOX, *_SPHINX_OLD_PINS)
SPHINX: dict[Key, Spec] = {
    **for_versions(_sphinx, ["1.5", "1.6", "1.7", "1.8", "2.0", "2.1", "2.2", "2.3", "2.4"]),
    **for_versions(_sphinx, ["3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0"],
                   pre_install=(*_SPHINX_PINNED, *_SPHINX_HELP_PINS["by_name"])),
    **for_versions(_sphinx, ["4.1"], pre_install=(*_SPHINX_PINNED, *_SPHINX_HELP_PINS["either"])),
    **for_versions(_sphinx, ["4.2", "4.3", "4.4"], pre_install=(*_SPHINX_PINNED, *_SPHINX_HELP_PINS["by_bound"])),
    **for_versions(_sphinx, ["4.5", "5.0", "5.1", "5.2", "5.3", "6.0", "6.2", "7.0", "7.1"]),
    **for_versions(_sphinx, ["7.2", "7.3", "7.4"], apt_packages=("graphviz",)),
    # Sphinx 8 dropped Python 3.9: its request for 3.10 must not round down
    **for_versions(_sphinx, ["8.0", "8.1"], apt_packages=("graphviz",), python="3.10", python_min="3.10"),
}
