"""The specs of django, flask and requests."""

from __future__ import annotations

from dataclasses import replace

from harness.evaluation.specs.spec import Key, Spec, for_versions

DJANGO_TEST = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
_PYTEST = "pytest -rA"
_EDITABLE = "python -m pip install -e ."

_django = Spec(repo="django/django", version="", python="3.5", install="python setup.py install",
               test_cmd=DJANGO_TEST, runner="django", parser="django")
_django_reqs = {"packages": "requirements.txt", "package_files": ("tests/requirements/py3.txt",)}

DJANGO: dict[Key, Spec] = {
    **for_versions(_django, ["1.4", "1.5", "1.6"]),
    **for_versions(
        _django, ["1.7", "1.8", "1.9", "1.10", "1.11", "2.0", "2.1", "2.2"], **_django_reqs,
        pip_packages=("setuptools",), apt_packages=("locales",),
        system_setup=("echo 'en_US UTF-8' > /etc/locale.gen", "locale-gen en_US.UTF-8"),
        env={"LANG": "en_US.UTF-8", "LC_ALL": "en_US.UTF-8", "PYTHONIOENCODING": "utf8",
             "LANGUAGE": "en_US:en"}),
    **for_versions(
        _django, ["3.0", "3.1", "3.2"], **_django_reqs, python="3.6", install=_EDITABLE,
        system_setup=("sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen",),
        env={"LANG": "en_US.UTF-8", "LANGUAGE": "en_US:en", "LC_ALL": "en_US.UTF-8"}),
    **for_versions(_django, ["4.0"], **_django_reqs, python="3.8", install=_EDITABLE),
    **for_versions(_django, ["4.1", "4.2"], **_django_reqs, python="3.9", install=_EDITABLE),
    **for_versions(_django, ["5.0", "5.1", "5.2"], **_django_reqs, python="3.11", install=_EDITABLE),
}
DJANGO[("django/django", "1.9")] = replace(DJANGO[("django/django", "1.9")],
                                          test_cmd="./tests/runtests.py --verbosity 2")

_flask = Spec(repo="pallets/flask", version="", python="3.11", install=_EDITABLE, test_cmd=_PYTEST,
              runner="pytest", parser="pytest", packages="requirements.txt",
              package_files=("requirements/dev.txt",),
              pip_packages=("setuptools==70.0.0", "click==8.1.3", "itsdangerous==2.1.2", "Jinja2==3.1.2",
                            "MarkupSafe==2.1.1", "Werkzeug==2.3.7"))

FLASK: dict[Key, Spec] = {
    **for_versions(_flask, ["2.0"], python="3.9",
                   pip_packages=("setuptools==70.0.0", "Werkzeug==2.3.7", "Jinja2==3.0.1",
                                 "itsdangerous==2.1.2", "click==8.0.1", "MarkupSafe==2.1.3")),
    **for_versions(_flask, ["2.1"], python="3.10"),
    **for_versions(_flask, ["2.2", "2.3", "3.0", "3.1"]),
}

_requests = Spec(repo="psf/requests", version="", python="3.9", install="python -m pip install .",
                 test_cmd=_PYTEST, runner="pytest", parser="pytest_options", packages=("pytest",))

_HTTPBIN_ORG = ("the tests of requests before 2.9 send real requests to http://httpbin.org (2.9 moved them to "
                "pytest-httpbin's local server); there is no network here, so their FAIL_TO_PASS and PASS_TO_PASS "
                "tests cannot pass whatever the patch")
REQUESTS: dict[Key, Spec] = {
    **for_versions(_requests, ["0.7", "0.8", "0.9", "0.11", "0.13", "0.14", "1.1", "1.2", "2.0", "2.2", "2.3", "2.4",
                               "2.5", "2.7", "2.8"], offline_blocker=_HTTPBIN_ORG),
    **for_versions(_requests, ["2.9", "2.10", "2.11", "2.12", "2.17", "2.18", "2.19", "2.22", "2.25", "2.26", "2.27",
                               "2.31", "3.0"]),
}
