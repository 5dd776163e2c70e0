"""The web console in a real headless Chromium, served by the real `harness web` process, showing the
folders of real `harness run` and `harness eval` processes (real sandboxes, real grading), a run
followed live, and a run crafted to break the page. Screenshots of each view go to the test output
folder (tests/browser.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from harness.models.scripted import resolve_script
from tests.approval.helpers import CountingServer, finish_call, start_call
from tests.browser import screenshot
from tests.web.hostile_run import write_hostile_run

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"


def wait(browser: webdriver.Chrome, condition: Callable[[webdriver.Chrome], Any], timeout: float = 30,
         what: str = "") -> Any:
    try:
        return WebDriverWait(browser, timeout, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(
            condition, message=what)
    except TimeoutException as exc:      # say what the page showed, and what its scripts complained of
        state = browser.execute_script(
            "return [document.getElementById('status').textContent, location.hash, "
            "document.querySelectorAll('#steps article.step').length]")
        logs = [entry["message"] for entry in browser.get_log("browser")][-5:]
        screenshot(browser, "failed-wait")
        raise AssertionError(f"waited {timeout}s for {what or 'a condition'}; status, view, steps: {state}; "
                             f"console: {logs}") from exc


def open_view(browser: webdriver.Chrome, console: dict[str, Any], hash_: str) -> None:
    browser.get(console["url"])                                   # signs in (cookie), then the view
    browser.get(console["base"] + "/" + hash_)


def steps_shown(browser: webdriver.Chrome) -> int:
    return len(browser.find_elements(By.CSS_SELECTOR, "#steps article.step"))


def fact(browser: webdriver.Chrome, name: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f'dd[data-fact="{name}"]').text


def no_markup_ran(browser: webdriver.Chrome) -> None:
    assert browser.execute_script("return window.pwned === undefined") is True
    view = browser.find_element(By.ID, "view")
    for tag in ("script", "img", "iframe", "b"):
        assert view.find_elements(By.TAG_NAME, tag) == [], tag


# ---------------------------------------------------------------- a real run, followed live


@pytest.mark.docker
def test_a_real_run_is_followed_live_then_its_steps_diff_and_tests_are_shown(
        console: dict[str, Any], browser: webdriver.Chrome, sandbox_image: str) -> None:
    script = json.loads(resolve_script("wordcount-fix").read_text())
    slow = [[{"type": "text", "text": "First a slow look around."},
             {"type": "tool_use", "name": "bash", "input": {"command": "sleep 4; ls"}}]]
    script_file = console["cwd"] / "slow.json"
    script_file.write_text(json.dumps({"turns": slow + script["turns"]}))
    out = console["cwd"] / "scratch" / "wordcount-live"     # below no root: found through the state folder's record
    run = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "run", str(TASKS / "wordcount"),
                            "--model", f"scripted:{script_file}", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=console["cwd"],
                           env=console["env"])
    try:
        trajectory = out / "trajectory.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and not (trajectory.exists() and trajectory.read_text().count("\n") >= 3):
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        open_view(browser, console, "#/runs")
        row = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="wordcount-live"]'))
        assert "running" in row.text
        screenshot(browser, "runs-list-live")
        row.find_element(By.CSS_SELECTOR, "a.open").click()
        wait(browser, lambda b: steps_shown(b) >= 3, what="the first steps")
        assert "live" in browser.find_element(By.ID, "status").text
        shown = steps_shown(browser)
        assert shown == 3, shown                           # system, problem, the slow call: its result is not in yet
        screenshot(browser, "run-live")
        wait(browser, lambda b: steps_shown(b) > shown, timeout=60, what="a step appearing without a reload")
        assert browser.find_element(By.ID, "step-3")       # the slow call's result arrived by itself
        assert run.wait(120) == 0, run.communicate()
        wait(browser, lambda b: fact(b, "state") == "finished", timeout=30, what="the finished run's figures")
        assert fact(browser, "tests") == "passed" and fact(browser, "stop reason") == "end"
        wait(browser, lambda b: steps_shown(b) == len(trajectory.read_text().splitlines()))
    finally:
        if run.poll() is None:
            run.terminate()
            run.wait(30)

    # expand a step: the first test run's output is long enough to be folded shut
    result = browser.find_element(By.ID, "result-call-2-2")
    assert result.get_attribute("open") is None
    result.find_element(By.CSS_SELECTOR, "summary .tool-name").click()
    output = result.find_element(By.CSS_SELECTOR, "pre.output")
    assert output.is_displayed() and "failed" in output.text
    assert re.search(r"exit 1 · [\d.]+ (ms|s)", result.find_element(By.CSS_SELECTOR, ".result-facts").text)
    screenshot(browser, "run-step-expanded")
    # a call links to its result and back
    call = browser.find_element(By.ID, "call-call-4-2")
    call.find_element(By.CSS_SELECTOR, "a.goto").click()
    wait(browser, lambda b: "flash" in b.find_element(By.ID, "result-call-4-2").get_attribute("class"))

    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="patch"]').click()
    added = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff .d-add")]
    assert "+    return ranked[:n]" in added, added
    screenshot(browser, "run-diff-unified")
    browser.find_element(By.CSS_SELECTOR, 'button[data-mode="split"]').click()
    left = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff table.split td.d-del")]
    right = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff table.split td.d-add")]
    assert "    return ranked[: n - 1]" in left and "    return ranked[:n]" in right
    screenshot(browser, "run-diff-split")
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="tests"]').click()
    assert "passed" in browser.find_element(By.ID, "tests-output").text
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="result"]').click()
    assert json.loads(browser.find_element(By.ID, "result-json").text)["tests_passed"] is True
    screenshot(browser, "run-result-json")


# ---------------------------------------------------------------- real evaluations


def _evaluate(console: dict[str, Any], name: str, predictions: str) -> Path:
    out = console["extra"] / name
    done = subprocess.run([sys.executable, "-m", "harness.cli.main", "eval", str(TASKS / "wordcount"),
                           str(TASKS / "cart"), str(TASKS / "pagination"), "--predictions", predictions,
                           "--workers", "2", "--out", str(out), "--label", "harness.test=1"],
                          capture_output=True, text=True, cwd=console["cwd"], env=console["env"], timeout=900)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return out


@pytest.mark.docker
def test_evaluation_reports_filter_chart_and_compare(console: dict[str, Any], browser: webdriver.Chrome,
                                                     sandbox_image: str) -> None:
    _evaluate(console, "eval-gold", "gold")
    mixed_file = console["cwd"] / "mixed.jsonl"
    mixed_file.write_text("".join(json.dumps({"instance_id": iid, "model_name_or_path": "mixed", "model_patch": patch})
                                  + "\n" for iid, patch in (
        ("wordcount", (TASKS / "wordcount" / "gold.patch").read_text()),
        ("cart", ""),
        ("pagination", "diff --git a/nothing.py b/nothing.py\n--- a/nothing.py\n+++ b/nothing.py\n"
                       "@@ -1 +1 @@\n-not there\n+still not there\n"))))
    mixed = _evaluate(console, "eval-mixed", str(mixed_file))
    statuses = {k: v["status"] for k, v in json.loads((mixed / "report.json").read_text())["instances"].items()}
    assert statuses == {"wordcount": "resolved", "cart": "empty_patch", "pagination": "patch_failed"}, statuses

    open_view(browser, console, "#/runs")
    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, '#runs-table tr[data-kind="eval"]')) == 2)
    Select(browser.find_element(By.ID, "runs-kind")).select_by_value("eval")
    browser.find_element(By.ID, "runs-search").send_keys("mixed")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr")
    assert len(rows) == 1 and "1 / 3 resolved" in rows[0].text
    screenshot(browser, "runs-list-filtered")
    rows[0].find_element(By.CSS_SELECTOR, "a.open").click()

    wait(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#eval-table tbody tr")) == 3)
    bars = {r.get_attribute("data-status")
            for r in browser.find_elements(By.CSS_SELECTOR, "#repo-bars rect[data-status]")}
    assert bars == {"resolved", "empty_patch", "patch_failed"}
    heights = [r.get_attribute("data-count") for r in browser.find_elements(By.CSS_SELECTOR, "#time-histogram rect")]
    assert sum(int(h) for h in heights) == 3
    screenshot(browser, "eval-report")
    browser.find_element(By.CSS_SELECTOR, '#eval-filters input[data-status="resolved"]').click()
    shown = {r.get_attribute("data-instance") for r in browser.find_elements(By.CSS_SELECTOR, "#eval-table tbody tr")}
    assert shown == {"cart", "pagination"}
    browser.find_element(By.CSS_SELECTOR, '#eval-filters input[data-status="empty_patch"]').click()
    row = browser.find_element(By.CSS_SELECTOR, "#eval-table tbody tr")
    assert row.get_attribute("data-instance") == "pagination" and "patch_failed" in row.text
    screenshot(browser, "eval-report-filtered")
    row.find_element(By.TAG_NAME, "a").click()                   # the instance's own run folder
    wait(browser, lambda b: fact(b, "instance status") == "patch_failed", what="the instance's folder")
    wait(browser, lambda b: "No trajectory" in b.find_element(By.ID, "no-steps").text)
    assert "patch_apply.txt" in browser.find_element(By.ID, "run-head").text    # what git and patch said
    browser.back()

    compare = wait(browser, lambda b: b.find_element(By.ID, "compare-with"))
    Select(compare).select_by_visible_text(next(o.text for o in Select(compare).options if "eval-gold" in o.text))
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr"))
    flipped = {r.get_attribute("data-instance"): r.get_attribute("data-change")
               for r in browser.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")}
    assert flipped == {"cart": "fixed", "pagination": "fixed"}, flipped     # A = mixed, B = gold
    assert "2 fixed in B" in browser.find_element(By.ID, "compare-counts").text
    screenshot(browser, "eval-compare")


@pytest.mark.docker
def test_a_multi_epoch_evaluation_shows_its_progress_live_then_its_statistics_epochs_and_comparison(
        console: dict[str, Any], browser: webdriver.Chrome, sandbox_image: str) -> None:
    _evaluate(console, "eval-gold", "gold")
    out = console["extra"] / "eval-epochs"
    run = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "eval", str(TASKS / "wordcount"),
                            str(TASKS / "pagination"), str(TASKS / "cart"), "--model", "scripted:epochs-mixed",
                            "--epochs", "3", "--workers", "2", "--out", str(out), "--label", "harness.test=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=console["cwd"],
                           env=console["env"])
    try:
        deadline = time.time() + 300
        while not (out / "instances").is_dir():
            assert run.poll() is None and time.time() < deadline, run.communicate()
            time.sleep(0.05)
        open_view(browser, console, "#/runs")
        row = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="eval-epochs"]'))
        assert re.search(r"\d of 9 attempts done · \d resolved so far · ETA", row.text), row.text
        assert row.get_attribute("class") == "state-running"
        screenshot(browser, "runs-list-eval-running")
        row.find_element(By.CSS_SELECTOR, "a.open").click()
        progress = wait(browser, lambda b: b.find_element(By.ID, "eval-progress"), what="the progress line")
        assert re.search(r"running: \d of 9 attempts done · \d resolved so far · ETA", progress.text), progress.text
        assert "live" in browser.find_element(By.ID, "status").text
        screenshot(browser, "eval-running")
        assert run.wait(900) == 0, run.communicate()
        wait(browser, lambda b: b.find_element(By.ID, "pass-at-1").text == "pass@1 0.667" and not b.find_elements(
            By.ID, "eval-progress"), timeout=60, what="the finished evaluation's statistics, without a reload")
    finally:
        if run.poll() is None:
            run.terminate()
            run.wait(60)
    assert "95% CI 0.354 to 0.879, wilson-clustered" in browser.find_element(By.ID, "eval-stats").text
    assert browser.find_element(By.ID, "pass-at-k").text == "pass@2 0.889 · pass@3 1.000"
    assert browser.find_element(By.ID, "flipped").text == "flipped between epochs (2): cart, wordcount"
    cart = browser.find_element(By.CSS_SELECTOR, '#eval-table tr[data-instance="cart"] td.epochs')
    assert cart.find_element(By.CSS_SELECTOR, ".passes").text == "1/3"
    assert [e.get_attribute("class") for e in cart.find_elements(By.CSS_SELECTOR, "a.epoch")] == [
        "epoch s-unresolved", "epoch s-empty_patch", "epoch s-resolved"]
    screenshot(browser, "eval-epochs")
    wordcount = browser.find_element(By.CSS_SELECTOR, '#eval-table tr[data-instance="wordcount"]')
    wordcount.find_element(By.CSS_SELECTOR, 'a.epoch[title^="epoch 2"]').click()
    wait(browser, lambda b: fact(b, "instance status") == "empty_patch", what="wordcount's second attempt")
    wait(browser, lambda b: "could not find the cause" in b.find_element(By.ID, "steps").text,
         what="the second attempt's steps (loaded after its figures)")
    browser.back()
    compare = wait(browser, lambda b: b.find_element(By.ID, "compare-with"))
    Select(compare).select_by_visible_text(next(o.text for o in Select(compare).options if "eval-gold" in o.text))
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr"))
    assert browser.find_element(By.ID, "compare-difference").text == "B − A: +0.333"
    counts = browser.find_element(By.ID, "compare-counts").text        # pagination: 3/3 against 1/1, the same
    assert counts == "2 fixed in B · 0 broken in B · 0 other changes · 1 unchanged", counts
    assert browser.find_element(By.ID, "compare-verdict").text == "no significant difference (the interval holds 0)"
    rows = {r.get_attribute("data-instance"): r.text for r in browser.find_elements(
        By.CSS_SELECTOR, "#compare-table tbody tr")}
    assert set(rows) == {"cart", "wordcount"} and "1/3" in rows["cart"] and "1/1" in rows["cart"]   # flipped only
    screenshot(browser, "eval-compare-epochs")


# ---------------------------------------------------------------- a hostile run


def test_a_hostile_run_renders_escaped_folded_and_paged(console: dict[str, Any], browser: webdriver.Chrome) -> None:
    folder = write_hostile_run(console["runs"] / '<img src=x onerror="window.pwned=9">', steps=10_000)
    (console["runs"] / "linked").symlink_to(folder)              # a link to a run is not followed
    secret = console["cwd"] / "secret.txt"
    secret.write_text("the host's secret")
    planted = write_hostile_run(console["runs"] / "planted", steps=2)
    (planted / "patch.diff").unlink()
    (planted / "patch.diff").symlink_to(secret)

    open_view(browser, console, "#/runs")
    rows = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr[data-ref]"))
    refs = sorted(r.get_attribute("data-ref") for r in rows)
    assert len(refs) == 2 and not any("linked" in r for r in refs), refs
    text = browser.find_element(By.ID, "runs-table").text
    assert 'task<script>window.pwned=1</script>' in text and '<img src=x onerror="window.pwned=9">' in text
    no_markup_ran(browser)
    screenshot(browser, "hostile-runs-list")

    browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-ref*="img"] a.open').click()
    wait(browser, lambda b: steps_shown(b) == 200, what="the first page of steps")
    body = browser.find_element(By.ID, "steps").text
    assert "step 0: <script>window.pwned=1</script><img" in body
    assert "\\u202egnp.exe\\u200b\\x1b[2J\\x1b]0;owned\\x07" in body       # bidi, zero-width, escapes shown
    assert "\u202e" not in body and "\x1b" not in body
    no_markup_ran(browser)
    assert browser.find_element(By.ID, "call-call-0-<script>window.pwned=1</script>")   # an id, not markup
    big = browser.find_element(By.ID, "result-call-1")
    big.find_element(By.CSS_SELECTOR, "summary .tool-name").click()
    unfold = big.find_element(By.CSS_SELECTOR, "button.unfold")
    assert re.search(r"… [\d,]+ lines folded \(2\.0M characters in all\)", unfold.text), unfold.text
    screenshot(browser, "hostile-run")
    unfold.click()
    wait(browser, lambda b: len(big.find_element(By.CSS_SELECTOR, "pre.output").get_attribute("textContent"))
         >= 1_999_000, what="the whole folded output")
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    wait(browser, lambda b: steps_shown(b) >= 400, what="the next page while scrolling")
    browser.find_element(By.ID, "steps-end").click()                 # 20,003 lines: jump to the last ones
    invalid = wait(browser, lambda b: b.find_element(By.ID, "step-20002"), what="the last line")
    assert "is not JSON" in invalid.text and "<script>" in invalid.text
    assert browser.find_elements(By.ID, "step-19803") and not browser.find_elements(By.ID, "step-19802")
    assert "not loaded here" in browser.find_element(By.ID, "steps-more").text
    assert browser.execute_script("return document.querySelectorAll('#steps article.step').length") == steps_shown(
        browser) < 20_003                                            # the page holds what was asked for, not 20,003
    screenshot(browser, "hostile-run-end")
    before = steps_shown(browser)
    browser.execute_script("document.getElementById('steps-more').scrollIntoView()")   # scroll back up to the gap
    wait(browser, lambda b: steps_shown(b) >= before + 600, what="the gap filling while it stays on screen")
    no_markup_ran(browser)
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="patch"]').click()
    assert '+new <img src=x onerror="window.pwned=2">\\u202egnp.exe' in browser.find_element(By.ID, "diff").text
    no_markup_ran(browser)

    browser.get(console["base"] + "/#/run?ref=0/planted")
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#run-head h1"))
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="patch"]').click()
    refused = browser.find_element(By.CSS_SELECTOR, "#pane-patch .refused").text
    assert "links are not followed" in refused and "secret" not in browser.page_source.replace("secret.txt", "")
    browser.get(console["base"] + "/#/run?ref=0/../elsewhere")
    wait(browser, lambda b: "is not a relative path inside" in b.find_element(By.ID, "view").text)


def test_a_damaged_folder_shows_as_damaged_with_why_and_the_others_are_listed(
        console: dict[str, Any], browser: webdriver.Chrome) -> None:
    write_hostile_run(console["runs"] / "good", steps=2)
    deep = console["runs"] / "deep"
    deep.mkdir()
    (deep / "result.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)     # before: /api/runs answered 500
    (deep / "trajectory.jsonl").write_text(json.dumps({"role": 'assistant" class="x role-system', "content": "hi"})
                                           + "\n")
    evaluation = console["runs"] / "eval-torn"
    (evaluation / "instances").mkdir(parents=True)
    (evaluation / "run.json").write_text("{}")
    (evaluation / "report.json").write_text('{"instances": {')

    open_view(browser, console, "#/runs")
    rows = wait(browser, lambda b: (lambda r: r if len(r) == 3 else None)(
        b.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr[data-ref]")), what="three folders listed")
    by_name = {r.get_attribute("data-name"): r for r in rows}
    assert by_name["good"].get_attribute("class") == "state-finished"
    assert by_name["deep"].get_attribute("class") == "state-damaged"
    assert "result.json: nested deeper than 64 levels (at least 200000): not parsed" in by_name["deep"].text
    assert by_name["eval-torn"].get_attribute("class") == "state-damaged"
    assert "report.json: not JSON" in by_name["eval-torn"].text
    screenshot(browser, "runs-list-damaged")
    Select(browser.find_element(By.ID, "runs-state")).select_by_value("damaged")
    listed = "#runs-table tbody tr"
    wait(browser, lambda b: {r.get_attribute("data-name") for r in b.find_elements(By.CSS_SELECTOR, listed)}
         == {"deep", "eval-torn"}, what="the damaged ones filtered")

    browser.find_element(By.CSS_SELECTOR, '#runs-table tr[data-name="deep"] a.open').click()
    damaged = wait(browser, lambda b: b.find_element(By.ID, "run-damaged"), what="the run's damage")
    assert "nested deeper than 64 levels" in damaged.text
    step = wait(browser, lambda b: b.find_element(By.ID, "step-0"))
    assert step.get_attribute("class") == "step role-other"              # a role names no class of its own
    assert 'assistant" class="x role-system' in step.text
    browser.find_element(By.CSS_SELECTOR, 'button[data-tab="result"]').click()
    assert "nested deeper" in browser.find_element(By.CSS_SELECTOR, "#pane-result .damaged-why").text
    browser.get(console["base"] + "/#/eval?ref=0/eval-torn")
    torn = wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#view .damaged-why"))
    assert "report.json: not JSON" in torn.text
    no_markup_ran(browser)


def test_a_trajectory_cut_at_its_caps_says_so_on_the_page(console: dict[str, Any], browser: webdriver.Chrome) -> None:
    giant = console["runs"] / "giant"
    giant.mkdir()
    path = giant / "trajectory.jsonl"
    with path.open("wb") as f:                     # a normal line, one over the line cap, then 3 GiB of one line
        f.write(b'{"role": "user", "content": "first"}\n')
        f.write(b'{"role": "user", "content": "' + b"y" * 4_100_000 + b'"}\n')
        f.write(b'{"role": "assistant", "content": "')
    os.truncate(path, 3 * 2**30)
    open_view(browser, console, "#/run?ref=0/giant")
    cut = wait(browser, lambda b: b.find_element(By.ID, "step-1"), what="the line over the cap")
    assert "line 2 is 4,100,031 bytes, over the 4,000,000-byte cap for one line: not read" in cut.text
    notes = wait(browser, lambda b: b.find_element(By.ID, "steps-cut").text, what="what was cut")
    assert "trajectory.jsonl is 3,221,225,472 bytes; the console reads its first 268,435,456" in notes
    assert "line 3 (from byte 4,100,069) is over the 4,000,000-byte cap" in notes
    assert steps_shown(browser) == 2
    screenshot(browser, "run-cut")


# ---------------------------------------------------------------- approvals in the console


def test_the_console_approves_a_held_request(console: dict[str, Any], browser: webdriver.Chrome) -> None:
    open_view(browser, console, "#/approvals")
    with CountingServer() as server:
        proc = start_call(console["state"], server.url(), "console-1", body="from the console")
        card = wait(browser, lambda b: b.find_element(By.ID, "request-1"))
        badge = browser.find_element(By.ID, "pending-badge")
        wait(browser, lambda b: badge.text == "1")
        assert "from the console" in card.find_element(By.CSS_SELECTOR, "pre.preview").text
        screenshot(browser, "approvals")
        assert server.count() == 0
        card.find_element(By.CSS_SELECTOR, "[data-role=approve]").click()
        assert "hit 1 POST /collect" in str(finish_call(proc)["text"])
        wait(browser, lambda b: b.find_element(By.ID, "history-1").get_attribute("data-status") == "done")
        assert server.count() == 1


def test_the_console_markup_is_ours_only() -> None:
    """Every asset comes from the app (no CDN, nothing from elsewhere) and the page is one we wrote."""
    page = (REPO / "harness" / "web" / "static" / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"#]+)"', page) == ["/static/app.css", "/static/app.js"]
    for path in (REPO / "harness" / "web" / "static").glob("*.js"):
        source = path.read_text()
        assert not re.search(r"\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|\beval\(|new Function",
                             source), path
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", source), path
