"""Figures of the web console, printed (not asserted), in a real headless Chromium:

    .venv/bin/python bench/bench_web.py [--steps 10000] [--rounds 5]

1. time to first paint of a run of N tool-call steps (hostile: markup, bidi marks, a 2 MB output,
   a line that is not JSON), against the same for a 10-step run in the same session: from navigation
   to the browser's first contentful paint, and to the first step on screen;
2. the first page of steps over HTTP (the server's part), cold (a new index) and warm;
3. jumping to the last steps, and scrolling through: how long until every step is on the page;
4. the runs list with many run folders.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from harness.web.server import make_web_server  # noqa: E402
from tests.browser import chromium  # noqa: E402
from tests.web.hostile_run import write_hostile_run  # noqa: E402
from tests.web.signin import sign_in_cookie  # noqa: E402

PAINT = ("return (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null")


def first_paint(driver, base: str, ref: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(first contentful paint, first step on screen) in ms after navigation started, for one fresh load."""
    driver.get("about:blank")
    driver.get(f"{base}/#/run?ref={ref}")
    WebDriverWait(driver, 120, poll_frequency=0.01).until(lambda d: d.find_elements(By.ID, "step-0"))
    step = driver.execute_script(
        "const e = performance.getEntriesByType('navigation')[0]; return performance.now() - (e ? e.startTime : 0);")
    paint = WebDriverWait(driver, 10).until(lambda d: d.execute_script(PAINT))
    return float(paint), float(step)


def http_ms(url: str, cookie: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Cookie": cookie}), timeout=120) as r:
        r.read()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=300, help="run folders for the runs-list figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        t0 = time.perf_counter()
        big = write_hostile_run(runs / "big", steps=args.steps)
        print(f"wrote a {args.steps}-step hostile run ({(big / 'trajectory.jsonl').stat().st_size / 1e6:.1f} MB, "
              f"{2 * args.steps + 3} lines) in {time.perf_counter() - t0:.1f} s")
        write_hostile_run(runs / "small", steps=10, big_output_bytes=1000)
        with make_web_server(None, [runs], port=0) as server:
            cookie = sign_in_cookie(server.url)[1]
            cold = http_ms(f"{server.base}/api/steps?ref=0/big&start=0&limit=200", cookie)
            warm = [http_ms(f"{server.base}/api/steps?ref=0/big&start=0&limit=200", cookie) for _ in range(5)]
            tail = http_ms(f"{server.base}/api/steps?ref=0/big&start={2 * args.steps}&limit=200", cookie)
            print(f"first page of 200 steps over HTTP: cold {cold:.0f} ms (indexes the whole file), warm median "
                  f"{statistics.median(warm):.0f} ms; the last page {tail:.0f} ms")
            driver = chromium()
            try:
                driver.get(server.url)
                figures: dict[str, list[tuple[float, float]]] = {"small": [], "big": []}
                for _ in range(args.rounds):
                    for name in ("small", "big"):
                        figures[name].append(first_paint(driver, server.base, f"0/{name}"))
                for name in ("small", "big"):
                    paints, steps = zip(*figures[name], strict=True)
                    print(f"{name:5} run: first contentful paint median {statistics.median(paints):.0f} ms, first step "
                          f"on screen median {statistics.median(steps):.0f} ms ({args.rounds} loads)")
                big_ms, small_ms = (statistics.median(s for _, s in figures[n]) for n in ("big", "small"))
                ratio = big_ms / small_ms
                print(f"first step on screen, {args.steps}-step run / 10-step run: {ratio:.2f}x")
                want = 2 * args.steps + 3
                driver.get("about:blank")
                driver.get(f"{server.base}/#/run?ref=0/big")
                WebDriverWait(driver, 60, poll_frequency=0.01).until(lambda d: d.find_elements(By.ID, "step-0"))
                t1 = time.perf_counter()
                driver.find_element(By.ID, "steps-end").click()
                last = f"step-{want - 1}"
                WebDriverWait(driver, 60, poll_frequency=0.01).until(lambda d: d.find_elements(By.ID, last))
                jump = (time.perf_counter() - t1) * 1000
                print(f"jump to the last steps of the {args.steps}-step run: {jump:.0f} ms")
                count = "return document.querySelectorAll('#steps article.step').length"
                t1 = time.perf_counter()
                while driver.execute_script(count) < want and time.perf_counter() - t1 < 600:
                    driver.execute_script("document.getElementById('steps-more').scrollIntoView()")
                    time.sleep(0.02)
                shown = driver.execute_script(count)
                t2 = time.perf_counter()
                driver.execute_script("return document.getElementById('steps').scrollHeight")
                responsive = (time.perf_counter() - t2) * 1000
                print(f"scrolling through: all {shown} of {want} steps on the page after {t2 - t1:.1f} s "
                      f"({want / (t2 - t1):.0f} steps/s); a script call on the full page then answers in "
                      f"{responsive:.0f} ms")
            finally:
                driver.quit()
        for n in range(args.runs):
            write_hostile_run(runs / "many" / f"run-{n:04d}", steps=1, big_output_bytes=100)
        with make_web_server(None, [runs], port=0) as server:
            cookie = sign_in_cookie(server.url)[1]
            listed = [http_ms(f"{server.base}/api/runs", cookie) for _ in range(3)]
            print(f"runs list of {args.runs + 2} run folders over HTTP: median {statistics.median(listed):.0f} ms")


if __name__ == "__main__":
    main()
