"""The wheelhouse never runs package code on the host: a wheel whose dependency is a URL to an sdist
(whose build backend would write a marker file) is refused before anything is fetched from that URL,
on the first level and when the dependency only holds for the target Python; index dependencies and,
with the operator's flag, wheel URLs still work."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.environments.wheelhouse import WheelhouseError, build_wheelhouse
from tests.approval.helpers import CountingServer
from tests.evaluation.hostile_index import publish, publish_evil


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A counting index on 127.0.0.1 that pip uses instead of PyPI; wheelhouses cached under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with CountingServer() as server:
        monkeypatch.setenv("PIP_INDEX_URL", server.url("/simple/"))
        monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
        yield server


def _wheels(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.whl"))


def test_a_dependency_on_an_sdist_url_is_refused_before_it_is_fetched(tmp_path: Path, index: CountingServer) -> None:
    marker = tmp_path / "marker"
    evil = publish_evil(index, marker)
    good = publish(index, "good", "1.0", [f"evil @ {evil}"])
    sneaky = publish(index, "sneaky", "1.0", [f'evil @ {evil} ; python_version < "3.10"'])
    with pytest.raises(WheelhouseError) as refused:
        build_wheelhouse(["good==1.0"], "3.11", lambda _: None)
    assert f"good-1.0-py3-none-any.whl requires 'evil @ {evil}', a direct reference" in str(refused.value)
    assert f"nothing was fetched from {evil}" in str(refused.value)
    assert index.count(good) == 1                      # the wheel itself came from the index
    # the dependency holds only for the target (3.9), not for the Python running pip
    with pytest.raises(WheelhouseError, match="sneaky-1.0-py3-none-any.whl requires .*a direct reference"):
        build_wheelhouse(["sneaky==1.0"], "3.9", lambda _: None)
    assert index.count(sneaky) == 1
    # the operator's flag allows wheel URLs only: an sdist is still never built on the host
    with pytest.raises(WheelhouseError, match="is not a wheel file .* never built on the host"):
        build_wheelhouse(["good==1.0"], "3.11", lambda _: None, direct_references=True)
    assert index.count("/evil-1.0.tar.gz") == 0
    assert not marker.exists()
    assert not list((tmp_path / "cache" / "harness" / "wheels").glob("*/*.whl"))   # no half wheelhouse kept


def test_index_dependencies_and_allowed_wheel_urls_still_complete_the_wheelhouse(
        tmp_path: Path, index: CountingServer) -> None:
    publish(index, "dep", "1.0", [])
    publish(index, "leaf", "2.0", [])
    publish(index, "app", "1.0", ["dep>=1", 'leaf==2.0; python_version < "3.10"', 'colorama; sys_platform == "win32"'])
    assert _wheels(build_wheelhouse(["app==1.0"], "3.9", lambda _: None)) == [
        "app-1.0-py3-none-any.whl", "dep-1.0-py3-none-any.whl", "leaf-2.0-py3-none-any.whl"]
    direct = index.url(publish(index, "direct", "1.0", []))
    publish(index, "linked", "1.0", [f"direct @ {direct}"])
    with pytest.raises(WheelhouseError, match="--allow-direct-references"):
        build_wheelhouse(["linked==1.0"], "3.11", lambda _: None)
    assert _wheels(build_wheelhouse(["linked==1.0"], "3.11", lambda _: None, direct_references=True)) == [
        "direct-1.0-py3-none-any.whl", "linked-1.0-py3-none-any.whl"]
