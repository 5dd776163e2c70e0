"""find_code through the catalog on the test double: BM25 while the dense half is built, then the
hybrid; each stage switched off in the config."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from harness.config import Config, ToolsConfig
from harness.tools.catalog import default_catalog
from harness.tools.retrieval.dense import INLINE_CHUNKS
from sandbox.runtime.local import LocalRuntime
from tests.tools.helpers import Agent

HANDLERS = INLINE_CHUNKS + 8


def _agent(local_box: LocalRuntime, **tools: object) -> Agent:
    tag = uuid.uuid4().hex[:8]
    return Agent(default_catalog(Config(tools=ToolsConfig(**tools))), local_box, f"s-{tag}", f"t_{tag}")  # type: ignore[arg-type]


def _put_project(agent: Agent) -> None:
    agent.put("images/resize.py", 'def shrink_picture(image, factor):\n    """Scale an image down."""\n'
                                  "    return image.scaled(factor)\n")
    for n in range(HANDLERS):
        agent.put(f"events/h{n}.py", f"def handle_event_{n}_{agent.folder}(event):\n    return event.id + {n}\n")


def test_the_first_answer_is_bm25_while_the_dense_half_is_built_then_the_hybrid(local_box: LocalRuntime) -> None:
    agent = _agent(local_box, find_code_dense=True)
    _put_project(agent)
    first = agent.ok("find_code", query="shrink picture", k=3)
    head = first.split("\n")[0]
    assert "(BM25; index:" in head and "; BM25 alone: the dense half is still being built (" in head
    assert "found by bm25 #1" in first and "dense #" not in first
    dense = agent.ctx.code_index.dense
    assert dense is not None and dense.building is not None
    dense.building.join(300)
    later = agent.ok("find_code", query="make a photo smaller", k=3)
    assert "(BM25 + dense; index:" in later.split("\n")[0] and "still being built" not in later
    assert "/images/resize.py:1-3  function shrink_picture  (rrf " in later.split("\n")[1]   # other tests' copies tie
    assert "found by dense #1)" in later.split("\n")[1]


def test_dense_switched_off_answers_by_bm25_alone(local_box: LocalRuntime) -> None:
    assert ToolsConfig().find_code_dense is True       # on by default
    agent = _agent(local_box, find_code_dense=False)
    _put_project(agent)
    out = agent.ok("find_code", query="shrink picture", k=3)
    assert "(BM25; index:" in out.split("\n")[0] and "still being built" not in out and "dense" not in out
    assert agent.ctx.code_index.dense is None
    assert "/images/resize.py:1-3  function shrink_picture  (score " in out.split("\n")[1]


def test_bm25_switched_off_answers_by_dense_alone_and_rerank_adds_the_reread(local_box: LocalRuntime) -> None:
    agent = _agent(local_box, find_code_bm25=False, find_code_dense=True, find_code_rerank=True)
    _put_project(agent)
    agent.ok("find_code", query="make a photo smaller", k=3)
    dense = agent.ctx.code_index.dense
    assert dense is not None
    if dense.building is not None:
        dense.building.join(300)
    out = agent.ok("find_code", query="make a photo smaller", k=3)
    assert "(dense; index:" in out.split("\n")[0]
    first = out.split("\n")[1]
    assert first.startswith("1. t_") and "/images/resize.py:1-3  function shrink_picture  (rrf " in first
    assert "bm25 #" not in out and "found by dense #1, reread #" in first


MISSING_EXTRA = """
import sys, uuid
from pathlib import Path
sys.modules["onnxruntime"] = None      # the retrieval extra not installed: importing it fails
from harness.config import Config, ToolsConfig
from harness.tools.catalog import default_catalog
from sandbox.runtime.local import LocalRuntime
from tests.tools.helpers import Agent
with LocalRuntime(Path(sys.argv[1])) as box:
    agent = Agent(default_catalog(Config(tools=ToolsConfig(find_code_dense=True))), box, "s-x", "t_x")
    agent.put("images/resize.py", "def shrink_picture(image, factor):\\n    return image.scaled(factor)\\n")
    print(agent.ok("find_code", query="shrink picture", k=3))
    print("dense half:", agent.ctx.code_index.dense)
"""


def test_without_the_retrieval_extra_find_code_answers_by_bm25_and_gives_the_install_line(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", MISSING_EXTRA, str(tmp_path / "box")], capture_output=True,
                         text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, check=False)
    assert run.returncode == 0, run.stderr
    head, first = run.stdout.split("\n")[:2]
    assert "(BM25; index:" in head
    assert ("; BM25 alone: the dense retriever needs the retrieval extra (onnxruntime is not installed: "
            "pip install 'harness[retrieval]')") in head
    assert "/images/resize.py:1-2  function shrink_picture  (score " in first and "found by bm25 #1)" in first
    assert "dense half: None" in run.stdout
