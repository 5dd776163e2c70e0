from __future__ import annotations

import pytest
from loopworld import make_catalog, make_ctx

from harness.tools.base import ToolContext
from harness.tools.catalog import Catalog


@pytest.fixture
def catalog() -> Catalog:
    return make_catalog()


@pytest.fixture
def ctx() -> ToolContext:
    return make_ctx()
