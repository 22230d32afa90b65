"""What a running service is configured with: the store, where its token lives, the address."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ServiceSettings",
    "federation_path_for",
    "is_loopback",
    "token_path_for",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: How often at most the service copies a changed store into a fresh read snapshot.
SNAPSHOT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class ServiceSettings:
    """A service over one store file."""

    db: Path
    token: str
    examples_dir: Path | None = None
    host: str = DEFAULT_HOST
    snapshot_interval_s: float = SNAPSHOT_INTERVAL_S
    snapshot_dir: Path | None = None
    #: The federation controller's state file; None keeps it in memory (lost at exit).
    federation_state: Path | None = None


def token_path_for(db: Path) -> Path:
    """The token file of a store: beside it, named after it (`cloudtwin.duckdb.token`)."""
    return db.with_name(db.name + ".token")


def federation_path_for(db: Path) -> Path:
    """The federation controller's state of a store: beside it (`cloudtwin.duckdb.federation.json`)."""
    return db.with_name(db.name + ".federation.json")


def is_loopback(host: str | None) -> bool:
    """Whether an address (or `localhost`) is on this machine only."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
