"""Tenant isolation, as properties over >= 10,000 random packets and >= 10,000 random
control-request sequences: no packet crosses tenants or reaches the underlay bare, no
tenant write lands, and a primary's failover leaves the tables as they were."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.all import IP, UDP, VXLAN, Ether, Raw
from tests.smartnic.p4_helpers import shipped

from cloudtwin.errors import NicError
from cloudtwin.smartnic.control import ControlPlane, Origin, Role, Update, UpdateKind
from cloudtwin.smartnic.p4 import PacketBatch, TableEntry

VNI_OF = {1: 1001, 2: 2002}
MAC_OF = {1: "0a:00:00:00:10:01", 2: "0a:00:00:00:20:01"}
REMOTE = ["0a:00:00:00:10:02", "0a:00:00:00:20:02", "0a:00:00:00:99:99"]
LOCAL_VTEP, PROVIDER_ADDRESSES = "10.0.0.1", {"10.0.0.1", "10.0.0.2", "10.255.0.1"}
EXAMPLES_PER_RUN = 50
PACKETS_PER_EXAMPLE = 210  # 50 x 210 = 10,500 packets
SEQUENCES_PER_EXAMPLE = 210  # 50 x 210 = 10,500 control sequences

GATEWAY = shipped("vxlan_gateway")


def random_frames(rng: np.random.Generator) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """Frames from tenants' functions (some forging VXLAN or aiming at provider addresses),
    VXLAN from the network with any VNI, and plain garbage, from every port."""
    frames, directions, ports = [], [], []
    macs = [*MAC_OF.values(), *REMOTE]
    for _ in range(PACKETS_PER_EXAMPLE):
        kind = rng.integers(4)
        src, dst = (macs[i] for i in rng.integers(len(macs), size=2))
        inner = (
            Ether(src=src, dst=dst)
            / IP(dst=str(rng.choice(sorted(PROVIDER_ADDRESSES))))
            / UDP(dport=int(rng.choice([4789, 80, 179])))
        )
        if kind == 0:
            frame, direction = inner / Raw(bytes(int(rng.integers(0, 64)))), 1
        elif kind == 1:
            vni = int(rng.choice([1001, 2002, 3003]))
            frame = Ether(src=src, dst=dst) / IP(dst=LOCAL_VTEP) / UDP(dport=4789) / VXLAN(vni=vni) / inner
            direction = int(rng.integers(2))
        elif kind == 2:
            vni = int(rng.choice([1001, 2002]))
            outer = IP(src="10.0.0.2", dst=str(rng.choice([LOCAL_VTEP, "10.0.0.3"])))
            frame, direction = Ether() / outer / UDP(dport=4789) / VXLAN(vni=vni) / inner, 0
        else:
            frame, direction = Raw(rng.bytes(int(rng.integers(0, 120)))), int(rng.integers(2))
        frames.append(bytes(frame))
        directions.append(direction)
        ports.append(int(rng.integers(0, 4)))
    return frames, np.array(directions), np.array(ports)


@pytest.mark.slow
@settings(max_examples=EXAMPLES_PER_RUN, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_no_packet_crosses_tenants_or_reaches_the_underlay_bare(seed: int) -> None:
    frames, directions, ports = random_frames(np.random.default_rng(seed))
    result = GATEWAY.process(PacketBatch.from_packets(frames, directions, ports))
    for i in np.flatnonzero(~result.dropped):
        out = Ether(result.packet(i))
        if directions[i] == 1:  # from a tenant: only ever encapsulated, in its own VNI, to the network
            assert ports[i] in VNI_OF and result.out_port[i] == 0
            assert out.haslayer(VXLAN) and out[VXLAN].vni == VNI_OF[ports[i]]
            assert out[IP].src == LOCAL_VTEP and out[UDP].dport == 4789
            assert bytes(out[VXLAN].payload) == frames[i]
        else:  # from the network: only to the function that owns the VNI and the MAC
            port = int(result.out_port[i])
            original = Ether(frames[i])
            assert port in VNI_OF and original[VXLAN].vni == VNI_OF[port]
            assert original[IP].dst == LOCAL_VTEP and out.dst == MAC_OF[port]
            assert result.packet(i) == bytes(original[VXLAN].payload)


def snapshot(plane: ControlPlane) -> dict[str, list[TableEntry]]:
    return {name: list(state.entries) for name, state in plane.datapath.tables.items()}


def random_update(rng: np.random.Generator) -> Update:
    table = str(rng.choice(["vf_vni", "vtep", "local_vteps", "vni_function"]))
    kind = UpdateKind(str(rng.choice(["insert", "modify", "delete"])))
    key = int(rng.integers(0, 4))
    if table == "vf_vni":
        entry = TableEntry((key,), "set_vni", (1000 + key, 1, 2))
    elif table == "local_vteps":
        entry = TableEntry((key,), "NoAction")
    elif table == "vtep":
        entry = TableEntry((key, key), "set_vtep", (key, key))
    else:
        entry = TableEntry((key, key), "deliver", (key,))
    return Update(kind, table, entry)


def run_sequence(plane: ControlPlane, rng: np.random.Generator) -> None:
    """Random connects (from both origins), writes by any session, and disconnects."""
    sessions = []
    for _ in range(int(rng.integers(4, 12))):
        op = rng.integers(4)
        if op == 0 or not sessions:
            role = Role(str(rng.choice(["provider", "tenant"])))
            origin = Origin.PCIE_FUNCTION if rng.random() < 0.3 else Origin.MANAGEMENT
            try:
                sessions.append(plane.connect(role, int(rng.integers(0, 5)), origin))
            except NicError as err:
                assert origin == Origin.PCIE_FUNCTION or "already held" in str(err)
                assert origin == Origin.MANAGEMENT or "no path" in str(err)
            continue
        session = sessions[int(rng.integers(len(sessions)))]
        before = snapshot(plane)
        if op == 3:
            was_primary = plane.primary(session.role) == session
            plane.disconnect(session)
            sessions.remove(session)
            assert snapshot(plane) == before  # failover never touches the tables
            if was_primary:
                successor = plane.primary(session.role)
                assert successor is None or successor.election_id < session.election_id
            continue
        updates = [random_update(rng) for _ in range(int(rng.integers(1, 4)))]
        try:
            plane.write(session, updates)
        except NicError:
            assert snapshot(plane) == before  # a refused batch changes nothing
        else:
            assert session.role == Role.PROVIDER, "a tenant write succeeded"
            assert plane.primary(Role.PROVIDER) == session


@pytest.mark.slow
@settings(max_examples=EXAMPLES_PER_RUN, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_control_sequences_keep_tenants_out_and_tables_intact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    datapath = shipped("vxlan_gateway")
    for _ in range(SEQUENCES_PER_EXAMPLE):
        for state in datapath.tables.values():
            state.entries = []
            state.invalidate()
        run_sequence(ControlPlane(datapath), rng)


def test_duplicate_election_id_is_rejected_and_backup_cannot_write() -> None:
    plane = ControlPlane(shipped("vxlan_gateway"))
    primary = plane.connect(Role.PROVIDER, 10)
    backup = plane.connect(Role.PROVIDER, 5)
    with pytest.raises(NicError, match="already held"):
        plane.connect(Role.PROVIDER, 10)
    entry = Update(UpdateKind.INSERT, "local_vteps", TableEntry((7,), "NoAction"))
    with pytest.raises(NicError, match="not the primary"):
        plane.write(backup, [entry])
    before = plane.read("local_vteps")
    plane.write(primary, [entry])
    plane.disconnect(primary)
    assert plane.primary(Role.PROVIDER) == backup and plane.read("local_vteps") == [*before, entry.entry]


def test_a_batch_is_atomic() -> None:
    plane = ControlPlane(shipped("vxlan_gateway"))
    session = plane.connect(Role.PROVIDER, 1)
    good = Update(UpdateKind.INSERT, "local_vteps", TableEntry((7,), "NoAction"))
    bad = Update(UpdateKind.DELETE, "local_vteps", TableEntry((8,), "NoAction"))
    before = plane.read("local_vteps")
    with pytest.raises(NicError, match=r"updates\.1: local_vteps has no entry"):
        plane.write(session, [good, bad])
    assert plane.read("local_vteps") == before


def test_pipeline_swap_stalls_and_is_provider_only() -> None:
    plane = ControlPlane(shipped("vxlan_gateway"), swap_stall_s=0.05)
    tenant = plane.connect(Role.TENANT, 1)
    with pytest.raises(NicError, match="only the provider"):
        plane.set_pipeline(tenant, shipped("parse_only").program)
    provider = plane.connect(Role.PROVIDER, 1)
    datapath = plane.set_pipeline(provider, shipped("parse_only").program)
    assert datapath.tables == {} and plane.stalls_s == [0.05]


def test_no_path_from_a_pcie_function() -> None:
    plane = ControlPlane(shipped("vxlan_gateway"))
    for role in Role:
        with pytest.raises(NicError, match="no path from a PCIe function"):
            plane.connect(role, 1, Origin.PCIE_FUNCTION)
