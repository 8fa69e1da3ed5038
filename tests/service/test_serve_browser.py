"""The web view in a real headless Chromium: token, start a run, live tree, interrupt.

Chromium is Debian's ``chromium`` with its ``chromedriver`` (``.ci/run`` installs both),
driven by selenium, so nothing is downloaded at test time. Under ``CI`` a missing
browser fails the test; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.serving import PLUGIN, TOKEN, Server, agents_dir, offline_env, start_server

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,760",
)
WAIT_SECONDS = 60


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if not missing:
        return
    reason = (
        f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver; "
        ".ci/run installs them)"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(params=["asyncio", "trio"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    agents = agents_dir(tmp_path / "agents", "quick_a", "quick_b", "slow_one")
    markers = tmp_path / "markers"
    markers.mkdir()
    running = start_server(
        tmp_path,
        *("--agents", str(agents), "--plugin", str(PLUGIN), "--backend", request.param),
        env=offline_env(SERVE_PLUGIN_DIR=str(markers)),
    )
    try:
        yield running, markers
    finally:
        (markers / "release").touch()
        status, stderr = running.stop()
        assert status == 0, stderr


def test_the_page_starts_a_run_shows_the_tree_and_interrupts_a_delegation(
    browser: object, server: tuple[Server, Path], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    assert isinstance(driver, WebDriver)
    live, markers = server
    wait = WebDriverWait(driver, WAIT_SECONDS)

    def row(agent: str) -> dict[str, str]:
        rows = driver.find_elements(By.CSS_SELECTOR, f'#tree tr[data-agent="{agent}"]')
        if not rows:
            return {}
        cells = rows[0].find_elements(By.TAG_NAME, "td")
        return {
            "status": rows[0].get_attribute("data-status") or "",
            "node": rows[0].get_attribute("data-node") or "",
            "elapsed": cells[2].text,
            "requests": cells[3].text,
            "last_tool": cells[5].text,
        }

    def start(*agents: str) -> None:
        for box in driver.find_elements(By.CSS_SELECTOR, "#agents input[type=checkbox]"):
            if box.is_selected() != (box.get_attribute("value") in agents):
                box.click()
        task = driver.find_element(By.ID, "task")
        task.clear()
        task.send_keys("Look into the README")
        driver.find_element(By.ID, "start").click()

    driver.get(live.url + "/")
    assert driver.find_element(By.ID, "app").get_attribute("hidden") is not None
    driver.find_element(By.ID, "token").send_keys("wrong-token-0123456789abcdef")
    driver.find_element(By.ID, "use-token").click()
    wait.until(lambda d: "refused" in d.find_element(By.ID, "message").text)
    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.ID, "use-token").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#agents input")) == 3)

    # A run that completes: the tree follows it to the end.
    start("quick_a", "quick_b")
    wait.until(lambda d: d.find_element(By.ID, "run-status").text == "completed")
    for agent in ("lead", "quick_a", "quick_b"):
        assert row(agent)["status"] == "completed", agent
    assert row("quick_a")["requests"] == "2/3"
    assert row("quick_a")["last_tool"].startswith("quick_lookup(")
    assert driver.find_element(By.ID, "answer").text

    # A run with a delegation that waits: interrupt it from its row.
    start("quick_a", "slow_one")
    wait.until(lambda d: row("slow_one").get("last_tool", "").startswith("wait_for_release"))
    wait.until(lambda d: row("quick_a").get("status") == "completed")
    wait.until(lambda d: row("slow_one").get("elapsed") not in ("", "0.0s"))  # the clock runs
    screenshot = tmp_path / "serve-tree.png"
    assert driver.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 0
    slow = driver.find_element(By.CSS_SELECTOR, '#tree tr[data-agent="slow_one"] button.interrupt')
    slow.click()
    wait.until(lambda d: "Interrupting" in slow.text)
    (markers / f"release-{row('slow_one')['node']}").touch()
    wait.until(lambda d: row("slow_one").get("status") == "stopped")
    wait.until(lambda d: d.find_element(By.ID, "run-status").text == "completed")
    cells = driver.find_elements(By.CSS_SELECTOR, '#tree tr[data-agent="slow_one"] td')
    assert cells[1].text == "stopped (interrupted)"
    assert not driver.find_elements(By.CSS_SELECTOR, "button.interrupt")
    copy = os.environ.get("SERVE_SCREENSHOT_COPY")
    if copy:  # how docs/images/serve-tree.png is refreshed
        shutil.copyfile(screenshot, copy)
