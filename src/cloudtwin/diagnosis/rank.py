"""Ranking likely root causes from the store alone: log anomalies plus network tomography.

Components are cables between switches (`leaf1-spine2`, kind `link`), NICs (their cable
to the edge switch, kind `nic`) and switches. Two kinds of evidence, each scaled so that
the strongest component has 1:

- **logs**: the change detector of `find_anomalies` on counts per window and per
  (template, device) over the run's time span, with half the quiet time before the
  first flow as the history it needs; every line of a flagged (new or bursting) key in
  its window shares the anomaly's score, and gives it to the cables it names (a port
  `Ethernet1/5` of the device that logged it, a link description `(leaf1->spine2)`, a
  BGP/BFD neighbour address, a NIC of the host that logged it); a line that names none
  counts for its device; lines below warning severity count a tenth;
- **tomography** (`link_scores`) on the flow telemetry, summed over a cable's two links.

A cable or NIC scores the sum of both. A switch scores the sum of its cables' scores
times the share of its cables that have log evidence and score at least half of its
best one (a switch that failed implicates all its cables; one bad cable implicates one;
a leaf whose hosts' flows all suffer without any log about its ports implicates none),
plus its own log lines (scaled by the strongest cable's, at most 1).
Only the store is read: telemetry, logs and the inventory tables, never the scenario.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from cloudtwin.diagnosis.tomography import TomographyConfig, link_scores
from cloudtwin.errors import LimitError, StoreError
from cloudtwin.ops.anomaly import Anomaly, DetectorConfig, detect_changes
from cloudtwin.store.database import Store
from cloudtwin.store.ops_query import DEFAULT_MAX_CELLS
from cloudtwin.store.twin_tables import TwinMeta, read_meta

__all__ = ["DEFAULT_WINDOW_SAMPLES", "Suspect", "diagnose"]

#: The log anomaly window, in telemetry intervals.
DEFAULT_WINDOW_SAMPLES = 5
_LINK_NAME = re.compile(r"\(([\w/]+->[\w/]+)\)")
_PORT = re.compile(r"\b(Ethernet\d+/\d+)\b")
_ADDRESS = re.compile(r"\bneighbor (\d+\.\d+\.\d+\.\d+)")
_NIC = re.compile(r"\b(host\d+/nic\d+)\b")
_REPORTED_PORT = re.compile(r"\bfrom (\w+): (Ethernet\d+/\d+)")
_KIND_ORDER = {"leaf": 0, "spine": 1, "agg": 2, "core": 3}
#: Anomalous lines below warning severity (info, notice, debug) count this much.
MILD_WEIGHT = 0.1
_ERRORS = {"emerg", "alert", "crit", "critical", "err", "error"}
_SEVERE = _ERRORS | {"warning", "warn"}
_MNEMONIC = re.compile(r"%([A-Z_]+-\d-[A-Z_]+)")


@dataclass
class Suspect:
    """One ranked component: its score and the evidence behind it."""

    component: str
    kind: str
    score: float = 0.0
    tomography: float = 0.0
    logs: float = 0.0
    degraded_samples: int = 0
    healthy_samples: int = 0
    messages: dict[str, int] = field(default_factory=dict)
    rank: int = 0

    @property
    def evidence(self) -> str:
        """One line: tomography, logs, and the messages that named it."""
        parts = []
        if self.degraded_samples:
            parts.append(
                f"{self.degraded_samples} degraded / {self.healthy_samples} healthy flow samples"
            )
        if self.messages:
            top = sorted(self.messages.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
            parts.append("logs: " + ", ".join(f"{m} x{n}" for m, n in top))
        return "; ".join(parts) or "-"

    def to_json(self) -> dict[str, object]:
        """JSON form."""
        return {
            "rank": self.rank, "component": self.component, "kind": self.kind,
            "score": round(self.score, 4), "tomography": round(self.tomography, 4),
            "logs": round(self.logs, 4), "degraded_samples": self.degraded_samples,
            "healthy_samples": self.healthy_samples, "messages": self.messages,
            "evidence": self.evidence,
        }


def _sort_key(name: str) -> tuple[int, int]:
    match = re.match(r"([a-z]+)(\d+)", name)
    return (_KIND_ORDER.get(match.group(1), 9), int(match.group(2))) if match else (9, 0)


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class _Inventory:
    """Links and nodes as the store knows them, and the component each link belongs to."""

    def __init__(self, store: Store, run: str) -> None:
        nodes = store.query("SELECT name, kind, address FROM twin_nodes WHERE run = ?", [run])[1]
        links = store.query(
            "SELECT link_id, name, src, dst, device, interface FROM twin_links WHERE run = ? "
            "ORDER BY link_id", [run]
        )[1]
        if not links:
            raise StoreError("the twin run has no inventory (twin_links is empty)")
        self.kind = {n: k for n, k, _ in nodes}
        self.by_address = {a: n for n, _, a in nodes}
        self.link_count = max(r[0] for r in links) + 1
        self.component: dict[int, tuple[str, str]] = {}
        self.by_name: dict[str, int] = {}
        self.by_port: dict[tuple[str, str], int] = {}
        self.cables: dict[tuple[str, str], list[int]] = defaultdict(list)
        for link_id, name, src, dst, device, interface in links:
            self.component[link_id] = self._component(src, dst)
            self.by_name[name] = link_id
            self.by_port[(device, interface)] = link_id
            self.cables[_pair(src, dst)].append(link_id)
        ends: dict[str, set[str]] = defaultdict(set)
        for link_id, _, src, dst, _, _ in links:
            ends[self.component[link_id][0]].update(n for n in (src, dst) if self.kind.get(n) != "nic")
        self.ends = {c: sorted(e) for c, e in ends.items()}

    def _component(self, src: str, dst: str) -> tuple[str, str]:
        if self.kind.get(src) == "nic":
            return src, "nic"
        if self.kind.get(dst) == "nic":
            return dst, "nic"
        a, b = sorted((src, dst), key=lambda n: (_sort_key(n), n))
        return f"{a}-{b}", "link"

    def switches_of(self, component: str) -> list[str]:
        """The switches at the ends of a cable component (one for a NIC)."""
        return self.ends.get(component, [])

    def references(self, device: str, content: str) -> set[int]:
        """Links a log line names: a port of its device (or of the switch a controller
        quotes), a link name, a neighbour's address, a NIC of its own host (a job naming
        the hosts it ran on names victims, not causes)."""
        found = {self.by_name[m] for m in _LINK_NAME.findall(content) if m in self.by_name}
        found |= {self.by_port[(device, p)] for p in _PORT.findall(content) if (device, p) in self.by_port}
        reported = _REPORTED_PORT.findall(content)  # a controller relaying a switch's port event
        found |= {self.by_port[key] for key in reported if key in self.by_port}
        for address in _ADDRESS.findall(content):
            peer = self.by_address.get(address)
            found.update(self.cables.get(_pair(device, peer or ""), []))
        for nic in (n for n in _NIC.findall(content) if n.split("/")[0] == device):
            found.update(k for (a, b), ids in self.cables.items() if nic in (a, b) for k in ids)
        return found


def _tomography(
    store: Store, meta: TwinMeta, inventory: _Inventory, config: TomographyConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = store.query(
        "SELECT ts, flow, rate_bps, path FROM twin_flow_samples WHERE run = ? ORDER BY ts, flow",
        [meta.run],
    )[1]
    if not rows:
        raise StoreError("the twin run has no flow telemetry (twin_flow_samples is empty)")
    times = sorted({r[0] for r in rows})
    instant = {t: i for i, t in enumerate(times)}
    sample = np.array([instant[r[0]] for r in rows], dtype=np.int64)
    flow = np.array([r[1] for r in rows], dtype=np.int64)
    rate = np.array([r[2] for r in rows], dtype=float)
    lengths = np.array([len(r[3]) for r in rows], dtype=np.int64)
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    links = np.array([k for r in rows for k in r[3]], dtype=np.int64)
    return link_scores(sample, flow, rate, indptr, links, inventory.link_count, config)


def _device_template_anomalies(
    store: Store, meta: TwinMeta, window: timedelta, first_flow: datetime, max_cells: int
) -> list[Anomaly]:
    """Bursts and new keys per (template, device): `detect_changes` on the run's lines
    counted per window and per `template_id@device`."""
    rows = store.query(
        "SELECT time_bucket(?, l.ts) AS w, CAST(l.template_id AS VARCHAR) || '@' || "
        "substr(s.source, ?) AS k, count(*) FROM ops_lines l JOIN ops_sources s USING (source_id) "
        "WHERE starts_with(s.source, ?) AND l.ts >= ? AND l.ts < ? AND l.template_id IS NOT NULL "
        "GROUP BY ALL ORDER BY 1, 2",
        [window, len(meta.log_prefix) + 1, meta.log_prefix, meta.start, meta.end],
    )[1]
    if not rows:
        raise StoreError(f"the twin run has no log lines under {meta.log_prefix}")
    first, last = rows[0][0], rows[-1][0]
    n = int((last - first) / window) + 1
    keys = sorted({r[1] for r in rows})
    if n * len(keys) > max_cells:
        raise LimitError(
            f"window {window} gives {n:,} windows x {len(keys):,} log keys = "
            f"{n * len(keys):,} counts, above the limit of {max_cells:,} (max_cells); "
            "use a larger window or raise the limit", "max_cells",
        )
    windows = [first + i * window for i in range(n)]
    column = {k: i for i, k in enumerate(keys)}
    counts = np.zeros((len(windows), len(keys)))
    for w, k, c in rows:
        counts[int((w - first) / window), column[k]] = c
    quiet = max(int((first_flow - first) / window), 0)
    config = DetectorConfig(history=max(24, quiet), min_history=max(3, quiet // 2))
    found = detect_changes(counts, windows, keys, config)
    return [a for a in found if a.kind in ("new", "burst")]


@dataclass
class _LogEvidence:
    """Per link and per device, the anomaly score their lines carry; messages per component;
    and how many anomalous lines were errors or worse."""

    per_link: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    per_device: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    messages: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    errors: int = 0


def _log_evidence(
    store: Store, meta: TwinMeta, inventory: _Inventory, window: timedelta, max_cells: int
) -> _LogEvidence:
    """The evidence that the run's anomalous log lines carry."""
    evidence = _LogEvidence()
    per_link, per_device, messages = evidence.per_link, evidence.per_device, evidence.messages
    first_flow = store.query("SELECT min(ts) FROM twin_flow_samples WHERE run = ?", [meta.run])[1][0][0]
    for anomaly in _device_template_anomalies(store, meta, window, first_flow, max_cells):
        template, _, device = anomaly.key.partition("@")
        lines = store.query(
            "SELECT l.content, l.level FROM ops_lines l JOIN ops_sources s USING (source_id) "
            "WHERE l.template_id = ? AND s.source = ? AND l.ts >= ? AND l.ts < ?",
            [int(template), meta.log_prefix + device, anomaly.window_start,
             anomaly.window_start + window],
        )[1]
        for content, level in lines:
            evidence.errors += (level or "").lower() in _ERRORS
            weight = 1.0 if (level or "").lower() in _SEVERE else MILD_WEIGHT
            share = weight * anomaly.score / len(lines)
            named = inventory.references(device, content)
            mnemonic = _MNEMONIC.search(content)
            label = mnemonic.group(1) if mnemonic else content.split(":")[0][:30]
            # a line below warning (a clock sync, a temperature reading) weighs a little in
            # the score but is background, never cited as evidence
            cited = (level or "").lower() in _SEVERE
            if not named:
                per_device[device] += share
                if cited:
                    messages[device][label] += 1
            for link in named:
                per_link[link] += share / len(named)
            for component in sorted({inventory.component[k][0] for k in named}) if cited else ():
                messages[component][label] += 1
    return evidence


def _scaled(values: dict[str, float]) -> dict[str, float]:
    top = max(values.values(), default=0.0)
    return {k: (v / top if top > 0 else 0.0) for k, v in values.items()}


def diagnose(
    store: Store,
    window: timedelta | None = None,
    config: TomographyConfig | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> list[Suspect]:
    """Suspects (links, NICs, switches) from most to least likely; StoreError if there is
    no twin run in the store. NICs that failed measured boot come first.

    Only they are listed when nothing else points to a fault: no flow sample is degraded
    and no anomalous log line is an error or worse (scores are relative, so without this
    the strongest piece of background noise would rank first with score 1).
    """
    from cloudtwin.diagnosis.attestation import attestation_suspects

    if store.schema_version("twin") is None and (attested := attestation_suspects(store, 0.0)):
        return _ranked(attested)
    meta = read_meta(store)
    inventory = _Inventory(store, meta.run)
    window = window or timedelta(seconds=DEFAULT_WINDOW_SAMPLES * meta.sample_s)
    score, degraded, healthy = _tomography(store, meta, inventory, config or TomographyConfig())
    evidence = _log_evidence(store, meta, inventory, window, max_cells)
    if not np.any(degraded > 0) and evidence.errors == 0:
        return _ranked(attestation_suspects(store, 0.0))
    per_link, per_device, messages = evidence.per_link, evidence.per_device, evidence.messages
    suspects: dict[str, Suspect] = {}
    tomo: dict[str, float] = defaultdict(float)
    logs: dict[str, float] = defaultdict(float)
    for link, (name, kind) in inventory.component.items():
        suspect = suspects.setdefault(name, Suspect(name, kind))
        tomo[name] += float(score[link])
        logs[name] += per_link.get(link, 0.0)
        suspect.degraded_samples += int(degraded[link])
        suspect.healthy_samples += int(healthy[link])
        suspect.messages = dict(messages.get(name, {}))
    tomo_scaled, logs_scaled = _scaled(tomo), _scaled(logs)
    for name, suspect in suspects.items():
        suspect.tomography, suspect.logs = tomo_scaled[name], logs_scaled[name]
        suspect.score = suspect.tomography + suspect.logs
    log_top = max(logs.values(), default=0.0)
    ranked = list(suspects.values()) + _switches(inventory, suspects, per_device, messages, log_top)
    failed_boot = attestation_suspects(store, max((r.score for r in ranked), default=0.0))
    failed = {f.component for f in failed_boot}
    return _ranked([r for r in ranked if r.component not in failed] + failed_boot)


def _ranked(suspects: list[Suspect]) -> list[Suspect]:
    suspects.sort(key=lambda s: (-round(s.score, 9), s.kind, s.component))
    for i, suspect in enumerate(suspects, start=1):
        suspect.rank = i
    return suspects


def _switches(
    inventory: _Inventory,
    cables: dict[str, Suspect],
    per_device: dict[str, float],
    own_messages: dict[str, dict[str, int]],
    log_top: float,
) -> list[Suspect]:
    members: dict[str, list[Suspect]] = defaultdict(list)
    for name, suspect in cables.items():
        for switch in inventory.switches_of(name):
            members[switch].append(suspect)
    # a device's own lines are scaled like cables' (by the strongest cable's), at most 1
    top = max(log_top, max(per_device.values(), default=0.0))
    own = {k: v / top for k, v in per_device.items() if top > 0}
    out = []
    for switch in sorted(members, key=_sort_key):
        parts = members[switch]
        best = max(p.score for p in parts)
        strong = sum(1 for p in parts if best > 0 and p.score >= 0.5 * best and p.logs > 0)
        suspect = Suspect(switch, "gateway" if inventory.kind.get(switch) == "gateway" else "switch")
        suspect.score = sum(p.score for p in parts) * strong / len(parts) + own.get(switch, 0.0)
        suspect.tomography = sum(p.tomography for p in parts) * strong / len(parts)
        suspect.logs = sum(p.logs for p in parts) * strong / len(parts) + own.get(switch, 0.0)
        suspect.degraded_samples = sum(p.degraded_samples for p in parts)
        suspect.healthy_samples = sum(p.healthy_samples for p in parts)
        suspect.messages = {"cables implicated": strong} if strong else {}
        suspect.messages.update(own_messages.get(switch, {}))
        out.append(suspect)
    return out
