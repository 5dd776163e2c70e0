"""The approvals web page in a real headless Chromium (Selenium with Debian's chromedriver), served by
the real `harness approvals serve` process, deciding requests of real harness processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.approval.helpers import REPO, CountingServer, finish_call, start_call


@pytest.fixture
def page_url(tmp_path: Path) -> Iterator[str]:
    """`harness approvals serve --port 0` in its own process; yields the URL it prints (with token)."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.main", "approvals", "--state-dir", str(tmp_path),
                             "serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        match = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        assert match, f"serve printed {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        yield match.group(0)
    finally:
        proc.terminate()
        proc.wait(10)


def _card(browser: webdriver.Chrome, request_id: int):  # type: ignore[no-untyped-def]
    return WebDriverWait(browser, 15).until(lambda b: b.find_element(By.ID, f"request-{request_id}"))


def test_a_request_appears_live_and_approving_it_sends_once(tmp_path: Path, page_url: str,
                                                            browser: webdriver.Chrome) -> None:
    browser.get(page_url)
    assert "token=" not in browser.current_url                  # the token moved into a cookie
    WebDriverWait(browser, 10).until(lambda b: "live" in b.find_element(By.ID, "status").text)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "web-1", body="hello from the agent")
        card = _card(browser, 1)                                 # no reload: it appears by itself
        preview = card.find_element(By.CSS_SELECTOR, "pre.preview").text
        assert server.url() in preview and "hello from the agent" in preview
        assert server.count() == 0
        card.find_element(By.CSS_SELECTOR, "[data-role=approve]").click()
        assert "hit 1 POST /collect" in str(finish_call(proc)["text"])
        # the page re-renders its history as statuses change: a row found just before is then stale
        row = WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda b: (lambda r: r.text if r.get_attribute("data-status") == "done" else None)(
                b.find_element(By.ID, "history-1")))
        assert "web:127.0.0.1" in row and "hit 1 POST" in row
        assert browser.find_elements(By.ID, "request-1") == []
        assert server.count() == 1


def test_denying_on_the_page_sends_nothing_and_the_reason_reaches_the_model(
        tmp_path: Path, page_url: str, browser: webdriver.Chrome) -> None:
    browser.get(page_url)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "web-2", body="<img src=x onerror=alert(1)>\u202egnp.exe")
        card = _card(browser, 1)
        preview = card.find_element(By.CSS_SELECTOR, "pre.preview").text
        assert "<img src=x onerror=alert(1)>" in preview and "\\u202egnp.exe" in preview   # shown, not parsed
        assert card.find_elements(By.TAG_NAME, "img") == []
        card.find_element(By.CSS_SELECTOR, "[data-role=reason]").send_keys("not on my watch")
        card.find_element(By.CSS_SELECTOR, "[data-role=deny]").click()
        result = finish_call(proc)
        assert result["error"] == "ApprovalDenied" and "not on my watch" in str(result["text"])
        assert server.count() == 0


def _session_cookie(browser: webdriver.Chrome) -> str:
    """The Cookie header of the browser's session (the token itself is no cookie)."""
    return "; ".join(f"{c['name']}={c['value']}" for c in browser.get_cookies())


def _post(base: str, headers: dict[str, str], body: dict[str, object]) -> tuple[int, str]:
    req = urllib.request.Request(base + "/api/decide", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_page_refuses_missing_token_foreign_host_and_cross_site_posts(
        tmp_path: Path, page_url: str, browser: webdriver.Chrome) -> None:
    base, token = page_url.split("/?token=")
    browser.get(base + "/")
    assert "not signed in" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(page_url)                                       # positive control: the token URL works
    csrf = browser.find_element(By.CSS_SELECTOR, 'meta[name="csrf-token"]').get_attribute("content")
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), "web-3")
        _card(browser, 1)
        cookie, host = {"Cookie": _session_cookie(browser)}, base.split("//")[1]
        with urllib.request.urlopen(urllib.request.Request(base + "/api/state", headers=cookie)) as resp:
            request_hash = json.loads(resp.read())["pending"][0]["hash"]
        body = {"id": 1, "decision": "approve", "reason": "", "hash": request_hash}
        status, text = _post(base, {**cookie, "Origin": "http://evil.example", "X-CSRF-Token": str(csrf)}, body)
        assert (status, json.loads(text)) == (
            403, {"error": "cross-site request refused: Origin 'http://evil.example' is not this page"})
        status, text = _post(base, {**cookie, "Origin": f"http://{host}"}, body)
        assert (status, json.loads(text)["error"]) == (403, "missing or wrong X-CSRF-Token; reload the page")
        status, text = _post(base, {**cookie, "Origin": f"http://{host}", "X-CSRF-Token": str(csrf),
                                    "Host": "rebound.example:80"}, body)
        assert status == 421 and "is not this server" in json.loads(text)["error"]
        assert server.count() == 0
        status, text = _post(base, {**cookie, "Origin": f"http://{host}", "X-CSRF-Token": str(csrf)}, body)
        assert status == 200 and json.loads(text)["status"] == "approved"
        assert "hit 1 POST" in str(finish_call(proc)["text"]) and server.count() == 1


HOSTILE_KEY = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">\x1b[2J[bold]k[/bold]'


def test_a_hostile_key_and_body_show_as_text_and_a_stale_hash_is_refused(
        tmp_path: Path, page_url: str, browser: webdriver.Chrome) -> None:
    browser.get(page_url)
    base, token = page_url.split("/?token=")
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url(), HOSTILE_KEY, body="<b>bold</b><script>window.pwned=3</script>")
        card = _card(browser, 1)
        meta = card.find_element(By.CSS_SELECTOR, "div.meta").text
        assert 'key <script>window.pwned=1</script><img src=x onerror="window.pwned=2">\\x1b[2J[bold]k[/bold]' in meta
        assert "<b>bold</b><script>window.pwned=3</script>" in card.find_element(By.CSS_SELECTOR, "pre.preview").text
        for tag in ("script", "img", "b"):
            assert card.find_elements(By.TAG_NAME, tag) == [], tag
        assert browser.execute_script("return window.pwned === undefined") is True
        csrf = browser.find_element(By.CSS_SELECTOR, 'meta[name="csrf-token"]').get_attribute("content")
        headers = {"Cookie": _session_cookie(browser), "Origin": base, "X-CSRF-Token": str(csrf)}
        status, text = _post(base, headers, {"id": 1, "decision": "approve", "reason": "", "hash": "0" * 64})
        assert status == 409 and json.loads(text)["error"].startswith("request #1 is not the one you saw: its hash is ")
        assert server.count() == 0
        card.find_element(By.CSS_SELECTOR, "[data-role=deny]").click()   # positive control: the shown hash works
        assert finish_call(proc)["error"] == "ApprovalDenied"
        row = WebDriverWait(browser, 15).until(lambda b: b.find_element(By.ID, "history-1"))
        assert '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">\\x1b[2J' in row.text
        assert row.find_elements(By.TAG_NAME, "script") == [] and row.find_elements(By.TAG_NAME, "img") == []
        assert server.count() == 0


def test_a_grant_from_the_page_shows_its_rule_first_and_decides_the_next_request(
        tmp_path: Path, page_url: str, browser: webdriver.Chrome) -> None:
    browser.get(page_url)
    with CountingServer() as server:
        proc = start_call(tmp_path, server.url("/docs/<b>3<b>/a.html"), "web-g1", method="GET")
        card = _card(browser, 1)
        assert not card.find_element(By.CSS_SELECTOR, "[data-role=grant-rules]").is_displayed()
        Select(card.find_element(By.CSS_SELECTOR, "[data-role=scope]")).select_by_value("run")
        rule = card.find_element(By.CSS_SELECTOR, "[data-role=grant-approve]").text
        assert rule.startswith(f"approve: approve http_request GET http://127.0.0.1:{server.port}/docs/<b>3<b>/** (no "
                               "query; no body; no headers")
        assert card.find_elements(By.TAG_NAME, "b") == []                 # the path's markup stays text
        button = card.find_element(By.CSS_SELECTOR, "[data-role=approve]")
        assert button.text == "Approve #1 and grant the rule shown"
        button.click()
        assert "hit 1 GET" in str(finish_call(proc)["text"])
        later = finish_call(start_call(tmp_path, server.url("/docs/<b>3<b>/b.html"), "web-g2", method="GET"))
        assert "hit 2 GET /docs/<b>3<b>/b.html" in str(later["text"])            # no click: the grant decided it
        row = WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda b: (lambda r: r.text if r.get_attribute("data-status") == "done" else None)(
                b.find_element(By.ID, "history-2")))
        assert "approved by grant G1" in row and server.count() == 2
