"""Reading an evaluation's report.json for `harness eval compare A B`; the comparison itself is
`harness.core.comparison` (pure, shared with the web console)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.records import EvalReport, RecordError
from harness.errors import ConfigError

REPORT_CAP = 256 * 1024 ** 2


def read_report(folder: Path) -> EvalReport:
    """The report.json of the evaluation in `folder` (a regular file, not a link, of at most `REPORT_CAP`).

    Raises:
        ConfigError: no such file, too big, not JSON, or not a report (each says which and what to give).
    """
    path = Path(folder) / "report.json"
    if path.is_symlink() or not path.is_file():
        raise ConfigError(f"{folder} holds no report.json (a regular file): give the --out folder of a `harness "
                          "eval`, e.g. harness eval compare runs/eval-a runs/eval-b")
    if path.stat().st_size > REPORT_CAP:
        raise ConfigError(f"{path} is {path.stat().st_size:,} bytes, over the {REPORT_CAP:,}-byte cap of a report; "
                          "give the --out folder of a `harness eval`")
    try:
        return EvalReport.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (ValueError, RecursionError, RecordError) as exc:
        raise ConfigError(f"{path} is not an evaluation report ({str(exc)[:300]}); give the --out folder of a "
                          "`harness eval`") from exc
