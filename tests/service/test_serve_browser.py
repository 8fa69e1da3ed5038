"""The web view in a real headless Chromium: token, runs, live tree, reload, interrupt.

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
    "--window-size=1280,1000",
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
    # quick_b as a Claude Code agent file with a colour (the YAML format has none).
    (agents / "quick_b.yaml").unlink()
    (agents / "quick_b.md").write_text(
        "---\nname: quick_b\ndescription: quick_b agent used by the service tests.\n"
        "tools: []\nmaxTurns: 3\npermissionMode: readonly\ncolor: orange\n---\n"
        "You are the quick_b agent.\n",
        encoding="utf-8",
    )
    markers = tmp_path / "markers"
    markers.mkdir()
    running = start_server(
        tmp_path,
        *("--agents", str(agents), "--plugin", str(PLUGIN), "--backend", request.param),
        *("--model", "priced/test"),  # the offline model with a price per request
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
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    assert isinstance(driver, WebDriver)
    live, markers = server
    # An element redrawn between finding and reading it is looked up again next poll.
    wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(StaleElementReferenceException,))

    def row(agent: str) -> dict[str, str]:
        # Read in one script: the page redraws the tree while a run is live, so elements
        # found one call earlier may be gone (stale) by the next.
        found = driver.execute_script(
            "const r = document.querySelector(`#tree tr[data-agent='${arguments[0]}']`);"
            "if (!r) return null;"
            "const c = [...r.querySelectorAll('td')].map((td) => td.innerText);"
            "return {status: r.dataset.status || '', node: r.dataset.node || '',"
            " state: c[1], elapsed: c[2], requests: c[3], tokens: c[4], cost: c[5],"
            " last_tool: c[6]};",
            agent,
        )
        return {str(k): str(v) for k, v in found.items()} if found else {}

    def click(selector: str) -> None:
        # Found and clicked in one poll: a list or tree redrawn in between makes the
        # element stale, and the next poll finds the redrawn one.
        def clicked(d: WebDriver) -> bool:
            d.find_element(By.CSS_SELECTOR, selector).click()
            return True

        wait.until(clicked)

    def start(*agents: str, task: str = "Look into the README") -> str:
        before = driver.find_element(By.ID, "run-id").text
        for box in driver.find_elements(By.CSS_SELECTOR, "#agents input[type=checkbox]"):
            if box.is_selected() != (box.get_attribute("value") in agents):
                box.click()
        field = driver.find_element(By.ID, "task")
        field.clear()
        field.send_keys(task)
        driver.find_element(By.ID, "start").click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text not in ("", before))
        return str(driver.find_element(By.ID, "run-id").text)

    def listed() -> list[tuple[str, str]]:
        links = driver.find_elements(By.CSS_SELECTOR, "#run-list a")
        return [
            (a.get_attribute("data-run") or "", a.get_attribute("data-status") or "") for a in links
        ]

    def sideways() -> list[str]:
        """The elements reaching past the window's right edge (the page scrolls sideways)."""
        return list(
            driver.execute_script(
                "return [...document.querySelectorAll('body *')]"
                ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)"
                ".map(e => e.tagName + '#' + e.id + '.' + e.className)"
            )
        )

    def text(element_id: str) -> str:
        return str(driver.find_element(By.ID, element_id).text)

    driver.get(live.url + "/")
    assert driver.find_element(By.ID, "app").get_attribute("hidden") is not None
    driver.find_element(By.ID, "token").send_keys("wrong-token-0123456789abcdef")
    driver.find_element(By.ID, "use-token").click()
    wait.until(lambda d: "refused" in d.find_element(By.ID, "message").text)
    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.ID, "use-token").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#agents input")) == 3)

    assert listed() == []
    assert driver.find_element(By.ID, "runs-empty").is_displayed()

    # A run that completes: the tree follows it to the end, with its model and limits;
    # a long unbroken task wraps instead of widening the page.
    long_word = "https://example.org/" + "a-long-path-segment-without-any-space/" * 10
    first = start("quick_a", "quick_b", task=f"Summarise the README and {long_word}")
    assert driver.current_url.endswith(f"#run={first}")
    wait.until(lambda d: text("run-status") == "completed")
    for agent in ("lead", "quick_a", "quick_b"):
        assert row(agent)["status"] == "completed", agent
    assert row("quick_a")["requests"] == "2/3"
    assert row("quick_a")["tokens"] == "30"  # two requests of 10 in and 5 out
    assert row("quick_a")["cost"] == "$0.0008"  # two requests at $0.0004
    assert row("lead")["cost"] == "$0.0024"  # six requests: the lead's and its children's
    assert row("quick_a")["last_tool"].startswith("quick_lookup(")
    # An MCP call's progress is the delegation's last tool, as in the CLI's live view. The
    # scripted run has no MCP server, so the event is fed to the page's own handler, as
    # the event stream would feed it.
    progress = {
        "type": "mcp_progress",
        "delegation_id": row("quick_a")["node"],
        "server": "files",
        "tool": "copy",
        "progress": 3,
        "total": 10,
        "message": "copying\nthe files",
        "title": None,
    }
    driver.execute_script("apply(arguments[0]); render();", progress)
    assert row("quick_a")["last_tool"] == "copy 3/10 copying the files"
    driver.execute_script("apply(arguments[0]); render();", {**progress, "title": "Copy files"})
    assert row("quick_a")["last_tool"] == "Copy files 3/10 copying the files"
    # A definition's colour draws its agent's name (only the name, not the tree's branch).
    # Read in one script: the rows are redrawn while the page runs.
    names = driver.execute_script(
        "return ['quick_a', 'quick_b'].map((agent) => {"
        "  const el = document.querySelector(`#tree tr[data-agent='${agent}'] span.agent`);"
        "  return [el.textContent, el.dataset.colour || null, getComputedStyle(el).color];"
        "});"
    )
    assert names[1] == ["quick_b", "orange", "rgb(230, 81, 0)"]
    assert names[0][:2] == ["quick_a", None]
    assert text("answer")
    assert text("run-model") == "priced/test"
    assert "max_requests 25" in text("run-limits")
    assert "permission mode standard" in text("run-limits")
    wait.until(lambda d: "requests" in text("run-usage"))
    assert long_word in text("run-task").replace("\n", "")
    wait.until(lambda d: listed() == [(first, "completed")])
    assert sideways() == []
    answer_style = driver.execute_script(
        "const s = getComputedStyle(document.getElementById('answer'));"
        "return [s.whiteSpace, s.overflowWrap]"
    )
    assert answer_style == ["pre-wrap", "anywhere"]

    # The link survives a reload: the run is shown again from the server's log.
    driver.refresh()
    wait.until(lambda d: text("run-status") == "completed" and row("quick_b"))
    assert text("run-id") == first
    assert row("quick_a")["status"] == "completed"
    assert row("quick_a")["requests"] == "2/3"
    assert text("answer")
    wait.until(lambda d: listed() == [(first, "completed")])
    link = driver.find_element(By.CSS_SELECTOR, f'#run-list a[data-run="{first}"]')
    assert "current" in (link.get_attribute("class") or "")
    finished_shot = tmp_path / "serve-finished.png"
    assert driver.save_screenshot(str(finished_shot))

    # A run with a delegation that waits: interrupt it from its row.
    second = start("quick_a", "slow_one")
    wait.until(lambda d: listed() == [(second, "running"), (first, "completed")])
    wait.until(lambda d: row("slow_one").get("last_tool", "").startswith("wait_for_release"))
    wait.until(lambda d: row("quick_a").get("status") == "completed")
    wait.until(lambda d: row("slow_one").get("elapsed") not in ("", "0.0s"))  # the clock runs
    # Cost is live too: the running delegation's first response, before it settles.
    assert row("slow_one")["cost"] == "$0.0004"
    screenshot = tmp_path / "serve-tree.png"
    assert driver.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 0
    interrupt = '#tree tr[data-agent="slow_one"] button.interrupt'
    click(interrupt)
    wait.until(lambda d: "Interrupting" in d.find_element(By.CSS_SELECTOR, interrupt).text)
    (markers / f"release-{row('slow_one')['node']}").touch()
    wait.until(lambda d: row("slow_one").get("status") == "stopped")
    wait.until(lambda d: d.find_element(By.ID, "run-status").text == "completed")
    assert row("slow_one")["state"] == "stopped (interrupted)"
    assert not driver.find_elements(By.CSS_SELECTOR, "button.interrupt")
    wait.until(lambda d: listed() == [(second, "completed"), (first, "completed")])

    # Back to the first run through its entry in the list.
    click(f'#run-list a[data-run="{first}"]')
    wait.until(lambda d: text("run-id") == first and row("quick_b").get("status") == "completed")
    assert not driver.find_elements(By.CSS_SELECTOR, '#tree tr[data-agent="slow_one"]')

    # The browser fetched the favicon without a token and got an image.
    icon = driver.execute_script(
        "return fetch('/favicon.ico').then(r => [r.status, r.headers.get('content-type')])"
    )
    assert icon == [200, "image/png"]
    copy = os.environ.get("SERVE_SCREENSHOT_DIR")
    if copy:  # how docs/images/serve-*.png are refreshed
        shutil.copyfile(screenshot, Path(copy) / "serve-tree.png")
        shutil.copyfile(finished_shot, Path(copy) / "serve-finished.png")
