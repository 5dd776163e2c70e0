"""The one path check: workspace-relative paths pass, `..` and outside paths are refused."""

from __future__ import annotations

import pytest

from harness.errors import PathError
from harness.tools.paths import check_resolved, confine


def test_relative_and_absolute_workspace_paths_pass() -> None:
    assert confine("pkg/a.py") == "/workspace/pkg/a.py"
    assert confine("/workspace/pkg/./a.py") == "/workspace/pkg/a.py"
    assert confine(".") == "/workspace"


def test_saved_outputs_are_readable_but_not_writable() -> None:
    assert confine("/tmp/harness/output/cmd-1.out") == "/tmp/harness/output/cmd-1.out"
    with pytest.raises(PathError, match="is outside /workspace; tools only reach"):
        confine("/tmp/harness/output/cmd-1.out", for_write=True)


@pytest.mark.parametrize("path, message", [
    ("../etc/passwd", "the path '../etc/passwd' contains '..', which is not allowed"),
    ("pkg/../../etc", "contains '..'"),
    ("/etc/passwd", "the path '/etc/passwd' is outside /workspace or /tmp/harness/output"),
    ("/workspace2/x", "is outside /workspace"),
    ("", "the path is empty"),
])
def test_escaping_paths_are_refused_with_the_reason(path: str, message: str) -> None:
    with pytest.raises(PathError) as info:
        confine(path)
    assert message in str(info.value)
    assert "e.g." in str(info.value)


def test_symlink_resolution_outside_is_refused() -> None:
    assert check_resolved("link", "/workspace/real.py") == "/workspace/real.py"
    with pytest.raises(PathError, match="is a symlink .* that leads to '/etc/passwd'"):
        check_resolved("link", "/etc/passwd")
