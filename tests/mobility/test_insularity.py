"""The insularity protocol alone: consent on both sides, opaque tickets, one running copy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudtwin.errors import MobilityError
from cloudtwin.mobility.insularity import (
    AdmissionPolicy,
    Cloud,
    ConsentError,
    Phase,
    Ticket,
    Token,
    Transaction,
    VmProfile,
)

GIB = 1 << 30
LABELS = ["pci", "gdpr", "web"]


def _clouds(policy: AdmissionPolicy, seed: int = 0) -> tuple[Cloud, Cloud]:
    east = Cloud("east", ["east-h0", "east-h1"], {"east-h0": "10.0.0.0", "east-h1": "10.0.0.1"}, seed=seed)
    west = Cloud("west", ["west-h0", "west-h1"], {"west-h0": "10.1.0.0", "west-h1": "10.1.0.1"}, policy, seed)
    return east, west


@settings(max_examples=200, deadline=None)
@given(
    max_vms=st.integers(0, 3),
    host_gib=st.integers(1, 16),
    allowed=st.one_of(st.none(), st.lists(st.sampled_from(LABELS), unique=True)),
    vms=st.lists(
        st.tuples(st.integers(1, 8), st.lists(st.sampled_from(LABELS), unique=True, max_size=2)),
        min_size=1,
        max_size=5,
    ),
)
def test_a_transfer_starts_exactly_when_the_destination_consents(
    max_vms: int, host_gib: int, allowed: list[str] | None, vms: list[tuple[int, list[str]]]
) -> None:
    policy = AdmissionPolicy(
        max_vms=max_vms,
        host_memory_bytes=host_gib * GIB,
        allowed_labels=None if allowed is None else tuple(allowed),
    )
    east, west = _clouds(policy)
    free = {"west-h0": host_gib * GIB, "west-h1": host_gib * GIB}
    admitted = 0
    for i, (memory_gib, labels) in enumerate(vms):
        east.place(f"vm{i}", "east-h0", memory_gib * GIB)
        profile = VmProfile(
            f"vm{i}", memory_gib * GIB, 2, tuple(labels), f"52:54:00:00:00:{i:02x}", f"192.168.0.{i}"
        )
        tx = Transaction(f"m{i}", f"vm{i}", east, west, profile)
        expected = (
            admitted < max_vms
            and (allowed is None or set(labels) <= set(allowed))
            and max(free.values()) >= memory_gib * GIB
        )
        if expected:
            tx.request(0.0)
            tx.start_transfer(0.0)
            assert tx.phase == Phase.TRANSFERRING
            host = west.host_of_ticket(tx.ticket.ticket_id)  # type: ignore[union-attr]
            free[host] -= memory_gib * GIB
            admitted += 1
            assert host not in tx.ticket.ticket_id and host not in tx.ticket.token.claims  # type: ignore[union-attr]
        else:
            with pytest.raises(ConsentError):
                tx.request(0.0)
            with pytest.raises(MobilityError):
                tx.start_transfer(0.0)  # no transfer without consent
            assert tx.phase == Phase.ABORTED and tx.running_copies() == 1


@settings(max_examples=100, deadline=None)
@given(steps=st.integers(0, 4), seed=st.integers(0, 50))
def test_an_abort_after_any_step_leaves_exactly_one_running_copy(steps: int, seed: int) -> None:
    east, west = _clouds(AdmissionPolicy(), seed)
    east.place("vm", "east-h1", GIB)
    tx = Transaction("m", "vm", east, west, VmProfile("vm", GIB, 1, (), "52:54:00:00:00:01", "192.168.0.2"))
    actions = [tx.request, tx.start_transfer, tx.pause_source, tx.commit]
    for number, action in enumerate(actions[:steps]):
        action(float(number))
        assert tx.running_copies() <= 1  # never two
    tx.abort(10.0, "test")
    assert tx.running_copies() == 1
    committed = steps == len(actions)
    assert ("vm" in west.running) == committed and ("vm" in east.running) != committed
    assert not west.reserved


SOURCE_TOKENS = {
    "another key": lambda east, mallory: Token.issue(
        mallory.key, "east", "west", "migrate-request", "m0", 0.0
    ),
    "another audience": lambda east, _: Token.issue(east.key, "east", "north", "migrate-request", "m0", 0.0),
    "another purpose": lambda east, _: Token.issue(east.key, "east", "west", "migrate-admit", "m0", 0.0),
    "another migration": lambda east, _: Token.issue(east.key, "east", "west", "migrate-request", "m9", 0.0),
    "expired": lambda east, _: Token.issue(east.key, "east", "west", "migrate-request", "m0", -1000.0),
}


@pytest.mark.parametrize("kind", sorted(SOURCE_TOKENS))
def test_the_destination_admits_nothing_without_the_sources_proof(kind: str) -> None:
    east, west = _clouds(AdmissionPolicy())
    mallory = Cloud("east", ["x"], {"x": "1.1.1.1"}, seed=99)
    profile = VmProfile("vm", GIB, 1, (), "52:54:00:00:00:01", "192.168.0.2")
    with pytest.raises(ConsentError, match="^token: "):
        west.admit(profile, "east", SOURCE_TOKENS[kind](east, mallory), east.public_key, "m0", 0.0)
    assert not west.reserved and not west.log


def test_the_source_starts_nothing_on_a_ticket_the_destination_did_not_sign(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    east, west = _clouds(AdmissionPolicy())
    east.place("vm", "east-h0", GIB)
    impostor = Cloud("west", ["y"], {"y": "2.2.2.2"}, seed=99)  # answers for west with another key

    def forged_admit(*args: object, **kwargs: object) -> Ticket:
        return Ticket("0" * 16, Token.issue(impostor.key, "west", "east", "migrate-admit", "m", 0.0))

    monkeypatch.setattr(west, "admit", forged_admit)
    tx = Transaction("m", "vm", east, west, VmProfile("vm", GIB, 1, (), "52:54:00:00:00:01", "192.168.0.2"))
    with pytest.raises(ConsentError, match="signature of 'west'"):
        tx.request(0.0)
    with pytest.raises(MobilityError):
        tx.start_transfer(0.0)
    assert tx.phase == Phase.ABORTED and tx.ticket is None and tx.running_copies() == 1
    assert [r["event"] for r in east.log] == ["migration-requested", "migration-refused"]
