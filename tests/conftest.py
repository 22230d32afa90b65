"""Shared fixtures: scenarios from overrides, a checker for paths through a topology, and the
Loghub-2k sample logs kept beside the repository."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from cloudtwin.scenario import Scenario, load_scenario
from cloudtwin.topology import Paths, Topology

#: The Loghub-2k sample logs, kept outside the repository (never copied into it).
LOGHUB = (Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "loghub-2k").resolve()


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
    if not LOGHUB.is_dir():
        pytest.skip(f"{LOGHUB} is missing (the Loghub-2k sample is kept beside the repository "
                    "as ../shared/datasets/loghub-2k)")
    return LOGHUB


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
