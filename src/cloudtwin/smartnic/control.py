"""The NIC's control plane, with P4Runtime semantics: roles, election ids, atomic batches.

Clients reach it only from the provider's management network: a request that comes in
through a PCIe function (a tenant's VF, a VM's virtio device, a bare-metal host's PF)
has no path to it and is refused before it is read. Each role (provider, tenant) may
write its own tables; per role the client with the highest election id is the primary
and the only one whose writes are accepted; a second client with the same election id
is refused. A batch is checked whole and then applied whole, or not at all. A pipeline
swap replaces program and tables and stalls the NIC's flows for `swap_stall_s`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from cloudtwin.errors import NicError
from cloudtwin.p4 import Datapath, Program, TableEntry, compile_program

__all__ = [
    "ControlPlane",
    "Origin",
    "Role",
    "Session",
    "Update",
    "UpdateKind",
]


class Role(StrEnum):
    """Who a control-plane client speaks for."""

    PROVIDER = "provider"
    TENANT = "tenant"


class Origin(StrEnum):
    """Where a request enters the NIC: the management port or a PCIe function's data path."""

    MANAGEMENT = "management"
    PCIE_FUNCTION = "pcie-function"


class UpdateKind(StrEnum):
    """A write's kind, as in P4Runtime."""

    INSERT = "insert"
    MODIFY = "modify"
    DELETE = "delete"


@dataclass(frozen=True)
class Update:
    """One write: an entry into a table (matched by its match fields and priority)."""

    kind: UpdateKind
    table: str
    entry: TableEntry


@dataclass(frozen=True)
class Session:
    """A connected client: its id, role and election id."""

    client: int
    role: Role
    election_id: int


@dataclass
class ControlPlane:
    """The control plane of one NIC; `tables_of` lists the tables each role owns."""

    datapath: Datapath
    tables_of: dict[Role, frozenset[str]] = field(default_factory=dict)
    swap_stall_s: float = 0.0
    sessions: dict[int, Session] = field(default_factory=dict)
    stalls_s: list[float] = field(default_factory=list)
    _next_client: int = 0

    def __post_init__(self) -> None:
        if not self.tables_of:
            self.tables_of = {Role.PROVIDER: frozenset(self.datapath.tables), Role.TENANT: frozenset()}

    def connect(self, role: Role, election_id: int, origin: Origin = Origin.MANAGEMENT) -> Session:
        """Open a session (P4Runtime arbitration); refused from a PCIe function or on a
        duplicate election id within the role."""
        if origin != Origin.MANAGEMENT:
            raise NicError("control plane: no path from a PCIe function to the control plane")
        if election_id < 0:
            raise NicError("election_id: must be non-negative")
        for other in self.sessions.values():
            if other.role == role and other.election_id == election_id:
                raise NicError(f"election_id: {election_id} is already held in role {role.value}")
        self._next_client += 1
        session = Session(self._next_client, role, election_id)
        self.sessions[session.client] = session
        return session

    def disconnect(self, session: Session) -> None:
        """Close a session; the next highest election id of its role becomes primary."""
        self.sessions.pop(session.client, None)

    def primary(self, role: Role) -> Session | None:
        """The primary of `role`: the connected client with the highest election id."""
        candidates = [s for s in self.sessions.values() if s.role == role]
        return max(candidates, key=lambda s: s.election_id) if candidates else None

    def write(self, session: Session, updates: list[Update]) -> None:
        """Apply a batch atomically; NicError (and nothing applied) when any update fails."""
        self._check_primary(session)
        staged = {name: list(state.entries) for name, state in self.datapath.tables.items()}
        for i, update in enumerate(updates):
            self._stage(session, staged, i, update)
        for name, entries in staged.items():
            state = self.datapath.tables[name]
            if entries != state.entries:
                state.entries = entries
                state.invalidate()

    def read(self, table: str) -> list[TableEntry]:
        """The entries of `table` as installed."""
        return list(self._table(table).entries)

    def set_pipeline(self, session: Session, program: Program) -> Datapath:
        """Swap the pipeline (provider primary only): new program, empty tables, a stall."""
        self._check_primary(session)
        if session.role != Role.PROVIDER:
            raise NicError("set_pipeline: only the provider may replace the pipeline")
        self.datapath = compile_program(program)
        self.tables_of = {Role.PROVIDER: frozenset(self.datapath.tables), Role.TENANT: frozenset()}
        self.stalls_s.append(self.swap_stall_s)
        return self.datapath

    def _check_primary(self, session: Session) -> None:
        if session.client not in self.sessions:
            raise NicError(f"client {session.client}: not connected")
        primary = self.primary(session.role)
        if primary is None or primary.client != session.client:
            raise NicError(
                f"client {session.client}: not the primary of role {session.role.value} "
                f"(election id {session.election_id})"
            )

    def _table(self, name: str):  # noqa: ANN202 - one of `Datapath.tables`
        short = name.split(".")[-1]
        if short not in self.datapath.tables:
            raise NicError(f"table {name!r}: no such table")
        return self.datapath.tables[short]

    def _stage(self, session: Session, staged: dict[str, list[TableEntry]], i: int, update: Update) -> None:
        where = f"updates.{i}"
        state = self._table(update.table)
        name = state.table.name
        if name not in self.tables_of.get(session.role, frozenset()):
            raise NicError(f"{where}: role {session.role.value} may not write table {name}")
        entries = staged[name]
        entry = update.entry
        if entry.action not in state.table.actions:
            raise NicError(f"{where}: {entry.action!r} is not an action of {name}")
        if len(entry.match) != len(state.table.keys):
            raise NicError(f"{where}: {name} has {len(state.table.keys)} keys, the entry {len(entry.match)}")
        at = next(
            (j for j, e in enumerate(entries) if e.match == entry.match and e.priority == entry.priority),
            None,
        )
        if update.kind == UpdateKind.INSERT:
            if at is not None:
                raise NicError(f"{where}: {name} already has an entry with this match")
            if len(entries) >= state.table.size:
                raise NicError(f"{where}: {name} is full ({state.table.size} entries)")
            entries.append(entry)
        elif at is None:
            raise NicError(f"{where}: {name} has no entry with this match")
        elif update.kind == UpdateKind.MODIFY:
            entries[at] = replace(entry)
        else:
            del entries[at]
