"""Fitting a host datapath profile to measured points, and predicting points through it.

`cloudtwin calibrate datapath` measures cycles per delivered packet for configurations
of the kernel's datapath, each one function longer than the one before (`STAGES`), at two
frame sizes. Here those points become a profile (`fit_profile`: a function's cycles per
packet and per byte are the difference to the configuration before it) and held-out
points are predicted by the loaded profile through the NIC model every run uses
(`predict_points`: `capacity.tier_packets_per_s` on a host running the default chain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cloudtwin.errors import NicError
from cloudtwin.smartnic.capacity import tier_packets_per_s
from cloudtwin.smartnic.placement import HostNic, NicPlan
from cloudtwin.smartnic.profiles import DEFAULT_CHAIN, NicProfile

__all__ = ["FIT_SIZES", "STAGES", "fit_profile", "line", "predict_points"]

STAGES = ("veth", "bridge", "sg", "conntrack", "htb", "vxlan")
"""The configurations measured, each one function longer than the one before: the bare
veth path, a bridge, security groups (nftables through br_netfilter), conntrack, tc htb,
VXLAN (the whole chain)."""
FIT_SIZES = (64, 1400)
"""The two frame sizes a function's cycles per packet and per byte are fitted on."""

Cycles = Mapping[str, Mapping[str, float]]
"""Median cycles per delivered packet: configuration -> point label ("64 B", ...) -> cycles."""


def line(points: Mapping[str, float]) -> tuple[float, float]:
    """Cycles per packet and per byte through the two fitted frame sizes.

    >>> line({"64 B": 1064.0, "1400 B": 2400.0})
    (1000.0, 1.0)
    """
    (s1, c1), (s2, c2) = ((size, points[f"{size} B"]) for size in FIT_SIZES)
    per_byte = (c2 - c1) / (s2 - s1)
    return c1 - per_byte * s1, per_byte


def fit_profile(cycles: Cycles, rules: tuple[int, int]) -> dict[str, object]:
    """The `base` and `functions` of a profile from the measured points (`rules`: the two
    security-group rule counts measured; the chain's other stages use the first).

    overlay = (bridge - veth) + (vxlan - htb); security groups = (sg LOW - bridge), less
    LOW rules at the per-rule cost (sg HIGH - sg LOW) / (HIGH - LOW); conntrack = conntrack -
    sg LOW, and its new-connection cost the difference with a new connection per packet;
    rate limiter = htb - conntrack; base = veth.
    """
    low, high = rules
    fitted = {name: line(points) for name, points in cycles.items()}

    def diff(a: str, b: str) -> tuple[float, float]:
        return fitted[a][0] - fitted[b][0], fitted[a][1] - fitted[b][1]

    per_rule = (fitted[f"sg {high}"][0] - fitted[f"sg {low}"][0]) / (high - low)
    sg_packet, sg_byte = diff(f"sg {low}", "bridge")
    overlay = tuple(a + b for a, b in zip(diff("bridge", "veth"), diff("vxlan", "htb"), strict=True))
    conntrack = diff("conntrack", f"sg {low}")
    limiter = diff("htb", "conntrack")
    new_connection = cycles["conntrack"]["new conns 64 B"] - cycles["conntrack"]["64 B"]
    return {
        "base": {"cycles_per_packet": fitted["veth"][0], "cycles_per_byte": fitted["veth"][1]},
        "functions": {
            "overlay": {"cycles_per_packet": overlay[0], "cycles_per_byte": overlay[1]},
            "security-groups": {"cycles_per_packet": sg_packet - per_rule * low, "cycles_per_byte": sg_byte,
                                "cycles_per_rule": per_rule},
            "conntrack": {"cycles_per_packet": conntrack[0], "cycles_per_byte": conntrack[1],
                          "cycles_per_new_connection": new_connection},
            "rate-limiter": {"cycles_per_packet": limiter[0], "cycles_per_byte": limiter[1]},
        },
    }


def _frames(point: Mapping[str, object], where: str) -> tuple[np.ndarray, np.ndarray]:
    frames = point.get("frames")
    if not isinstance(frames, Sequence) or not frames:
        raise NicError(f"{where}.frames: give [[size, count], ...]")
    try:
        sizes = np.array([float(size) for size, _ in frames])
        counts = np.array([float(count) for _, count in frames])
    except (TypeError, ValueError):
        raise NicError(f"{where}.frames: give [[size, count], ...]") from None
    if not (np.isfinite(sizes).all() and (sizes > 0).all() and (counts > 0).all()):
        raise NicError(f"{where}.frames: sizes and counts must be positive")
    return sizes, counts / counts.sum()


def predict_points(profile: NicProfile, points: Sequence[Mapping[str, object]], where: str = "points"
                   ) -> list[dict[str, object]]:
    """Each measured whole-chain point with the packets per second of one core the profile
    predicts for it: a host running the default chain on its own cores, through
    `tier_packets_per_s` (the model every run uses), divided by the host's cores.

    A point is `{"configuration", "frames": [[size, count], ...], "packets_per_s_per_core"}`
    (the measured rate of one core: clock / measured cycles per packet)."""
    nic = HostNic(profile, {function: "host" for function in DEFAULT_CHAIN})
    rows = []
    for i, point in enumerate(points):
        sizes, share = _frames(point, f"{where}.{i}")
        plan = NicPlan((nic,), np.zeros(1, dtype=np.int64), sizes, share, 0.0)
        predicted = tier_packets_per_s(nic, "host", plan) / profile.host.cores
        measured = point.get("packets_per_s_per_core")
        if isinstance(measured, bool) or not isinstance(measured, int | float) or not measured > 0:
            raise NicError(f"{where}.{i}.packets_per_s_per_core: must be a positive number, got {measured!r}")
        rows.append({
            "configuration": point.get("configuration", f"point {i}"),
            "measured_pps_per_core": float(measured),
            "predicted_pps_per_core": predicted,
            "error": predicted / float(measured) - 1,
        })
    return rows
