"""Scheduled changes: links failing and returning, flows moved to new paths, timelines."""

from __future__ import annotations

import numpy as np
import pytest

from cloudtwin.engine import Change, simulate
from cloudtwin.errors import EngineError
from cloudtwin.topology import Paths

ONE_FLOW_ON_LINK0 = Paths(np.array([0, 1]), np.array([0]))
TWO_LINKS = np.array([8.0, 8.0])


def run(changes: list[Change], timeline: bool = False):
    return simulate(
        ONE_FLOW_ON_LINK0,
        TWO_LINKS,
        np.array([16.0]),
        np.zeros(1),
        np.array([100.0]),
        changes=changes,
        timeline=timeline,
    )


def test_flow_stalls_on_a_dead_link_until_it_is_moved() -> None:
    # 128 bits at 8 bit/s: 32 sent by t=4, stalled 4..10, 96 more at 8 bit/s -> 22 s
    moved = Paths(np.array([0, 1]), np.array([1]))
    result = run(
        [Change(4.0, np.array([0]), np.array([0.0])), Change(10.0, flows=np.array([0]), paths=moved)], True
    )
    assert result.finish_s[0] == pytest.approx(22.0)
    np.testing.assert_allclose(result.timeline_s, [0.0, 4.0, 10.0, 22.0])
    np.testing.assert_allclose(result.timeline_bps, [8.0, 0.0, 8.0, 0.0])


def test_flow_resumes_when_its_link_returns() -> None:
    result = run([Change(4.0, np.array([0]), np.array([0.0])), Change(10.0, np.array([0]), np.array([8.0]))])
    assert result.finish_s[0] == pytest.approx(22.0)


def test_degraded_link_slows_the_flow() -> None:
    # 32 bits by t=4, then 96 bits at 4 bit/s -> 28 s
    result = run([Change(4.0, np.array([0]), np.array([4.0]))])
    assert result.finish_s[0] == pytest.approx(28.0)


def test_a_dead_link_never_repaired_is_an_error() -> None:
    with pytest.raises(EngineError, match="no progress"):
        run([Change(4.0, np.array([0]), np.array([0.0]))])


def test_moving_a_flow_before_it_starts_uses_the_new_path() -> None:
    paths = Paths(np.array([0, 1, 2]), np.array([0, 0]))
    moved = Paths(np.array([0, 1]), np.array([1]))
    # flow 1 starts at t=1 but was moved to link 1 at t=0.5: both run alone at 8 bit/s
    result = simulate(
        paths,
        TWO_LINKS,
        np.array([8.0, 8.0]),
        np.array([0.0, 1.0]),
        np.full(2, 100.0),
        changes=[Change(0.5, flows=np.array([1]), paths=moved)],
    )
    np.testing.assert_allclose(result.finish_s, [8.0, 9.0])


def test_paths_replace_keeps_other_flows() -> None:
    paths = Paths(np.array([0, 2, 3, 5]), np.array([0, 1, 2, 3, 4]))
    new = paths.replace(np.array([1]), Paths(np.array([0, 3]), np.array([7, 8, 9])))
    assert [new.path(i).tolist() for i in range(3)] == [[0, 1], [7, 8, 9], [3, 4]]
    assert new.weights is None


@pytest.mark.parametrize("seed", range(6))
def test_compiled_and_numpy_regional_solves_agree(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """The numba region kernel and the numpy region path give the same finish times,
    and both match solving every flow at every event."""
    from cloudtwin.engine import simulator

    rng = np.random.default_rng(seed)
    flows, links = 150, 25
    lengths = rng.integers(1, 5, flows)
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    link_ids = np.concatenate([rng.choice(links, size=n, replace=False) for n in lengths])
    paths = Paths(indptr, link_ids)
    args = (
        paths,
        rng.uniform(1, 10, links),
        rng.uniform(1, 20, flows),
        rng.uniform(0, 20, flows) * (rng.random(flows) < 0.7),
        rng.uniform(0.5, 8, flows),
    )
    results = {}
    for mode in ("compiled", "numpy", "full"):
        with monkeypatch.context() as patch:
            if mode == "numpy":
                patch.setattr(simulator, "COMPILED", False)
            if mode == "full":
                patch.setattr(simulator._Active, "settle", lambda self, touched: self.solve())
            results[mode] = simulate(*args)
    if simulator.COMPILED:
        assert results["compiled"].local_solves > 0  # the regional path was taken
    np.testing.assert_allclose(results["compiled"].finish_s, results["full"].finish_s, rtol=1e-9)
    np.testing.assert_allclose(results["numpy"].finish_s, results["full"].finish_s, rtol=1e-9)


def test_timeline_can_count_a_subset_of_flows() -> None:
    # two flows on separate 8 bit/s links; only flow 1 counted: 8 bit/s until 8 s, then 0
    paths = Paths(np.array([0, 1, 2]), np.array([0, 1]))
    result = simulate(
        paths,
        TWO_LINKS,
        np.array([16.0, 8.0]),
        np.zeros(2),
        np.full(2, 100.0),
        timeline=True,
        timeline_flows=np.array([False, True]),
    )
    np.testing.assert_allclose(result.timeline_s, [0.0, 8.0, 16.0])
    np.testing.assert_allclose(result.timeline_bps, [8.0, 0.0, 0.0])
    with pytest.raises(EngineError, match="timeline_flows"):
        simulate(
            paths,
            TWO_LINKS,
            np.array([16.0, 8.0]),
            np.zeros(2),
            np.full(2, 100.0),
            timeline=True,
            timeline_flows=np.array([True]),
        )
