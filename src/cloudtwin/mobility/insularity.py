"""The insularity protocol: a migration as a transaction between two autonomous clouds.

The source asks; the destination's admission policy (quota, capacity, compliance labels)
decides and picks the host itself; the source receives an opaque ticket only. Each side
proves who it is with an Ed25519-signed token (claims: issuer, audience, purpose,
migration, expiry) that the other verifies with the public key exchanged when the clouds
federated. The VM runs in exactly one place at every instant: the source pauses it before
the destination may start it, and an abort at any phase resumes it at the source and
drops the destination's reservation. Each cloud keeps its own log, in its own words: the
source's never holds the destination's host names or underlay addresses, nor the reverse.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cloudtwin.errors import MobilityError, needs_extra

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "AdmissionPolicy",
    "Cloud",
    "ConsentError",
    "Phase",
    "Ticket",
    "Token",
    "Transaction",
    "VmProfile",
]

TOKEN_LIFETIME_S = 300.0


class ConsentError(MobilityError):
    """A side refused, or could not prove who it is: the migration does not start."""


class Phase(StrEnum):
    """Where a migration transaction stands."""

    REQUESTED = "requested"
    ADMITTED = "admitted"
    TRANSFERRING = "transferring"
    SWITCHING = "switching"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class Token:
    """Signed claims of one cloud to another."""

    claims: str
    signature: bytes

    @staticmethod
    def issue(
        key: Ed25519PrivateKey, issuer: str, audience: str, purpose: str, migration: str, now_s: float
    ) -> Token:
        claims = json.dumps(
            {
                "iss": issuer,
                "aud": audience,
                "purpose": purpose,
                "migration": migration,
                "exp": now_s + TOKEN_LIFETIME_S,
            },
            sort_keys=True,
        )
        return Token(claims, key.sign(claims.encode()))

    def verify(
        self, public: Ed25519PublicKey, issuer: str, audience: str, purpose: str, migration: str, now_s: float
    ) -> None:
        """Raise ConsentError unless the token is signed by `issuer` for this audience, purpose, migration."""
        from cryptography.exceptions import InvalidSignature  # present: `public` is one of its keys

        try:
            public.verify(self.signature, self.claims.encode())
        except InvalidSignature as err:
            raise ConsentError(f"token: signature of {issuer!r} does not verify") from err
        claims = json.loads(self.claims)
        expected = {"iss": issuer, "aud": audience, "purpose": purpose, "migration": migration}
        for key, value in expected.items():
            if claims.get(key) != value:
                raise ConsentError(f"token: {key} is {claims.get(key)!r}, expected {value!r}")
        if claims["exp"] < now_s:
            raise ConsentError("token: expired")


@dataclass(frozen=True)
class VmProfile:
    """What the source discloses about a VM: size, labels and its network identity, no placement."""

    name: str
    memory_bytes: int
    vcpus: int
    labels: tuple[str, ...]
    mac: str
    ip: str


@dataclass(frozen=True)
class Ticket:
    """What the source receives on admission: an opaque id and the destination's signed token."""

    ticket_id: str
    token: Token


@dataclass(frozen=True)
class AdmissionPolicy:
    """A destination's rules: how many VMs and how much memory it takes in, which labels it allows."""

    max_vms: int = 1000
    max_memory_bytes: int = 1 << 50
    host_memory_bytes: int = 1 << 40
    allowed_labels: tuple[str, ...] | None = None


@dataclass
class Cloud:
    """One autonomous cloud: its hosts (names and underlay addresses stay inside), key, policy, log."""

    name: str
    hosts: list[str]
    underlay: dict[str, str]
    policy: AdmissionPolicy = field(default_factory=AdmissionPolicy)
    seed: int = 0
    # each record: time_s, cloud, event, then that event's own fields (free-form, as logged)
    log: list[dict[str, Any]] = field(default_factory=list)
    running: dict[str, str] = field(default_factory=dict)  # VM -> host, where it runs here
    reserved: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # ticket -> (vm, host, memory)
    used_memory: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(f"cloudtwin-mobility/{self.seed}/{self.name}".encode()).digest()
        with needs_extra("mobility", "live migration consent", MobilityError):  # cryptography
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        self.key = Ed25519PrivateKey.from_private_bytes(digest)
        self.public_key = self.key.public_key()
        self._counter = 0

    def record(self, now_s: float, event: str, **fields: Any) -> None:
        """Log one event of this cloud's side."""
        self.log.append({"time_s": now_s, "cloud": self.name, "event": event, **fields})

    def place(self, vm: str, host: str, memory_bytes: int) -> None:
        """A VM already runs here (scenario start)."""
        self.running[vm] = host
        self.used_memory[host] = self.used_memory.get(host, 0) + memory_bytes

    # -- destination side --------------------------------------------------------------

    def admit(
        self,
        profile: VmProfile,
        source: str,
        source_token: Token,
        source_key: Ed25519PublicKey,
        migration: str,
        now_s: float,
    ) -> Ticket:
        """Check the source and the policy, pick a host, reserve it; an opaque ticket back."""
        source_token.verify(source_key, source, self.name, "migrate-request", migration, now_s)
        reason = self._refusal(profile)
        if reason:
            self.record(now_s, "admission-refused", migration=migration, source=source, reason=reason)
            raise ConsentError(f"{self.name}: admission refused: {reason}")
        host = self._pick_host(profile.memory_bytes)
        if host is None:
            self.record(now_s, "admission-refused", migration=migration, source=source, reason="no capacity")
            raise ConsentError(
                f"{self.name}: admission refused: no host has {profile.memory_bytes} bytes free"
            )
        self._counter += 1
        ticket_id = hashlib.sha256(
            f"{self.name}/{self.seed}/{migration}/{self._counter}".encode()
        ).hexdigest()[:16]
        self.reserved[ticket_id] = (profile.name, host, profile.memory_bytes)
        self.used_memory[host] = self.used_memory.get(host, 0) + profile.memory_bytes
        self.record(
            now_s,
            "admitted",
            migration=migration,
            source=source,
            ticket=ticket_id,
            host=host,
            underlay=self.underlay[host],
            vm=profile.name,
            mac=profile.mac,
            ip=profile.ip,
        )
        token = Token.issue(self.key, self.name, source, "migrate-admit", migration, now_s)
        return Ticket(ticket_id, token)

    def _refusal(self, profile: VmProfile) -> str:
        incoming = len(self.reserved)
        if len(self.running) + incoming >= self.policy.max_vms:
            return f"quota of {self.policy.max_vms} VMs reached"
        if sum(self.used_memory.values()) + profile.memory_bytes > self.policy.max_memory_bytes:
            return "memory quota exceeded"
        allowed = self.policy.allowed_labels
        if allowed is not None and not set(profile.labels) <= set(allowed):
            return f"labels {sorted(set(profile.labels) - set(allowed))} not allowed"
        return ""

    def _pick_host(self, memory_bytes: int) -> str | None:
        free = [(self.policy.host_memory_bytes - self.used_memory.get(h, 0), h) for h in self.hosts]
        fitting = [(-room, h) for room, h in free if room >= memory_bytes]
        return min(fitting)[1] if fitting else None

    def host_of_ticket(self, ticket_id: str) -> str:
        """The destination's own lookup (never shown to the source)."""
        return self.reserved[ticket_id][1]

    def activate(self, ticket_id: str, now_s: float) -> None:
        vm, host, _ = self.reserved.pop(ticket_id)
        self.running[vm] = host
        self.record(now_s, "vm-started", ticket=ticket_id, vm=vm, host=host)

    def release(self, ticket_id: str, now_s: float, reason: str) -> None:
        if ticket_id in self.reserved:
            vm, host, memory = self.reserved.pop(ticket_id)
            self.used_memory[host] -= memory
            self.record(now_s, "reservation-released", ticket=ticket_id, vm=vm, host=host, reason=reason)


@dataclass
class Transaction:
    """One migration between `source` and `destination`, phase by phase."""

    migration: str
    vm: str
    source: Cloud
    destination: Cloud
    profile: VmProfile
    phase: Phase = Phase.REQUESTED
    ticket: Ticket | None = None
    paused: bool = False

    def request(self, now_s: float) -> None:
        """The source asks; the destination decides. ConsentError when it refuses or a proof fails."""
        source, destination = self.source, self.destination
        if self.vm not in source.running:
            raise ConsentError(f"{source.name}: VM {self.vm!r} does not run here")
        token = Token.issue(
            source.key, source.name, destination.name, "migrate-request", self.migration, now_s
        )
        source.record(
            now_s,
            "migration-requested",
            migration=self.migration,
            vm=self.vm,
            host=source.running[self.vm],
            underlay=source.underlay[source.running[self.vm]],
            destination=destination.name,
        )
        try:
            ticket = destination.admit(
                self.profile, source.name, token, source.public_key, self.migration, now_s
            )
            ticket.token.verify(
                destination.public_key, destination.name, source.name, "migrate-admit", self.migration, now_s
            )
        except ConsentError as err:
            self.phase = Phase.ABORTED
            source.record(now_s, "migration-refused", migration=self.migration, vm=self.vm, reason=str(err))
            raise
        self.ticket = ticket
        self.phase = Phase.ADMITTED
        source.record(now_s, "ticket-received", migration=self.migration, ticket=ticket.ticket_id)

    def start_transfer(self, now_s: float) -> None:
        self._expect(Phase.ADMITTED)
        self.phase = Phase.TRANSFERRING
        self.source.record(now_s, "transfer-started", migration=self.migration, stream="protected")
        self.destination.record(now_s, "transfer-receiving", ticket=self._ticket_id)

    def pause_source(self, now_s: float) -> None:
        """Stop-and-copy begins: the source pauses the VM (it still exists only there)."""
        self._expect(Phase.TRANSFERRING)
        self.phase = Phase.SWITCHING
        self.paused = True
        self.source.record(now_s, "vm-paused", migration=self.migration, vm=self.vm)

    def commit(self, now_s: float) -> None:
        """The last bytes arrived: the destination starts the VM, then the source drops its copy."""
        self._expect(Phase.SWITCHING)
        self.destination.activate(self._ticket_id, now_s)
        host = self.source.running.pop(self.vm)
        self.source.used_memory[host] -= self.profile.memory_bytes
        self.source.record(
            now_s, "vm-handed-over", migration=self.migration, vm=self.vm, destination=self.destination.name
        )
        self.phase = Phase.COMMITTED
        self.paused = False

    def abort(self, now_s: float, reason: str) -> None:
        """Any phase before commit: the VM goes on (or resumes) at the source; the reservation goes."""
        if self.phase in (Phase.COMMITTED, Phase.ABORTED):
            return
        if self.ticket is not None:
            self.destination.release(self.ticket.ticket_id, now_s, reason)
        if self.paused:
            self.source.record(now_s, "vm-resumed", migration=self.migration, vm=self.vm)
            self.paused = False
        self.source.record(now_s, "migration-aborted", migration=self.migration, vm=self.vm, reason=reason)
        self.phase = Phase.ABORTED

    def running_copies(self) -> int:
        """How many copies of the VM run now (paused does not count as running)."""
        here = self.vm in self.source.running and not self.paused
        there = self.vm in self.destination.running
        return int(here) + int(there)

    @property
    def _ticket_id(self) -> str:
        assert self.ticket is not None
        return self.ticket.ticket_id

    def _expect(self, phase: Phase) -> None:
        if self.phase != phase:
            raise MobilityError(f"migration {self.migration}: cannot go on from phase {self.phase.value}")
