"""A real headless Chromium driven by Selenium (Debian's chromium and chromedriver), for the web pages'
tests and benchmark; screenshots go to the test output folder (`$HARNESS_TEST_OUTPUT`, default
`test-output/` in the checkout, ignored by git), where a person can look at them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
OUTPUT = Path(os.environ.get("HARNESS_TEST_OUTPUT") or Path(__file__).resolve().parent.parent / "test-output")


def chromium(width: int = 1400, height: int = 1000) -> webdriver.Chrome:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: apt-get install chromium chromium-driver (scripts/install does)",
                        pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """Save the page as OUTPUT/web/NAME.png and return the path."""
    path = OUTPUT / "web" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
