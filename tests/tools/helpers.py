"""The test driver of the tool tests: calls tools the way the loop does."""

from __future__ import annotations

import itertools
from typing import Any

from harness.messages import ToolResult, ToolUse
from harness.tools.base import ToolContext
from harness.tools.catalog import Catalog


class Agent:
    """Calls tools the way the loop does: through the catalog, one ToolUse at a time."""

    _ids = itertools.count(1)

    def __init__(self, catalog: Catalog, sandbox: Any, session: str, folder: str) -> None:
        self.catalog = catalog
        self.sandbox = sandbox
        self.folder = folder
        self.ctx = ToolContext(sandbox=sandbox, session=session)

    def call(self, name: str, *, call_id: str | None = None, **args: Any) -> ToolResult:
        use = ToolUse(call_id or f"toolu_{next(self._ids)}", name, args)
        return self.catalog.execute(use, self.ctx)

    def ok(self, name: str, **args: Any) -> str:
        result = self.call(name, **args)
        assert not result.is_error, result.content
        return result.content

    def error(self, name: str, **args: Any) -> str:
        result = self.call(name, **args)
        assert result.is_error, result.content
        return result.content

    def put(self, rel: str, text: str) -> str:
        """Create a file (outside the tools, as the project would hold it); returns its path."""
        path = f"{self.folder}/{rel}"
        self.sandbox.write_file(path, text.encode())
        return path

    def content(self, path: str) -> str:
        return self.sandbox.read_file(path).data.decode()

    def resumed(self) -> Agent:
        """The same session seen by a new harness process: same sandbox, no in-memory state."""
        return Agent(self.catalog, self.sandbox, self.ctx.session, self.folder)
