"""Failed measured boots as operations data and as the first suspects of a diagnosis.

A NIC that fails measured boot keeps its host's port quarantined: its flows get no
bandwidth whatever the fabric does, so the failure is certain evidence and its NICs
rank above every inferred suspect.
"""

from __future__ import annotations

from datetime import datetime

from cloudtwin.diagnosis.suspect import Suspect
from cloudtwin.ops.record import LogRecord
from cloudtwin.scenario.model import Scenario
from cloudtwin.smartnic.boot import BootReport
from cloudtwin.store.attestation import (
    attestation_source,
    read_attestation_failures,
    write_attestation_failures,
)
from cloudtwin.store.database import Store
from cloudtwin.store.ops_ingest import ingest_records
from cloudtwin.topology.builders import build_topology

__all__ = ["attestation_suspects", "record_attestation"]

BOOT_TIME = datetime(2024, 1, 1)
"""The (twin) time boot lines carry."""


def record_attestation(
    store: Store, scenario: Scenario, reports: list[BootReport], prefix: str = "", run: str | None = None
) -> int:
    """Write one line per NIC of every host whose chain failed, as failures of `run` (the
    scenario's name unless given: a cloud's, for its sites); the number of lines.

    `prefix` goes before every host and NIC name (a site's, `west.`, in a cloud of several).
    The lines are also operations log lines (source `attestation/<run>`, or
    `attestation/<run>/<site>` for a site), so `cloudtwin logs search ATTESTATION_FAILED`
    finds the evidence a diagnosis cites. Recording the same boots again adds nothing."""
    run = run or scenario.name
    topology = build_topology(scenario)
    rows = []
    for report in reports:
        if report.attested:
            continue
        host = int(report.host.removeprefix("host"))
        for node in topology.host_nics[host]:
            nic = prefix + topology.node_name(int(node))
            line = (
                f"{prefix}{report.host} {nic}: %NIC-2-ATTESTATION_FAILED: measured boot stopped at stage "
                f"{report.failed_stage}: {report.reason}; port quarantined"
            )
            who = prefix + report.host
            rows.append((BOOT_TIME, who, nic, str(report.failed_stage), str(report.reason), line))
    write_attestation_failures(store, run, rows)
    records = [LogRecord(ts, who, "ERROR", "NIC", line) for ts, who, _, _, _, line in rows]
    ingest_records(store, records, source=attestation_source(run, prefix.rstrip(".")))
    return len(rows)


def attestation_suspects(store: Store, above: float, run: str | None = None) -> list[Suspect]:
    """A suspect per NIC with a failed measured boot of `run` (of every run when None),
    scored above every other suspect."""
    out: dict[str, Suspect] = {}
    for host, nic, stage, reason in read_attestation_failures(store, run):
        suspect = out.setdefault(nic, Suspect(nic, "nic", score=above + 1.0, logs=1.0))
        label = f"ATTESTATION_FAILED {host} {stage}: {reason}"
        suspect.messages[label] = suspect.messages.get(label, 0) + 1
    return list(out.values())
