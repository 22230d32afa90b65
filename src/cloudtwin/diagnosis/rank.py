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

from cloudtwin.diagnosis.suspect import Suspect
from cloudtwin.diagnosis.tomography import TomographyConfig, contended, degraded_samples, link_votes
from cloudtwin.errors import LimitError, StoreError
from cloudtwin.ops.anomaly import Anomaly, DetectorConfig, detect_changes
from cloudtwin.store.database import Store
from cloudtwin.store.ops_query import DEFAULT_MAX_CELLS
from cloudtwin.store.twin_tables import TwinMeta, read_meta, run_names, unknown_run, until_column

__all__ = ["DEFAULT_WINDOW_SAMPLES", "Suspect", "cable_name", "diagnose"]

#: The log anomaly window, in telemetry intervals.
DEFAULT_WINDOW_SAMPLES = 5
_LINK_NAME = re.compile(r"\(([\w./-]+?->[\w./-]+)\)")
_PORT = re.compile(r"\b(Ethernet\d+/\d+)\b")
_ADDRESS = re.compile(r"\bneighbor (\d+\.\d+\.\d+\.\d+)")
_NIC = re.compile(r"(?<![\w.-])((?:[a-z][a-z0-9-]*\.)?host\d+/nic\d+)\b")
_REPORTED_PORT = re.compile(r"\bfrom (\w+): (Ethernet\d+/\d+)")
_KIND_ORDER = {"leaf": 0, "spine": 1, "agg": 2, "core": 3, "gw": 4, "wan": 5}
#: An anomalous line at error severity or worse counts 1; a warning this much.
WARNING_WEIGHT = 0.5
#: Anomalous lines below warning severity (info, notice, debug) count this much.
MILD_WEIGHT = 0.1
#: Severe lines about one component further apart than this belong to different events.
EPISODE_GAP_S = 1.0
#: A cable that a dead switch took down keeps this share of its score (its switch explains it).
SYMPTOM_WEIGHT = 0.25
_ERRORS = {"emerg", "alert", "crit", "critical", "err", "error"}
_SEVERE = _ERRORS | {"warning", "warn"}
#: What a line is about, for its anomaly key: a port, a link, a neighbour or a NIC.
_SUBJECT = r"Ethernet\d+/\d+|\([\w./-]+?->[\w./-]+\)|neighbor \d+\.\d+\.\d+\.\d+|\S*host\d+/nic\d+"
_MNEMONIC = re.compile(r"%([A-Z_]+-\d-[A-Z_]+)")


def _sort_key(name: str) -> tuple[int, int]:
    """Tier, then number, of a switch name (`leaf1`, `west.spine0`, `east.gw0`, `east.wan`)."""
    match = re.match(r"([a-z]+)(\d*)$", name.rsplit(".", 1)[-1])
    if match is None:
        return (9, 0)
    return (_KIND_ORDER.get(match.group(1), 9), int(match.group(2) or 0))


def cable_name(a: str, b: str) -> str:
    """A cable's component name: its ends, lower tier first (`leaf1-spine2`, `west.leaf0-west.gw0`)."""
    first, second = sorted((a, b), key=lambda n: (_sort_key(n), n))
    return f"{first}-{second}"


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class _Inventory:
    """Links and nodes as the store knows them, and the component each link belongs to."""

    def __init__(self, store: Store, run: str) -> None:
        nodes = store.query("SELECT name, kind, address FROM twin_nodes WHERE run = ?", [run])[1]
        links = store.query(
            "SELECT link_id, name, src, dst, device, interface, capacity_bps FROM twin_links WHERE run = ? "
            "ORDER BY link_id", [run]
        )[1]
        if not links:
            raise StoreError("the twin run has no inventory (twin_links is empty)")
        self.kind = {n: k for n, k, _ in nodes}
        self.by_address = {a: n for n, _, a in nodes}
        self.link_count = max(r[0] for r in links) + 1
        self.capacity_bps = np.zeros(self.link_count)
        for row in links:
            self.capacity_bps[row[0]] = row[6] or 0.0
        links = [row[:6] for row in links]
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
        wan = self.kind.get(src) == self.kind.get(dst) == "wan"
        return cable_name(src, dst), "wan-link" if wan else "link"

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
    store: Store, meta: TwinMeta, inventory: _Inventory, config: TomographyConfig,
    outages: dict[int, tuple[datetime, datetime | None]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, tuple[datetime, datetime]]]:
    """Per link: score, degraded and healthy samples, and when its degraded samples were.

    A degraded sample that contention explains does not count (`tomography.contended`).
    One that crosses a link reported failing then (`outages`) votes for those links
    alone: the reported failure explains it, and the healthy links beside it on the path
    are not suspects."""
    sample, flow, rate, indptr, links, times = _flow_samples(store, meta)
    capacity = inventory.capacity_bps
    severity = np.where(contended(sample, rate, indptr, links, capacity), 0.0,
                        degraded_samples(flow, rate, config))
    onset_s = np.full(inventory.link_count, np.inf)
    back_s = np.full(inventory.link_count, np.inf)
    for link, (since, until) in outages.items():
        onset_s[link] = (since - meta.start).total_seconds()
        back_s[link] = np.inf if until is None else (until - meta.start).total_seconds()
    entry_sample = np.repeat(sample, np.diff(indptr))
    at = times[entry_sample]
    reported = (onset_s[links] <= at + meta.sample_s) & (at <= back_s[links])
    explained = np.bincount(np.repeat(np.arange(sample.size), np.diff(indptr)), reported,
                            minlength=sample.size) > 0
    keep = reported | ~np.repeat(explained, np.diff(indptr))
    entry_row = np.repeat(np.arange(sample.size), np.diff(indptr))
    kept_per_row = np.bincount(entry_row[keep], minlength=sample.size)
    indptr = np.concatenate(([0], np.cumsum(kept_per_row)))
    links, entry_sample = links[keep], entry_sample[keep]
    score, degraded, healthy = link_votes(sample, severity, indptr, links, inventory.link_count)
    bad = np.repeat(severity > 0, np.diff(indptr))
    first = np.full(inventory.link_count, np.iinfo(np.int64).max)
    last = np.full(inventory.link_count, -1)
    np.minimum.at(first, links[bad], entry_sample[bad])
    np.maximum.at(last, links[bad], entry_sample[bad])
    spans = {
        int(k): (meta.start + timedelta(seconds=float(times[first[k]])),
                 meta.start + timedelta(seconds=float(times[last[k]] + meta.sample_s)))
        for k in np.flatnonzero(last >= 0)
    }
    return score, degraded, healthy, spans


def _flow_samples(
    store: Store, meta: TwinMeta
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stored flow samples, one row per flow and instant (a row that stands for several
    instants repeated): instant, flow, rate, path CSR, and each instant's time in seconds
    after the run's start."""
    rows = store.query(
        f"SELECT ts, flow, rate_bps, path, {until_column(store)} FROM twin_flow_samples WHERE run = ? "
        "ORDER BY ts, flow",
        [meta.run],
    )[1]
    if not rows:
        raise StoreError("the twin run has no flow telemetry (twin_flow_samples is empty)")
    first = rows[0][0]
    step = timedelta(seconds=meta.sample_s)
    start = np.array([round((r[0] - first) / step) for r in rows], dtype=np.int64)
    end = np.array([round(((r[4] or r[0]) - first) / step) for r in rows], dtype=np.int64)
    repeat = end - start + 1
    row = np.repeat(np.arange(len(rows)), repeat)
    offset = np.arange(row.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    sample = start[row] + offset
    lengths = np.array([len(r[3]) for r in rows], dtype=np.int64)
    flat = np.array([k for r in rows for k in r[3]], dtype=np.int64)
    row_start = np.concatenate(([0], np.cumsum(lengths)))
    per_row = lengths[row]
    indptr = np.concatenate(([0], np.cumsum(per_row)))
    take = np.repeat(row_start[row], per_row) + np.arange(int(indptr[-1])) - np.repeat(indptr[:-1], per_row)
    flow = np.array([r[1] for r in rows], dtype=np.int64)[row]
    rate = np.array([r[2] for r in rows], dtype=float)[row]
    offset_s = (first - meta.start).total_seconds()
    times = offset_s + np.arange(int(sample.max()) + 1) * meta.sample_s
    return sample, flow, rate, indptr, flat[take], times


def _device_template_anomalies(
    store: Store, meta: TwinMeta, window: timedelta, first_flow: datetime, max_cells: int
) -> list[Anomaly]:
    """Bursts and new keys per (template, device, what the line is about):
    `detect_changes` on the run's lines counted per window and per
    `template_id@device#subject`, the subject being the first port, link, neighbour or
    NIC the line names (`_SUBJECT`; empty when none). A port that goes down after another
    port of the same switch did is news about that port."""
    rows = store.query(
        "SELECT time_bucket(?, l.ts) AS w, CAST(l.template_id AS VARCHAR) || '@' || "
        "substr(s.source, ?) || '#' || regexp_extract(l.content, ?, 0) AS k, count(*) "
        "FROM ops_lines l JOIN ops_sources s USING (source_id) "
        "WHERE starts_with(s.source, ?) AND l.ts >= ? AND l.ts < ? AND l.template_id IS NOT NULL "
        "GROUP BY ALL ORDER BY 1, 2",
        [window, len(meta.log_prefix) + 1, _SUBJECT, meta.log_prefix, meta.start, meta.end],
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
    severe_link: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    per_device: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    mild: dict[str, list[datetime]] = field(default_factory=lambda: defaultdict(list))
    error_reports: set[tuple[datetime, str]] = field(default_factory=set)
    reports: dict[str, list[tuple[datetime, str]]] = field(default_factory=lambda: defaultdict(list))
    error_onset: dict[int, datetime] = field(default_factory=dict)
    warning_onset: dict[int, datetime] = field(default_factory=dict)
    messages: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    errors: int = 0

    def episode(self, component: str) -> list[tuple[datetime, str]]:
        """The component's main episode: its severe lines (time, device), split where two
        are more than `EPISODE_GAP_S` apart, the episode with the most reporting devices,
        then lines (earliest on a tie). A line about it at another time (a harmless
        warning) is not a report of the same event."""
        reports = sorted(set(self.reports.get(component, ())))
        if not reports:
            return []
        gap = timedelta(seconds=EPISODE_GAP_S)
        episodes: list[list[tuple[datetime, str]]] = [[reports[0]]]
        for report in reports[1:]:
            if report[0] - episodes[-1][-1][0] > gap:
                episodes.append([])
            episodes[-1].append(report)
        return max(episodes, key=lambda e: (len({d for _, d in e}), len(e), -e[0][0].timestamp()))

    def witnesses(self, component: str) -> set[str]:
        """The devices that reported the component in its main episode (from its first
        error line on, when it has one: a warning before the failure is no report of it)."""
        episode = self.episode(component)
        errors = [ts for ts, device in episode if (ts, device) in self.error_reports]
        since = min(errors) if errors else None
        return {device for ts, device in episode if since is None or ts >= since}

    def outages(
        self, component_of: dict[int, tuple[str, str]]
    ) -> dict[int, tuple[datetime, datetime | None]]:
        """When each link was reported failing: from its first error line (or its first
        warning when both ends reported it: one device's lone warning is no failure) to
        the first milder anomalous line about it after its main episode (a port back up;
        None: not before the end of the run)."""
        onset = dict(self.error_onset)
        for link, ts in self.warning_onset.items():
            if len(self.witnesses(component_of[link][0])) > 1:
                onset[link] = min(onset.get(link, ts), ts)
        out: dict[int, tuple[datetime, datetime | None]] = {}
        for link, since in onset.items():
            component = component_of[link][0]
            episode = self.episode(component)
            last = max(episode[-1][0], since) if episode else since
            after = [ts for ts in self.mild.get(component, ()) if ts > last]
            out[link] = (since, min(after) if after else None)
        return out

    def span(self, component: str) -> tuple[datetime, datetime] | None:
        """When the component's main episode of severe lines was (from its first error line,
        if it has one), stretched over the anomalous milder lines about it (a port coming
        back up) that follow it closely."""
        episode = self.episode(component)
        if not episode:
            return None
        errors = [ts for ts, device in episode if (ts, device) in self.error_reports]
        since, until = min(errors) if errors else episode[0][0], episode[-1][0]
        gap = timedelta(seconds=EPISODE_GAP_S)
        for ts in sorted(self.mild.get(component, ())):
            if until < ts <= until + gap:
                until = ts
        return since, until


def _log_evidence(
    store: Store, meta: TwinMeta, inventory: _Inventory, window: timedelta, max_cells: int
) -> _LogEvidence:
    """The evidence that the run's anomalous log lines carry."""
    evidence = _LogEvidence()
    per_link, per_device, messages = evidence.per_link, evidence.per_device, evidence.messages
    first_flow = store.query("SELECT min(ts) FROM twin_flow_samples WHERE run = ?", [meta.run])[1][0][0]
    for anomaly in _device_template_anomalies(store, meta, window, first_flow, max_cells):
        template, _, rest = anomaly.key.partition("@")
        device, _, subject = rest.partition("#")
        lines = store.query(
            "SELECT l.content, l.level, l.ts FROM ops_lines l JOIN ops_sources s USING (source_id) "
            "WHERE l.template_id = ? AND s.source = ? AND l.ts >= ? AND l.ts < ? "
            "AND regexp_extract(l.content, ?, 0) = ?",
            [int(template), meta.log_prefix + device, anomaly.window_start,
             anomaly.window_start + window, _SUBJECT, subject],
        )[1]
        for content, level, ts in lines:
            error = (level or "").lower() in _ERRORS
            evidence.errors += error
            severe = (level or "").lower() in _SEVERE
            share = (1.0 if error else WARNING_WEIGHT if severe else MILD_WEIGHT) / len(lines)
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
                if severe:
                    evidence.severe_link[link] += share / len(named)
                    first = evidence.error_onset if error else evidence.warning_onset
                    first[link] = min(first.get(link, ts), ts)
                    evidence.reports[inventory.component[link][0]].append((ts, device))
                    if error:
                        evidence.error_reports.add((ts, device))
            components = sorted({inventory.component[k][0] for k in named}) if named else [device]
            for component in components:
                if named and cited:
                    messages[component][label] += 1
                if severe and not named:  # a device's own lines (a switch's, a gateway's)
                    evidence.reports[component].append((ts, device))
                elif not severe:
                    evidence.mild[component].append(ts)
    return evidence


def _scaled(values: dict[str, float]) -> dict[str, float]:
    top = max(values.values(), default=0.0)
    return {k: (v / top if top > 0 else 0.0) for k, v in values.items()}


def diagnose(
    store: Store,
    window: timedelta | None = None,
    config: TomographyConfig | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
    run: str | None = None,
) -> list[Suspect]:
    """Suspects (links, NICs, switches) of the twin run `run` (the latest written when
    None) from most to least likely; StoreError if the store holds no twin run, or none
    of that name. NICs that failed measured boot come first.

    Only they are listed when nothing else points to a fault: no flow sample is degraded,
    no anomalous log line is an error or worse, and no cable is reported by both its ends
    (scores are relative, so without this the strongest piece of background noise would
    rank first with score 1).
    """
    from cloudtwin.diagnosis.attestation import attestation_suspects

    twins = run_names(store)
    boots_alone = not twins if run is None else run not in twins  # `nic boot --db` wrote it
    if boots_alone:
        attested = attestation_suspects(store, 0.0, _attested_run(store, run, twins))
        if attested:
            return _ranked(attested)
    meta = read_meta(store, run)
    inventory = _Inventory(store, meta.run)
    window = window or timedelta(seconds=DEFAULT_WINDOW_SAMPLES * meta.sample_s)
    evidence = _log_evidence(store, meta, inventory, window, max_cells)
    score, degraded, healthy, spans = _tomography(
        store, meta, inventory, config or TomographyConfig(), evidence.outages(inventory.component)
    )
    corroborated = any(len(evidence.witnesses(c)) > 1 for c in evidence.reports)
    if not np.any(degraded > 0) and evidence.errors == 0 and not corroborated:
        return _ranked(attestation_suspects(store, 0.0, meta.run))
    per_link, messages = evidence.per_link, evidence.messages
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
        suspect.severe |= link in evidence.error_onset
        suspect.widen(spans.get(link))
        suspect.widen(evidence.span(name))
    for name in logs:  # a cable both of whose ends report it is twice as likely as one reported once
        logs[name] *= max(len(evidence.witnesses(name)), 1)
    tomo_scaled, logs_scaled = _scaled(tomo), _scaled(logs)
    for name, suspect in suspects.items():
        suspect.tomography, suspect.logs = tomo_scaled[name], logs_scaled[name]
        suspect.score = suspect.tomography + suspect.logs
    log_top = max(logs.values(), default=0.0)
    switches = _switches(inventory, suspects, evidence, log_top)
    for switch in switches:  # cables a dead switch took down are its symptoms
        for name in switch.explains:
            suspects[name].score *= SYMPTOM_WEIGHT
    ranked = list(suspects.values()) + switches
    for suspect in ranked:
        if suspect.kind in ("switch", "gateway"):
            suspect.widen(evidence.span(suspect.component))
    failed_boot = attestation_suspects(store, max((r.score for r in ranked), default=0.0), meta.run)
    failed = {f.component for f in failed_boot}
    return _ranked([r for r in ranked if r.component not in failed] + failed_boot)


def _attested_run(store: Store, run: str | None, twins: list[str]) -> str | None:
    """A run of failed boots alone (`nic boot --db`): `run` if it recorded some (StoreError
    naming every run if not), or every run's when None."""
    from cloudtwin.store.attestation import attestation_runs

    known = attestation_runs(store)
    if run is not None and run not in known:
        raise unknown_run(store, run, twins + [r for r in known if r not in twins])
    return run


def _ranked(suspects: list[Suspect]) -> list[Suspect]:
    suspects.sort(key=lambda s: (-round(s.score, 9), s.kind, s.component))
    for i, suspect in enumerate(suspects, start=1):
        suspect.rank = i
    return suspects


def _switches(
    inventory: _Inventory,
    cables: dict[str, Suspect],
    evidence: _LogEvidence,
    log_top: float,
) -> list[Suspect]:
    """A switch (gateway, WAN edge) is implicated by the cables its neighbours reported while
    it said nothing about them: a dead device logs nothing. Its score is the sum of those
    cables' scores times their share of its cables, plus its own lines."""
    members: dict[str, list[Suspect]] = defaultdict(list)
    for name, suspect in cables.items():
        for switch in inventory.switches_of(name):
            members[switch].append(suspect)
    # a device's own lines are scaled like cables' (by the strongest cable's), at most 1
    per_device = evidence.per_device
    top = max(log_top, max(per_device.values(), default=0.0))
    own = {k: v / top for k, v in per_device.items() if top > 0}
    out = []
    for switch in sorted(members, key=_sort_key):
        parts = members[switch]
        silent = [p for p in parts if p.severe and switch not in evidence.witnesses(p.component)]
        share = len(silent) / len(parts)
        kind = {"gateway": "gateway", "wan": "wan-edge"}.get(inventory.kind.get(switch, ""), "switch")
        suspect = Suspect(switch, kind)
        suspect.score = sum(p.score for p in silent) * share + own.get(switch, 0.0)
        suspect.tomography = sum(p.tomography for p in silent) * share
        suspect.logs = sum(p.logs for p in silent) * share + own.get(switch, 0.0)
        suspect.degraded_samples = sum(p.degraded_samples for p in parts)
        suspect.healthy_samples = sum(p.healthy_samples for p in parts)
        suspect.messages = {"cables implicated": len(silent)} if silent else {}
        for part in silent:
            suspect.widen((part.since, part.until) if part.since and part.until else None)
        suspect.messages.update(evidence.messages.get(switch, {}))
        suspect.explains = [p.component for p in silent] if len(silent) >= 2 else []
        out.append(suspect)
    return out
