"""The stepping engine: flows added and changes applied between events, a finish callback."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from tests.engine.test_simulator import paths_of, sim_instances

from cloudtwin.engine import Change, Dependencies, Simulation, simulate
from cloudtwin.errors import EngineError

BIG = 1e6


class PreCopyMigration:
    """A migration-like job: each round sends what was dirtied while the last one ran.

    Round 0 sends the whole memory; round n+1 sends `dirty_rate x duration(round n)`
    bytes; once that is below `stop_below` bytes, one last (stop-and-copy) round sends it
    and the job is done.
    """

    def __init__(self, sim: Simulation, link: int, memory: float, dirty: float, stop: float):
        self.sim, self.link, self.dirty, self.stop = sim, link, dirty, stop
        self.rounds: list[tuple[float, float, float]] = []  # (bytes, start, finish)
        self.final = False
        self._send(memory, 0.0)

    def _send(self, size: float, start: float) -> None:
        (self.current,) = self.sim.add_flows(
            paths_of([[self.link]]), np.array([size]), np.array([start]), np.array([BIG])
        )
        self.size = size

    def on_finish(self, sim: Simulation, done: np.ndarray) -> None:
        if self.current not in done:
            return
        start, finish = sim.start_s[self.current], sim.finish_s[self.current]
        self.rounds.append((self.size, float(start), float(finish)))
        if self.final:
            return
        dirtied = self.dirty * (finish - start)
        self.final = dirtied < self.stop
        self._send(dirtied, sim.now)


def migrate(competitors: list[tuple[float, float]]) -> tuple[PreCopyMigration, Simulation]:
    # one link of 80 bit/s = 10 B/s; competitors (bytes, start) share it
    job: PreCopyMigration | None = None

    def relay(sim: Simulation, done: np.ndarray) -> None:
        assert job is not None
        job.on_finish(sim, done)

    sim = Simulation(np.array([80.0]), on_finish=relay)
    job = PreCopyMigration(sim, 0, memory=100.0, dirty=2.0, stop=10.0)
    if competitors:
        sizes, starts = zip(*competitors, strict=True)
        sim.add_flows(
            paths_of([[0]] * len(sizes)), np.array(sizes), np.array(starts), np.full(len(sizes), BIG)
        )
    sim.run()
    return job, sim


def test_migration_rounds_stretch_under_contention() -> None:
    # A 50 B competitor from t=0 halves round 0's rate: both at 5 B/s until it is done at
    # 10 s (round 0 has 50 B left), then 10 B/s alone: round 0 = [0, 15] s.
    # Round 1 = 2 B/s x 15 s = 30 B from 15 s. A 20 B competitor arrives at 16 s: round 1
    # has sent 10 B, 20 B left each at 5 B/s -> both done at 20 s; round 1 = [15, 20].
    # Round 2 = 2 x 5 = 10 B (not below 10: another round) alone -> [20, 21];
    # round 3 = 2 x 1 = 2 B < 10: stop-and-copy, 0.2 s -> [21, 21.2].
    job, sim = migrate([(50.0, 0.0), (20.0, 16.0)])
    want = [(100.0, 0.0, 15.0), (30.0, 15.0, 20.0), (10.0, 20.0, 21.0), (2.0, 21.0, 21.2)]
    np.testing.assert_allclose(np.array(job.rounds), np.array(want), rtol=1e-12)
    np.testing.assert_allclose(sim.finish_s[[1, 2]], [10.0, 20.0], rtol=1e-12)  # the competitors
    assert sim.flow_count == 6


def test_migration_alone_takes_fewer_rounds() -> None:
    # Alone at 10 B/s: round 0 = 10 s, round 1 = 20 B in 2 s, then 4 B < 10: stop-and-copy
    # 0.4 s. Contention above cost a whole extra round.
    job, _ = migrate([])
    want = [(100.0, 0.0, 10.0), (20.0, 10.0, 12.0), (4.0, 12.0, 12.4)]
    np.testing.assert_allclose(np.array(job.rounds), np.array(want), rtol=1e-12)


def test_step_by_step_and_run_until() -> None:
    # two flows share 80 bit/s: f0 (800 bits) done at 20 s, f1 (1600 bits) at 30 s
    sim = Simulation(np.array([80.0]))
    sim.add_flows(paths_of([[0], [0]]), np.array([100.0, 200.0]), np.zeros(2), np.full(2, BIG))
    partial = sim.run(until=25.0)
    assert sim.now == pytest.approx(20.0)
    assert np.isnan(partial.finish_s[1]) and partial.finish_s[0] == pytest.approx(20.0)
    np.testing.assert_allclose(sim.rate_bps, [0.0, 80.0])
    np.testing.assert_allclose(sim.remaining_bytes, [0.0, 100.0])
    assert sim.step() and sim.now == pytest.approx(30.0)
    assert not sim.step()
    np.testing.assert_allclose(sim.run().finish_s, [20.0, 30.0], rtol=1e-12)


def test_a_flow_keeps_the_rate_it_had_when_its_last_bit_went() -> None:
    # two flows share 80 bit/s: f0 ends at 20 s at 40 bit/s; f1 then runs alone at 80 bit/s
    sim = Simulation(np.array([80.0]))
    sim.add_flows(paths_of([[0], [0]]), np.array([100.0, 200.0]), np.zeros(2), np.full(2, BIG))
    sim.run(until=25.0)
    np.testing.assert_allclose(sim.final_rate_bps(np.array([0, 1])), [40.0, 0.0])
    sim.run()
    np.testing.assert_allclose(sim.final_rate_bps(np.array([0, 1])), [40.0, 80.0])


def test_flows_added_later_start_no_earlier_than_now() -> None:
    # f0 800 bits alone until 10 s; at 5 s (a step) a flow "starting at 0" is added: it
    # starts at 5 s. From 5 s both at 40: f0 has 400 left -> 15 s; f1 (400 bits) -> 15 s.
    sim = Simulation(np.array([80.0]))
    sim.add_flows(paths_of([[0]]), np.array([100.0]), np.zeros(1), np.full(1, BIG))
    sim.add_flows(paths_of([[0]]), np.array([1.0]), np.array([5.0]), np.full(1, BIG))
    sim.run(until=5.0)
    assert sim.now == 5.0
    (late,) = sim.add_flows(paths_of([[0]]), np.array([50.0]), np.zeros(1), np.full(1, BIG))
    result = sim.run()
    assert result.start_s[late] == 5.0
    assert result.finish_s[0] == pytest.approx(15.1, rel=1e-12)


def test_apply_a_change_mid_run_as_scheduled() -> None:
    # 128 bits at 8 bit/s; the link drops to 4 bit/s at 4 s: 32 sent, 96 at 4 -> 28 s
    sim = Simulation(np.array([8.0]))
    sim.add_flows(paths_of([[0]]), np.array([16.0]), np.zeros(1), np.full(1, BIG))
    sim.run(until=3.0)
    sim.apply(Change(4.0, np.array([0]), np.array([4.0])))
    assert sim.run().finish_s[0] == pytest.approx(28.0)


def test_a_change_in_the_past_applies_at_the_next_event() -> None:
    sim = Simulation(np.array([8.0]))
    sim.add_flows(paths_of([[0], [0]]), np.array([1.0, 16.0]), np.zeros(2), np.full(2, BIG))
    sim.step()  # start
    sim.step()  # f0 done at 2 s (8 bits at 4 bit/s)
    sim.apply(Change(1.0, np.array([0]), np.array([4.0])))
    # f1 sent 8 bits by 2 s, 120 left at 4 bit/s from 2 s -> 32 s
    assert sim.run().finish_s[1] == pytest.approx(32.0)


def test_dependencies_index_their_own_batch() -> None:
    sim = Simulation(np.array([80.0, 80.0]))
    sim.add_flows(paths_of([[0]]), np.array([100.0]), np.zeros(1), np.full(1, BIG))
    deps = Dependencies(np.array([0, 0, 1]), np.array([0]), np.array([0.0, 1.0]))
    ids = sim.add_flows(
        paths_of([[1], [1]]), np.array([100.0, 100.0]), np.zeros(2), np.full(2, BIG), None, deps
    )
    result = sim.run()
    # batch flow 0 (id 1) runs 0..10 s on link 1; batch flow 1 (id 2) waits for it + 1 s
    np.testing.assert_array_equal(ids, [1, 2])
    np.testing.assert_allclose(result.start_s, [0.0, 0.0, 11.0])
    np.testing.assert_allclose(result.finish_s, [10.0, 10.0, 21.0], rtol=1e-12)


def test_bad_batch_is_refused_and_a_stalled_run_is_an_error() -> None:
    sim = Simulation(np.array([0.0]))
    with pytest.raises(EngineError, match="size_bytes must be positive"):
        sim.add_flows(paths_of([[0]]), np.array([-1.0]), np.zeros(1), np.ones(1))
    assert sim.flow_count == 0
    sim.add_flows(paths_of([[0]]), np.array([1.0]), np.zeros(1), np.ones(1))
    with pytest.raises(EngineError, match="can make no progress"):
        sim.run()


@settings(max_examples=80, deadline=None)
@given(sim_instances())
def test_one_call_equals_flows_fed_at_their_start(instance) -> None:
    rows, capacity, size, start, caps, _ = instance  # latency: not given to either
    want = simulate(
        paths_of(rows), np.array(capacity), np.array(size, dtype=float), np.array(start), np.array(caps)
    )
    # the same flows given to a Simulation one start time at a time, between runs
    sim = Simulation(np.array(capacity))
    order: list[int] = []
    for t in sorted(set(start)):
        if order:
            sim.run(until=t)
        batch = [f for f in range(len(rows)) if start[f] == t]
        order += batch
        sim.add_flows(
            paths_of([rows[f] for f in batch]),
            np.array(size, dtype=float)[batch],
            np.full(len(batch), t),
            np.array(caps)[batch],
        )
    got = sim.run()
    np.testing.assert_allclose(got.finish_s, want.finish_s[order], rtol=1e-9)


def test_simulate_is_one_simulation_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    rows = [list(rng.choice(6, size=rng.integers(1, 4), replace=False)) for _ in range(60)]
    args = (
        paths_of(rows),
        rng.uniform(1, 10, 6),
        rng.integers(1, 100, 60).astype(float),
        rng.uniform(0, 5, 60),
        rng.uniform(1, 20, 60),
    )
    changes = [Change(2.0, np.array([1]), np.array([0.5])), Change(1.0, np.array([2]), np.array([3.0]))]
    a = simulate(*args, changes=changes, timeline=True)
    sim = Simulation(args[1], timeline=True)
    sim.add_flows(*args[:1], *args[2:])
    for change in changes:
        sim.apply(change)
    b = sim.run()
    for x, y in ((a.finish_s, b.finish_s), (a.start_s, b.start_s), (a.timeline_bps, b.timeline_bps)):
        assert x.tobytes() == y.tobytes()
    assert (a.events, a.solves, a.local_solves) == (b.events, b.solves, b.local_solves)


# -- timers: Simulation.schedule ----------------------------------------------------------


def test_a_timer_fires_at_its_time_and_is_an_event_of_its_own() -> None:
    # 8 bits at 8 bit/s: the flow ends at 1 s; the timer at 0.25 s sees it a quarter done
    sim = Simulation(np.array([8.0]))
    sim.add_flows(paths_of([[0]]), np.array([1.0]), np.zeros(1), np.full(1, BIG))
    seen: list[tuple[float, float]] = []
    sim.schedule(0.25, lambda s: seen.append((s.now, float(s.remaining_bytes[0]))))
    result = sim.run()
    assert seen == [(0.25, 0.75)]
    assert result.finish_s[0] == 1.0
    assert result.events == 3  # the start, the timer, the finish


def test_a_timer_moves_flows_that_nothing_else_could() -> None:
    # link 0 is down; at 2 s a timer moves the flow to link 1 (8 bit/s): 16 bits -> 4 s
    sim = Simulation(np.array([0.0, 8.0]))
    sim.add_flows(paths_of([[0]]), np.array([2.0]), np.zeros(1), np.full(1, BIG))
    sim.schedule(2.0, lambda s: s.apply(Change(s.now, flows=np.array([0]), paths=paths_of([[1]]))))
    assert sim.run().finish_s[0] == 4.0


def test_timers_fire_in_time_then_scheduling_order_and_may_schedule_more() -> None:
    sim = Simulation(np.array([8.0]))
    order: list[tuple[str, float]] = []

    def later(s: Simulation) -> None:
        order.append(("later", s.now))

    def first(s: Simulation) -> None:
        order.append(("first", s.now))
        s.schedule(s.now + 0.5, later)

    sim.schedule(1.0, lambda s: order.append(("second", s.now)))
    sim.schedule(1.0, lambda s: order.append(("third", s.now)))
    sim.schedule(0.5, first)
    sim.run()
    # "later" is due at 1.0 too, but was scheduled after the other two
    assert order == [("first", 0.5), ("second", 1.0), ("third", 1.0), ("later", 1.0)]


def test_a_timer_adds_a_flow_that_starts_at_its_time() -> None:
    # no flow before 3 s; the timer adds 16 bits on an 8 bit/s link: 3 s -> 5 s
    sim = Simulation(np.array([8.0]))
    sim.schedule(
        3.0, lambda s: s.add_flows(paths_of([[0]]), np.array([2.0]), np.array([s.now]), np.full(1, BIG))
    )
    result = sim.run()
    assert (result.start_s[0], result.finish_s[0]) == (3.0, 5.0)


def test_a_timer_in_the_past_fires_at_the_next_step_and_infinite_time_is_refused() -> None:
    sim = Simulation(np.array([8.0]))
    sim.add_flows(paths_of([[0]]), np.array([2.0]), np.zeros(1), np.full(1, BIG))
    sim.schedule(1.0, lambda s: None)
    sim.run(until=1.0)
    assert sim.now == 1.0
    fired: list[float] = []
    sim.schedule(0.5, lambda s: fired.append(s.now))
    sim.step()
    assert fired == [1.0]
    with pytest.raises(EngineError, match="never fires"):
        sim.schedule(float("inf"), lambda s: None)


def test_timers_do_not_change_the_flows_they_do_not_touch() -> None:
    # the same flows with and without idle timers: bit-identical finish times
    def run(timers: bool) -> np.ndarray:
        sim = Simulation(np.array([10.0, 7.0]))
        sim.add_flows(
            paths_of([[0], [0, 1], [1]]), np.array([3.0, 5.0, 2.0]), np.array([0.0, 0.3, 0.9]),
            np.full(3, BIG),
        )
        if timers:
            for at in (0.1, 0.77, 2.5, 3.3):
                sim.schedule(at, lambda s: None)
        return sim.run().finish_s

    np.testing.assert_array_equal(run(True), run(False))
