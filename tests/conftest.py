"""Shared fixtures: scenarios from overrides, a checker for paths through a topology, and the
Loghub-2k sample logs kept beside the repository; and the order in which files run."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from cloudtwin.scenario import Scenario, load_scenario
from cloudtwin.topology import Paths, Topology

#: The shared datasets, kept beside the repository (never copied into it); a test run may
#: point elsewhere with CLOUDTWIN_TEST_DATASETS.
DATASETS = Path(
    os.environ.get("CLOUDTWIN_TEST_DATASETS") or Path(__file__).resolve().parents[2] / "shared" / "datasets"
)
#: The Loghub-2k sample logs.
LOGHUB = DATASETS / "loghub-2k"
#: Set to 1 (CI does, in .ci/run), a test skipped for a missing dataset fails instead.
REQUIRE_DATASETS = "CLOUDTWIN_REQUIRE_DATASETS"


def dataset(name: str) -> Path:
    """The shared dataset `name`; a test without it skips naming it (fails where CI requires it)."""
    path = DATASETS / name
    if not path.is_dir():
        pytest.skip(f"{path} is missing (kept beside the repository as ../shared/datasets/{name})")
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With CLOUDTWIN_REQUIRE_DATASETS=1, a skip for a missing shared dataset is a failure: a
    CI machine without `../shared/datasets` would otherwise pass by testing nothing."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or os.environ.get(REQUIRE_DATASETS) != "1":
        return
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    if "shared/datasets" in reason:
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_DATASETS}=1 and a dataset is missing: {reason}"


def pytest_configure(config: pytest.Config) -> None:
    """Under `-n 2 --dist loadfile` (make test), workers take files in the order that
    `pytest_collection_modifyitems` gives, not in xdist's own order by test count: that put
    the long files of one to three tests (engine_vs, sweeps doc, ray, QEMU) last, where one
    worker ran them while the other had nothing left to do."""
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False
    _private_cache()


def _private_cache() -> None:
    """The commands that tests run (in this process or as children) keep what they cache
    (the P4 parser's tables, checked programs) in a folder of this test process, removed at
    its end, not in the user's own cache: a run starts as a first run would."""
    folder = tempfile.mkdtemp(prefix="cloudtwin-test-cache-")
    os.environ["XDG_CACHE_HOME"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a test marked slow first, then the others by their number of tests, most
    first (a stable sort: a file's tests stay together and in their order)."""
    count = Counter(item.path for item in items)
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: (item.path not in slow, -count[item.path]))


def scenario_from(
    *overrides: str, text: str = "name: test\nfabric: {kind: leaf-spine}\n"
) -> Scenario:
    """A scenario from YAML defaults plus `--set` style overrides."""
    return load_scenario(text, "<test>", list(overrides))


def check_paths(topology: Topology, paths: Paths, src: np.ndarray, dst: np.ndarray) -> None:
    """Every path leaves its source NIC, is contiguous, and arrives at its destination NIC."""
    assert paths.flow_count == src.size
    for flow in range(paths.flow_count):
        path = paths.path(flow)
        assert path.size >= 2, f"flow {flow} has a path of {path.size} links"
        assert topology.link_src[path[0]] == src[flow]
        assert topology.link_dst[path[-1]] == dst[flow]
        np.testing.assert_array_equal(topology.link_dst[path[:-1]], topology.link_src[path[1:]])


@pytest.fixture
def make_scenario() -> Callable[..., Scenario]:
    return scenario_from


@pytest.fixture
def assert_valid_paths() -> Callable[[Topology, Paths, np.ndarray, np.ndarray], None]:
    return check_paths


@pytest.fixture(scope="session")
def loghub() -> Path:
    """The Loghub-2k directory (one folder per system, e.g. `HDFS/HDFS_2k.log`).

    A clone without `../shared/datasets/loghub-2k` beside it skips the tests that read the
    sample, naming the missing path, instead of failing them.
    """
    return dataset("loghub-2k")


@pytest.fixture
def hdfs_2k(loghub: Path) -> Path:
    """Loghub's HDFS sample: 2,000 lines of 16 templates."""
    return loghub / "HDFS" / "HDFS_2k.log"


@pytest.fixture(scope="module")
def sigterm_cleans_up() -> Iterator[None]:
    """SIGTERM (what `timeout` and CI runners send) raises KeyboardInterrupt in the test process,
    so the `finally` blocks and fixture teardowns that remove namespaces and stop processes run;
    a second SIGTERM during that clean-up is ignored. Python's default would exit at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM: cleaning up")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
