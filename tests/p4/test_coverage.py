"""Generated tests: random packets built from the values in a program's own entries exercise
every parser state, table entry and action of the shipped P4 programs; the coverage is printed."""

from __future__ import annotations

import numpy as np
import pytest
from scapy.all import IP, TCP, UDP, VXLAN, Dot1Q, Ether, IPv6, Raw
from scapy.contrib.roce import BTH
from tests.p4.helpers import PROGRAMS, shipped

from cloudtwin.p4 import Datapath, PacketBatch
from cloudtwin.p4.program import MatchKind

PACKETS = 1500


def value_pools(datapath: Datapath) -> dict[int, list[int]]:
    """Values by bit width, taken from every installed entry's matches and parameters."""
    pools: dict[int, set[int]] = {}
    for state in datapath.tables.values():
        for entry in state.entries:
            for key, width, match in zip(state.table.keys, state.widths, entry.match, strict=True):
                value = match if key.kind == MatchKind.EXACT else match[0]  # type: ignore[index]
                pools.setdefault(width, set()).add(int(value) + (1 if key.kind == MatchKind.LPM else 0))
            for (_, width), value in zip(datapath.action_params(entry.action), entry.params, strict=True):
                pools.setdefault(width, set()).add(value)
    return {w: sorted(v) for w, v in pools.items()}


class Generator:
    """Draws field values from the pools (or at random) and builds frames of many header stacks."""

    def __init__(self, pools: dict[int, list[int]], seed: int) -> None:
        self.pools = pools
        self.rng = np.random.default_rng(seed)

    def value(self, width: int) -> int:
        pool = self.pools.get(width)
        if pool and self.rng.random() < 0.85:
            return int(pool[self.rng.integers(len(pool))])
        return int(self.rng.integers(0, 1 << min(width, 63)))

    def mac(self) -> str:
        v = self.value(48)
        return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))

    def ip(self) -> str:
        v = self.value(32)
        return ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))

    def l4(self) -> object:
        kind = self.rng.integers(4)
        if kind == 0:
            return TCP(sport=self.value(16), dport=self.value(16))
        if kind == 1:
            return UDP(sport=self.value(16), dport=self.value(16) if self.rng.random() < 0.5 else 53)
        if kind == 2:
            return UDP(dport=4791) / BTH(dqpn=self.value(24))
        inner = Ether(src=self.mac(), dst=self.mac()) / IP(src=self.ip(), dst=self.ip()) / self.l4_simple()
        return UDP(sport=self.value(16), dport=4789) / VXLAN(vni=self.value(24)) / inner

    def l4_simple(self) -> object:
        return TCP(dport=self.value(16)) if self.rng.random() < 0.5 else UDP(dport=self.value(16))

    def frame(self) -> bytes:
        frame = Ether(src=self.mac(), dst=self.mac())
        if self.rng.random() < 0.2:
            frame = frame / Dot1Q(vlan=int(self.rng.integers(4096)))
        if self.rng.random() < 0.85:
            frame = frame / IP(src=self.ip(), dst=self.ip()) / self.l4()
        else:
            frame = frame / IPv6() / self.l4_simple()
        return bytes(frame / Raw(bytes(int(self.rng.integers(0, 200)))))


def coverage(datapath: Datapath) -> dict[str, tuple[int, int]]:
    """(covered, total) for parser states, table entries and actions."""
    program = datapath.program
    states = set(program.parser.states)
    actions = {a for s in datapath.tables.values() for a in (*s.table.actions, s.default[0])} - {"NoAction"}
    entries = [(name, i) for name, s in datapath.tables.items() for i in range(len(s.entries))]
    hit = [(name, i) for name, s in datapath.tables.items() for i, h in enumerate(s.hits) if h]
    return {
        "parser states": (len(states & {s for s, n in datapath.state_visits.items() if n}), len(states)),
        "table entries": (len(hit), len(entries)),
        "actions": (len(actions & {a for a, n in datapath.action_runs.items() if n}), len(actions)),
    }


@pytest.mark.parametrize("name", PROGRAMS)
def test_generated_packets_cover_every_state_entry_and_action(name: str) -> None:
    datapath = shipped(name)
    generator = Generator(value_pools(datapath), seed=sum(map(ord, name)))
    frames = [generator.frame() for _ in range(PACKETS)]
    ports = np.array(
        [generator.value(32) % 8 if generator.rng.random() < 0.5 else generator.value(32) for _ in frames]
    )
    for direction in (0, 1):
        times = np.cumsum(generator.rng.integers(1, 200_000, size=len(frames))).astype(np.uint64)
        datapath.process(PacketBatch.from_packets(frames, direction, ports % (1 << 32), times))
    report = coverage(datapath)
    print(f"\n{name}: " + ", ".join(f"{k} {c}/{t}" for k, (c, t) in report.items()))
    for kind, (covered, total) in report.items():
        assert covered == total, f"{name}: {kind} {covered}/{total}"
