"""The dashboard in a real browser: Debian's Chromium driven by Playwright (no browser
download): open it, start a comparison from a shipped example, wait, check table and plot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.service.server import running_server

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")

CHROMIUM = Path(os.environ.get("CLOUDTWIN_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--no-sandbox", "--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-extensions", "--disable-sync",
    "--no-first-run", "--metrics-recording-only", "--mute-audio",
]
#: Where the screenshot of the finished comparison is saved (kept for a person to look at).
SCREENSHOT = Path(os.environ.get("CLOUDTWIN_SCREENSHOT_DIR", "")) if os.environ.get(
    "CLOUDTWIN_SCREENSHOT_DIR") else None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def browser_page():  # type: ignore[no-untyped-def]
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            yield page
        finally:
            browser.close()


def test_start_a_comparison_and_see_its_table_and_plot(db: Path, tmp_path: Path, browser_page) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/")
        assert page.locator("#runs-table tbody tr").count() == 3
        page.select_option("#example", "leaf-spine-perftest")
        page.uncheck("input[value=adaptive]")
        page.fill("#token", server.token)
        page.click("#start-button")
        page.wait_for_selector("#job-progress")
        page.wait_for_function(
            "document.getElementById('job-state').textContent === 'done'", timeout=180_000
        )
        header = page.locator("#job-table tr").first.locator("td").all_inner_texts()
        assert header == ["metric", "ecmp", "pinning"]
        ratio = page.locator("#job-table tr").last.locator("td").all_inner_texts()
        assert ratio[0] == "aggregate vs ecmp" and ratio[1] == "1.00x"
        page.wait_for_selector("#job-plot .main-svg")
        assert page.locator("#job-plot .trace.bars .point").count() == 2
        shot = (SCREENSHOT or tmp_path) / "dashboard.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    assert requested and all(url.startswith(server.url + "/") for url in requested), requested


def test_a_run_page_draws_its_plots_and_sorting_the_table_works(  # type: ignore[no-untyped-def]
    db: Path, tmp_path: Path, browser_page
) -> None:
    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/")
        page.click("#runs-table th >> text=seed")
        seeds = page.locator("#runs-table tbody tr td:nth-child(5)").all_inner_texts()
        assert seeds in (["4", "3", "3"], ["3", "3", "4"])
        page.goto(server.url + "/runs/1")
        for name in ("timeline", "fct", "aggregate"):
            page.wait_for_selector(f"#plot-{name} .main-svg")
        assert page.locator("#tradeoff tbody tr").count() == 2
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        page.goto(server.url + "/")
        page.check("input.pick[value='1']")
        page.check("input.pick[value='3']")
        page.click("#compare-button")
        page.wait_for_selector("#plot-aggregate .main-svg")
        assert page.url.endswith("/compare?runs=3,1")
        assert page.locator("#compare-table tbody tr").count() == 5  # 3 + 2 strategies


def test_the_diagnosis_is_drawn_on_the_fabric_and_logs_on_a_timeline(  # type: ignore[no-untyped-def]
    tmp_path: Path, browser_page
) -> None:
    from tests.cli.cli_helpers import REPO

    from cloudtwin.diagnosis.usecase import diagnose
    from cloudtwin.scenario.loader import load_scenario
    from cloudtwin.store.database import Store

    example = REPO / "examples" / "diagnose.yaml"
    db = tmp_path / "ops.duckdb"
    with Store(db) as store:
        diagnose(store, load_scenario(example.read_text(), example.name))
    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/diagnosis")
        page.wait_for_selector("#plot-fabric .main-svg")
        assert page.locator("tr.suspect td").nth(1).inner_text() == "leaf1-spine2"
        assert page.locator("#plot-fabric .legendtext", has_text="#1 leaf1-spine2").count() == 1
        page.goto(server.url + "/logs?text=down")
        page.wait_for_selector("#plot-logs .main-svg")
        assert page.locator("#anomalies tbody tr").count() > 0
        assert page.locator("#lines tbody tr").count() > 0


def test_a_refused_start_says_why(db: Path, tmp_path: Path, browser_page) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/")
        page.fill("#token", "not-the-token")
        page.click("#start-button")
        page.wait_for_selector("#job-error:not([hidden])")
        assert "token" in page.locator("#job-error").inner_text()
        assert page.locator("#job-state").inner_text() == "refused"
