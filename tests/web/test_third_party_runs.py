"""A third-party agent's runs in the web console, like our own loop's: a real `harness run --agent tiny` folder
and a real `harness eval --agent tiny` folder (real sandboxes, the real gateway, a scripted model whose replies
carry markup and terminal escapes), shown by a real `harness web` process in a real Chromium: the runs list,
the conversation step by step with each turn's tokens, the gateway's calls (refused ones included), tokens,
cost (exact with a price that gives cache prices, "unknown" without one), the patch, the tests, the stop
reason and the agent's own log, every hostile value as text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from harness.models.scripted import resolve_script
from tests.browser import screenshot
from tests.web.test_console import fact, no_markup_ran, open_view, steps_shown, wait

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "tasks" / "wordcount"
MARKUP = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\u202egnp.exe\x1b[2J"
SHOWN = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\\u202egnp.exe\\x1b[2J"
PRICE = (3.0, 15.0, 0.3, 3.75)     # USD per million: input, output, cached input read, cached input written
USAGE = [{"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 3000, "cache_write_tokens": 500},
         {"input_tokens": 300, "output_tokens": 120, "cache_read_tokens": 4200, "cache_write_tokens": 0},
         {"input_tokens": 250, "output_tokens": 40, "cache_read_tokens": 4500, "cache_write_tokens": 0},
         {"input_tokens": 200, "output_tokens": 60, "cache_read_tokens": 4800, "cache_write_tokens": 100}]
COST = sum(u["input_tokens"] * PRICE[0] + u["output_tokens"] * PRICE[1] + u["cache_read_tokens"] * PRICE[2]
           + u["cache_write_tokens"] * PRICE[3] for u in USAGE) / 1e6


def _script(folder: Path) -> Path:
    """The shipped wordcount-bash script with a usage per turn, markup and escapes in the replies and in a
    command's output, and a `pip download` the gateway refuses."""
    turns = json.loads(resolve_script("wordcount-bash").read_text())["turns"]
    turns[0] = [{"type": "text", "text": f"I run the tests first. {MARKUP}"},
                {"type": "tool_use", "name": "bash", "input": {
                    "command": "python -m pytest -q 2>&1 | tail -3; printf '%s\\n' '<b>bold</b>'; "
                               "printf '\\033[31mred\\n'; pip download --no-deps six -d /tmp/x 2>&1 | tail -2"}}]
    turns[3] = [{"type": "text", "text": f"All tests pass. {MARKUP}"}]
    path = folder / "hostile-wordcount.json"
    path.write_text(json.dumps({"turns": [{"content": t, "usage": u} for t, u in zip(turns, USAGE, strict=True)]}))
    return path


def _harness(console: dict[str, Any], *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", *args, "--json"], capture_output=True,
                          text=True, timeout=1800, cwd=console["cwd"], env=console["env"])
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture
def folders(console: dict[str, Any]) -> dict[str, Path]:
    script = _script(console["cwd"])
    run, evaluation = console["runs"] / "tiny-run", console["runs"] / "tiny-eval"
    _harness(console, "run", str(WORDCOUNT), "--agent", "tiny", "--model", f"scripted:{script}", "--out", str(run))
    _harness(console, "eval", str(WORDCOUNT), "--agent", "tiny", "--model", f"scripted:{script}", "--out",
             str(evaluation), "--price", *map(str, PRICE), "--label", "harness.test=1")
    return {"run": run, "eval": evaluation}


def test_a_third_party_run_and_evaluation_show_like_our_own(
        console: dict[str, Any], folders: dict[str, Path], browser: webdriver.Chrome) -> None:
    report = json.loads((folders["eval"] / "report.json").read_text())
    row = report["instances"]["wordcount"]
    assert report["agent"] == "tiny" and row["agent"] == "tiny" and row["status"] == "resolved"
    assert row["cost_usd"] == pytest.approx(COST) and report["totals"]["cost_usd"] == pytest.approx(COST)
    assert row["tokens"]["cache_read_tokens"] == sum(u["cache_read_tokens"] for u in USAGE)

    open_view(browser, console, "#/runs")
    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr[data-ref]")) == 2)
    cells = {r.get_attribute("data-name"): r.find_element(By.CSS_SELECTOR, "td.agent").text
             for r in browser.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr[data-ref]")}
    assert cells == {"tiny-run": "tiny", "tiny-eval": "tiny"}, cells
    instance = browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="tiny-eval"]').get_attribute("data-ref")
    run_row = browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="tiny-run"]').text
    eval_row = browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="tiny-eval"]').text
    assert "unknown" in run_row and "$0.0" not in run_row           # no price: the cost is unknown, not 0
    assert f"${COST:.4f}" in eval_row and "1 / 1 resolved" in eval_row
    screenshot(browser, "third-party-runs-list")

    browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="tiny-run"] a.open').click()
    wait(browser, lambda b: fact(b, "state") == "finished", what="the run's figures")
    assert (fact(browser, "agent"), fact(browser, "stop reason"), fact(browser, "tests")) == ("tiny", "end", "passed")
    assert fact(browser, "turns") == "4" and fact(browser, "cost") == "unknown"
    assert fact(browser, "tokens in/out") == "1950 / 300" and fact(browser, "cached input read") == "17k"
    wait(browser, lambda b: steps_shown(b) == 8, what="the conversation: the task, four replies, three results")
    titles = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#steps .step-title")]
    assert titles[1] == "step 2 · assistant · turn 1 · 1200 in / 80 out · tool_use", titles
    steps = browser.find_element(By.ID, "steps").text
    assert f"I run the tests first. {SHOWN}" in steps and f"All tests pass. {SHOWN}" in steps
    assert "<b>bold</b>" in steps and "\\x1b[31mred" in steps and "\x1b" not in steps
    no_markup_ran(browser)
    screenshot(browser, "third-party-run")

    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="calls"]').click()
    table = wait(browser, lambda b: b.find_element(By.ID, "calls-table"))
    totals = browser.find_element(By.ID, "calls-totals").text
    assert "4 model calls answered" in totals and "cost unknown" in totals, totals
    refused = table.find_elements(By.CSS_SELECTOR, "tr.outcome-refused")
    assert refused and "the sandbox has no network" in refused[0].text      # pip's request, refused at once
    assert SHOWN in table.text
    screenshot(browser, "third-party-calls")
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="patch"]').click()
    assert "ranked[:n]" in browser.find_element(By.ID, "diff").text
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="tests"]').click()
    assert "4 passed" in browser.find_element(By.ID, "tests-output").text
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="log"]').click()
    log = browser.find_element(By.ID, "agent-log").text
    assert SHOWN in log and "[exit 0" in log
    no_markup_ran(browser)

    browser.get(console["base"] + "/#/eval?ref=" + instance)
    agent = wait(browser, lambda b: b.find_element(By.ID, "eval-agent"), what="the evaluation page")
    assert agent.text == "run by the agent tiny"
    browser.get(console["base"] + "/#/run?ref=" + f"{instance}/instances/wordcount")
    wait(browser, lambda b: fact(b, "instance status") == "resolved", what="the evaluation's instance")
    assert fact(browser, "agent") == "tiny" and fact(browser, "cost") == f"${COST:.4f}"
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="calls"]').click()
    totals = wait(browser, lambda b: b.find_element(By.ID, "calls-totals")).text
    assert f"cost ${COST:.4f}" in totals and "(17k cached)" in totals, totals
    screenshot(browser, "third-party-eval-instance")
    no_markup_ran(browser)

