"""The adapter protocol: how a site's agent realises segments in the site's network virtualization.

An adapter is idempotent: `apply` makes the site hold exactly the segment given (creating
what is missing, fixing what differs, removing what is extra) under names derived from
the segment, so that running it again, or after a crash half-way, duplicates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar, runtime_checkable

from pydantic import TypeAdapter, ValidationError

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.objects import DesiredSegment

__all__ = [
    "Adapter",
    "AdapterError",
    "Crash",
    "FaultInjector",
    "Resource",
    "SiteApi",
    "read_resource",
    "validation_reason",
]

#: A resource's body as a cloud's API holds it: its fields are the flavour's own (an adapter
#: reads them back through its TypedDicts, `read_resource`).
Resource = dict[str, object]

_T = TypeVar("_T")


class AdapterError(FederationError):
    """The site's network virtualization refused or failed a change."""

    def __init__(self, reason: str) -> None:
        super().__init__("adapter", reason, 502)


@runtime_checkable
class Adapter(Protocol):
    """What an agent needs from a site."""

    flavour: str

    def segments(self) -> list[DesiredSegment]:
        """The federated segments the site holds now, read back from the site."""

    def apply(self, segment: DesiredSegment) -> None:
        """Make the site hold `segment` exactly (idempotent)."""

    def delete(self, network: str) -> None:
        """Remove the segment of `network` and everything made for it (idempotent)."""

    def close(self) -> None:
        """Release what the adapter holds open (processes, sockets)."""


class Crash(BaseException):  # noqa: N818 - a stand-in for SIGKILL, not an error to handle
    """Raised by a FaultInjector: the process dies here (no handler may catch and continue)."""


class FaultInjector:
    """Counts a backend's changes and dies (raises Crash) before change number `after` + 1."""

    def __init__(self, after: int | None = None) -> None:
        self.after = after
        self.changes = 0

    def change(self) -> None:
        """Called before each change a backend makes."""
        if self.after is not None and self.changes >= self.after:
            raise Crash(f"killed before change {self.changes + 1}")
        self.changes += 1


class SiteApi:
    """A cloud's REST-style API modelled in memory: collections of objects with server-made ids.

    Like the real thing, `create` is not idempotent (a retry makes a second object): the
    adapter has to look before it creates.
    """

    def __init__(self, collections: tuple[str, ...], faults: FaultInjector | None = None) -> None:
        self.collections: dict[str, dict[str, Resource]] = {c: {} for c in collections}
        self.faults = faults if faults is not None else FaultInjector()
        self._serial = 0

    def create(self, collection: str, **body: object) -> str:
        """POST: a new object with a fresh id."""
        self.faults.change()
        self._serial += 1
        oid = f"{collection[:3]}-{self._serial:06d}"
        self.collections[collection][oid] = dict(body)
        return oid

    def delete(self, collection: str, oid: str) -> None:
        """DELETE one object."""
        self.faults.change()
        self.collections[collection].pop(oid, None)

    def get(self, collection: str, oid: str) -> Resource:
        """GET one object."""
        return self.collections[collection][oid]

    def find(self, collection: str, **match: object) -> list[str]:
        """GET with filters: ids of the objects whose fields match, in creation order."""
        return [
            oid
            for oid, o in self.collections[collection].items()
            if all(o.get(k) == v for k, v in match.items())
        ]

    def ensure(self, collection: str, scope: Mapping[str, object], wanted: list[Resource]) -> None:
        """Make the objects matching `scope` exactly `wanted` (deleting extras, creating what lacks)."""
        remaining = list(wanted)
        for oid in self.find(collection, **scope):
            obj = self.collections[collection][oid]
            if obj in remaining:
                remaining.remove(obj)
            else:
                self.delete(collection, oid)
        for body in remaining:
            self.create(collection, **body)

    def count(self) -> dict[str, int]:
        """Objects per collection."""
        return {c: len(objects) for c, objects in self.collections.items()}


def read_resource(shape: TypeAdapter[_T], body: Resource, where: str) -> _T:
    """`body` read as `shape` (an adapter's TypedDict of a resource); AdapterError naming `where`
    when the site holds something else (a resource changed behind the adapter's back)."""
    try:
        return shape.validate_python(body, strict=True)
    except ValidationError as err:
        raise AdapterError(f"{where}: {validation_reason(err)}") from err


def validation_reason(err: ValidationError) -> str:
    """The first problem of `err` in one line: `field.path: what is wrong` (the field left
    out when the whole value is wrong: not JSON, not an object)."""
    first = err.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    what = first["msg"].splitlines()[0].lower() if first["msg"] else "invalid"
    if first["type"] == "json_invalid":
        what = "something that is not JSON"
    elif first["type"] in ("model_type", "model_attributes_type") and not field:
        what = "JSON that is not an object"
    return f"{field}: {what}" if field else what
