"""Helpers for tests that build real network namespaces: skip without the capability, clean up always."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest


def netns_capability() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    name = f"ctwprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode:
        return f"ip netns add fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def unique_prefix() -> str:
    """A namespace prefix unique to this test run (cloudtwin tests use `ctwt`)."""
    return f"ctwt{uuid.uuid4().hex[:4]}"


def leftover(prefix: str) -> list[str]:
    """Namespaces and root-namespace links whose names start with `prefix`."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [n for n in names if n.startswith(prefix)]
    found += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if prefix in line]
    return found


def linux_adapter_or_skip(tmp_path: Path):  # noqa: ANN201 - a LinuxAdapter
    reason = netns_capability()
    if reason:
        pytest.skip(reason)
    from cloudtwin.intercloud.adapters.linux import LinuxAdapter

    return LinuxAdapter(site="east", prefix=unique_prefix(), gateway="198.18.0.1")
