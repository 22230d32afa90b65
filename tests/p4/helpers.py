"""Loading the shipped P4 programs with their entries, for the P4 and smartNIC tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from cloudtwin.p4 import Datapath, load_datapath

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "p4"
PROGRAMS = ["vxlan_gateway", "security_groups", "tenant_meter", "parse_only"]


def shipped(name: str) -> Datapath:
    """A shipped program with its shipped entries installed (none for parse_only)."""
    entries = EXAMPLES / f"{name}.entries.yaml"
    document = yaml.safe_load(entries.read_text()) if entries.exists() else None
    return load_datapath((EXAMPLES / f"{name}.p4").read_text(), f"{name}.p4", document)
