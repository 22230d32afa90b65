"""The dashboard in a real browser: Debian's Chromium driven by Playwright (no browser
download): open it, start a comparison from a shipped example, wait, check table and plot.
The run, diagnosis and report pages are photographed into the test's folder, and their
layout is checked from the DOM: no toolbar over a title, legends outside the plot area and
clear of the axis titles, labelled nodes, timelines on one scale."""

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


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    """One Chromium for the module (each test gets its own page)."""
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def browser_page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


#: Every plot of the page: the toolbar (modebar) clear of the titles, each legend outside
#: its plot area and clear of the axis titles. Returns what overlaps (empty when nothing).
OVERLAPS = """() => {
  const box = (e) => e.getBoundingClientRect();
  const meets = (a, b) => a.width > 0 && a.height > 0 && b.width > 0 && b.height > 0
    && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const found = [];
  for (const plot of document.querySelectorAll(".js-plotly-plot")) {
    const titles = [...plot.querySelectorAll(".gtitle")].map(box);
    const axes = [...plot.querySelectorAll(".xtitle, .ytitle")].map(box);
    const areas = [...plot.querySelectorAll(".nsewdrag")].map(box);
    for (const bar of plot.querySelectorAll(".modebar")) {
      if (titles.some((t) => meets(box(bar), t))) found.push(plot.id + ": toolbar over the title");
    }
    for (const legend of plot.querySelectorAll(".legend")) {
      const b = box(legend);
      if (areas.some((a) => meets(b, a))) found.push(plot.id + ": legend inside the plot area");
      if (axes.some((a) => meets(b, a))) found.push(plot.id + ": legend over an axis title");
      if (titles.some((t) => meets(b, t))) found.push(plot.id + ": legend over the title");
    }
  }
  return found;
}"""


#: The node names drawn on the fabric: each pair that overlaps, and each name over a node's
#: marker or a suspect's ring other than its own node's (empty when all are apart).
LABELS_APART = """() => {
  const box = (e) => e.getBoundingClientRect();
  const meets = (a, b) => a.width > 0 && a.height > 0 && b.width > 0 && b.height > 0
    && a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const plot = document.querySelector("#plot-fabric");
  const labels = [...plot.querySelectorAll(".textpoint")].filter((e) => e.textContent)
    .map((e) => [e.textContent, box(e)]);
  const found = [];
  labels.forEach(([a, ba], i) => labels.slice(i + 1).forEach(([b, bb]) => {
    if (meets(ba, bb)) found.push(a + " / " + b);
  }));
  const centre = (b) => [(b.left + b.right) / 2, (b.top + b.bottom) / 2];
  for (const point of plot.querySelectorAll(".scatterlayer .point")) {
    const p = box(point);
    const [px] = centre(p);
    for (const [name, b] of labels) {
      const own = Math.abs(centre(b)[0] - px) < 1 && (b.top >= p.bottom - 1 || b.bottom <= p.top + 1);
      if (!own && meets(b, p)) found.push(name + " over a marker");
      if (own && meets(b, p)) found.push(name + " under its own ring");
    }
  }
  return found;
}"""


def assert_laid_out(page, plots: int) -> None:  # type: ignore[no-untyped-def]
    """The page drew `plots` plots, each with a title, and nothing overlaps."""
    assert page.locator(".js-plotly-plot").count() == plots
    assert page.locator(".js-plotly-plot .gtitle").count() == plots
    assert page.evaluate(OVERLAPS) == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


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
        assert page.evaluate(OVERLAPS) == []
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
        assert_laid_out(page, 3)
        assert page.locator("#plot-timeline .legend").count() == 1
        assert "dotted line of the same colour the same run without them" in page.locator(
            "#timeline-note"
        ).inner_text()
        page.goto(server.url + "/")
        page.check("input.pick[value='1']")
        page.check("input.pick[value='3']")
        page.click("#compare-button")
        page.wait_for_selector("#plot-aggregate .main-svg")
        assert page.url.endswith("/compare?runs=3,1")
        assert page.locator("#compare-table tbody tr").count() == 5  # 3 + 2 strategies
        # the time to recover in one unit: the table's column and the plot's axis
        assert "recover ms" in page.locator("#compare-table thead").inner_text()
        page.wait_for_selector("#plot-recovery .main-svg")
        assert page.locator("#plot-recovery .ytitle").text_content() == "ms"
        assert_laid_out(page, 2)


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
        page.screenshot(path=str(tmp_path / "diagnosis.png"), full_page=True)
        assert_laid_out(page, 1)
        # every switch is named on the drawing, and every suspect is marked (and listed)
        labels = [t for t in page.locator("#plot-fabric .textpoint").all_text_contents() if t]
        assert {"spine0", "spine3", "leaf0", "leaf3", "host0nic0"} <= set(labels), labels
        assert len(labels) == 4 + 4 + 16  # switches, and the NICs (host over nic)
        assert page.evaluate(LABELS_APART) == []
        assert page.locator("#plot-fabric .legendtext", has_text="#2 leaf0-spine3").count() == 1
        page.goto(server.url + "/logs?text=down")
        page.wait_for_selector("#plot-logs .main-svg")
        assert_laid_out(page, 1)
        assert page.locator("#anomalies tbody tr").count() > 0
        assert page.locator("#lines tbody tr").count() > 0


def test_a_clouds_diagnosis_names_every_node_apart_and_each_run_is_picked(  # type: ignore[no-untyped-def]
    tmp_path: Path, browser_page
) -> None:
    """The one-cloud example diagnosed beside a single fabric in one store: the page ranks
    the latest run and links the other; the cloud is drawn site by site, each site named
    once, every node's name clear of the others and of the suspects' rings."""
    from tests.cli.cli_helpers import REPO

    from cloudtwin.diagnosis.usecase import diagnose, diagnose_cloud
    from cloudtwin.scenario.cloud import load_cloud
    from cloudtwin.scenario.loader import load_scenario
    from cloudtwin.store.database import Store

    single = REPO / "examples" / "diagnose.yaml"
    db = tmp_path / "ops.duckdb"
    with Store(db) as store:
        diagnose(store, load_scenario(single.read_text(), single.name))
        diagnose_cloud(store, load_cloud((REPO / "examples" / "one-cloud.yaml").read_text()))
    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/diagnosis")
        page.wait_for_selector("#plot-fabric .main-svg")
        assert page.locator("h2").inner_text() == "Likely root causes in run one-cloud"
        assert page.locator("tr.suspect td").nth(1).inner_text() == "west.host7/nic0"
        if SCREENSHOT is not None:
            page.screenshot(path=str(SCREENSHOT / "cloud-diagnosis.png"), full_page=True)
        page.screenshot(path=str(tmp_path / "cloud-diagnosis.png"), full_page=True)
        assert_laid_out(page, 1)
        labels = [t for t in page.locator("#plot-fabric .textpoint").all_text_contents() if t]
        assert {"gw0", "wan", "spine1", "leaf0", "host7nic0"} <= set(labels), labels
        assert len(labels) == 2 * (2 + 1 + 2 + 2 + 8)  # per site: gateways, WAN edge, spines, leaves, NICs
        sites = page.locator("#plot-fabric .annotation-text").all_text_contents()
        assert sorted(sites) == ["east", "west"]
        assert page.evaluate(LABELS_APART) == []
        page.locator("#runs a").click()  # the one other run: the single fabric
        page.wait_for_selector("#plot-fabric .main-svg")
        assert page.locator("h2").inner_text() == "Likely root causes in run diagnose"
        assert page.locator("tr.suspect td").nth(1).inner_text() == "leaf1-spine2"
        assert page.locator("#plot-fabric .annotation-text").count() == 0
        assert page.evaluate(LABELS_APART) == []
        answer = page.goto(server.url + "/diagnosis?run=bogus")
        assert answer is not None and answer.status == 404
        assert "--run bogus" in page.locator("p.error").inner_text()


def test_a_refused_start_says_why(db: Path, tmp_path: Path, browser_page) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/")
        header = page.locator("#job p").first
        page.click("#start-button")  # no token at all
        page.wait_for_selector("#job-error:not([hidden])")
        assert "token is required" in page.locator("#job-error").inner_text()
        assert header.inner_text().strip() == "compare leaf-spine-perftest: refused (no token)"
        page.fill("#token", "not-the-token")
        page.click("#start-button")
        page.wait_for_selector("#job-error:not([hidden]) >> text=not this service's")
        assert page.locator("#job-state").inner_text() == "refused"
        assert header.inner_text().strip() == "compare leaf-spine-perftest: refused"


def test_the_report_puts_its_timelines_on_one_scale_and_fits_the_window(  # type: ignore[no-untyped-def]
    db: Path, tmp_path: Path, browser_page
) -> None:
    from cloudtwin.evaluation.report import render_html
    from cloudtwin.evaluation.results import StoredEvaluation
    from cloudtwin.service.views import stored_run
    from cloudtwin.store.database import Store

    with Store(db) as store:  # run 3: ecmp, spray and pinning
        report = tmp_path / "report.html"
        run = stored_run(store, 3)
        assert isinstance(run, StoredEvaluation)
        report.write_text(render_html(run))
    page = browser_page
    page.goto(report.as_uri())
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    timelines = page.locator("svg.timeline")
    assert timelines.count() == 3
    scales = {(t.get_attribute("data-y-max"), t.get_attribute("data-x-max")) for t in timelines.all()}
    assert len(scales) == 1, scales  # one y range (and one time range) for all of them
    for timeline in timelines.all():
        ticks = timeline.locator("text.ytick").all_text_contents()
        assert len(ticks) >= 3 and all(t.endswith("Gbps") for t in ticks), ticks
        assert len(timeline.locator("text.xtick").all_text_contents()) >= 3
    assert len({tuple(t.locator("text.ytick").all_text_contents()) for t in timelines.all()}) == 1
    # wide tables scroll in their own box; the page itself is never wider than the window
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    complexity = page.locator("#complexity")
    assert complexity.evaluate("e => getComputedStyle(e.parentElement).overflowX") == "auto"
    # a snake_case header is one line: its height is one header row's, not three
    heights = complexity.locator("th").evaluate_all("ths => ths.map(th => th.getBoundingClientRect().height)")
    assert max(heights) == min(heights)
    assert complexity.locator("th").first.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"


def test_the_cloud_report_draws_its_migrations_sites_and_wan(  # type: ignore[no-untyped-def]
    tmp_path: Path, browser_page
) -> None:
    """report.html of the one-cloud example: each strategy's migrations (rounds, the stalls,
    the gateway failover band), each site's completion without and with faults, the WAN's
    throughput over time; the faults listed; no two columns of a table named alike."""
    from cloudtwin.evaluation.cloud import cloud_html, evaluate_cloud
    from cloudtwin.scenario.cloud import load_cloud

    root = Path(__file__).resolve().parents[2]
    cloud = load_cloud((root / "examples" / "one-cloud.yaml").read_text())
    report = tmp_path / "report.html"
    report.write_text(cloud_html(evaluate_cloud(cloud, ["ecmp", "pinning"])))
    page = browser_page
    page.goto(report.as_uri())
    if SCREENSHOT is not None:
        page.screenshot(path=str(SCREENSHOT / "cloud-report.png"), full_page=True)
    migrations = page.locator("svg.migration-timeline")
    assert migrations.count() == 2  # one per strategy
    for plot in migrations.all():
        assert plot.locator("text.lane").all_text_contents() == ["shop", "cache"]
        phases = {r.get_attribute("data-phase") for r in plot.locator("rect.round").all()}
        assert {"bulk", "stop-and-copy"} <= phases
        assert plot.locator("rect.stall").count() == 2  # both streams stalled at east's gateway
        band = plot.locator("rect.failover")
        assert band.count() == 1 and "4.05 s" in (band.locator("title").text_content() or "")
    sites = page.locator("svg.site-completion")
    assert sites.count() == 1
    for cls in ("clean", "faulted"):
        bars = sites.locator(f"rect.{cls}")
        assert bars.count() == 4  # two sites x two strategies
        assert all(float(b.get_attribute("data-seconds") or 0) > 0 for b in bars.all())
    wan = page.locator("svg.wan-timeline")
    assert wan.count() == 2
    for plot in wan.all():
        assert plot.locator("polyline.baseline").count() == 1
        assert plot.locator("polyline.faulted").count() == 1
        assert "dashed grey: without faults" in (plot.locator("text.legend").text_content() or "")
        assert len(plot.locator("text.ytick").all_text_contents()) >= 3
    assert len({p.get_attribute("data-y-max") for p in wan.all()}) == 1  # one scale for all
    assert page.locator("#faults tbody tr").count() == 2
    for table in page.locator("table").all():
        headers = table.locator("th").all_text_contents()
        assert len(headers) == len(set(headers)), headers
    assert "Recommendation:" in page.locator("p.recommendation").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_an_evaluated_cloud_appears_in_the_runs_table_and_its_page(  # type: ignore[no-untyped-def]
    db: Path, tmp_path: Path, browser_page
) -> None:
    """Start an evaluation of the shipped cloud from the form: when it is done the runs table
    shows the new run without a reload, and the run's page draws the cloud's plots in the
    colours the dashboard gives each strategy."""
    from cloudtwin.service.web.plots import colour

    page = browser_page
    with running_server(db, tmp_path) as server:
        page.goto(server.url + "/")
        assert page.locator("#runs-table tbody tr").count() == 3
        page.select_option("#example", "one-cloud")
        page.select_option("#kind", "evaluate")
        for name in ("ecmp-qp", "adaptive", "spray"):
            page.uncheck(f"input[value={name}]")
        page.fill("#token", server.token)
        page.click("#start-button")
        page.wait_for_function(
            "document.getElementById('job-state').textContent === 'done'", timeout=300_000
        )
        page.wait_for_function("document.querySelectorAll('#runs-table tbody tr').length === 4")
        first = page.locator("#runs-table tbody tr").first.locator("td").all_inner_texts()
        assert first[1:4] == ["4", first[2], "one-cloud"]
        assert first[2].count(":") == 2 and "." not in first[2]  # to the second, not the microsecond
        assert page.locator("#job-plot").evaluate("e => e.getBoundingClientRect().height") == 0  # no band
        page.click("#job-result a")
        page.wait_for_selector("svg.site-completion")
        for name in ("ecmp", "pinning"):
            line = page.locator(f"svg.wan-timeline[data-strategy={name}] polyline.faulted")
            assert line.get_attribute("stroke") == colour(name)
        if SCREENSHOT is not None:
            page.screenshot(path=str(SCREENSHOT / "cloud-run.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
