"""Real network namespaces through `ip`: run commands, list and remove what a prefix owns.

Everything cloudtwin makes lives inside namespaces whose names start with its prefix
(veth pairs are created with both ends already inside namespaces), so removing those
namespaces removes every device too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from cloudtwin.errors import FederationError

__all__ = ["IpRunner", "namespaces", "remove_namespaces"]


class IpRunner:
    """Runs `ip`, `bridge` and `tc` commands; each failure becomes a one-line FederationError."""

    def __init__(self) -> None:
        if shutil.which("ip") is None:
            raise FederationError("linux", "the ip command (iproute2) is not installed")
        self.commands: list[list[str]] = []

    def run(self, *argv: str, check: bool = True) -> str:
        """Run one command; its stdout."""
        self.commands.append(list(argv))
        done = subprocess.run(list(argv), capture_output=True, text=True)
        if check and done.returncode:
            reason = (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[0]
            raise FederationError("linux", f"`{' '.join(argv)}` failed: {reason}")
        return done.stdout

    def ip(self, namespace: str | None, *argv: str, check: bool = True) -> str:
        """`ip [-n NS] ARGV`."""
        return self.run("ip", *(("-n", namespace) if namespace else ()), *argv, check=check)

    # iproute2's JSON as parsed: its keys depend on the object and the kernel (linkinfo,
    # info_data, ifalias...), read key by key by the linux adapter
    def json(self, namespace: str | None, *argv: str) -> list[dict[str, Any]]:
        """`ip -j [-n NS] ARGV` parsed (empty when the namespace is gone)."""
        text = self.run("ip", "-j", *(("-n", namespace) if namespace else ()), *argv, check=False)
        return list(json.loads(text)) if text.strip() else []

    def in_ns(self, namespace: str, argv: Sequence[str], check: bool = True) -> str:
        """Run a program inside a namespace."""
        return self.run("ip", "netns", "exec", namespace, *argv, check=check)


def namespaces(prefix: str) -> list[str]:
    """Namespaces whose names start with `prefix-`."""
    if shutil.which("ip") is None:
        return []
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in listing.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(f"{prefix}-"))


def remove_namespaces(prefix: str) -> list[str]:
    """Delete every namespace of `prefix` (and with it every device inside); the names removed."""
    removed = []
    for name in namespaces(prefix):
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        removed.append(name)
    return removed
