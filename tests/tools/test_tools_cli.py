"""`harness tools` prints the catalog; `--json` prints the definitions sent to the model."""

from __future__ import annotations

import json

import pytest

from harness.cli.main import main


def test_tools_command_lists_every_tool_with_its_effect(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "edit(path, old, new, [key])  [sandbox]" in out
    assert "view(path, [line])  [read]" in out
    assert "http_request(" in out and "[outbound]" in out
    assert out.rstrip().endswith("outbound: each call waits for approval and runs once); "
                                 "`harness tools --json` prints their full definitions.")


def test_tools_json_prints_schemas_and_effects(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--json"]) == 0
    specs = json.loads(capsys.readouterr().out)
    by_name = {s["name"]: s for s in specs}
    assert by_name["search"]["effect"] == "read"
    assert by_name["apply_patch"]["input_schema"]["required"] == ["patch"]
    assert all(s["input_schema"]["additionalProperties"] is False for s in specs)
