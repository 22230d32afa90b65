"""Tenant isolation, as properties over >= 10,000 random packets and >= 10,000 random
control-request sequences: no packet crosses tenants or reaches the underlay bare, every
packet the entries allow is forwarded, no tenant write lands, and a primary's failover
leaves the tables as they were."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.all import IP, UDP, VXLAN, Ether, Raw
from tests.p4.helpers import shipped

from cloudtwin.errors import NicError
from cloudtwin.p4 import PacketBatch, TableEntry
from cloudtwin.smartnic.control import ControlPlane, Origin, Role, Update, UpdateKind

VNI_OF = {1: 1001, 2: 2002}
MAC_OF = {1: "0a:00:00:00:10:01", 2: "0a:00:00:00:20:01"}
REMOTE_OF = {1: "0a:00:00:00:10:02", 2: "0a:00:00:00:20:02"}
REMOTE = [*REMOTE_OF.values(), "0a:00:00:00:99:99"]
LOCAL_VTEP, PROVIDER_ADDRESSES = "10.0.0.1", ["10.0.0.1", "10.0.0.2", "10.255.0.1"]
EXAMPLES_PER_RUN = 50
PACKETS_PER_EXAMPLE = 210  # 50 x 210 = 10,500 packets
ALLOWED_PER_EXAMPLE = 75  # drawn to be allowed, so more than a third are (others may be too)
SEQUENCES_PER_EXAMPLE = 210  # 50 x 210 = 10,500 control sequences

GATEWAY = shipped("vxlan_gateway")
TENANT_OF_VNI = {vni: fn for fn, vni in VNI_OF.items()}


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _ip(text: str) -> bytes:
    return bytes(int(part) for part in text.split("."))


def frame(src: str, dst: str, ip_dst: str, dport: int, payload: bytes, ip_src: str = "192.168.1.1") -> bytes:
    """Ethernet / IPv4 / UDP / payload, built by hand (scapy per packet is the slow part)."""
    udp = struct.pack("!HHHH", 49152, dport, 8 + len(payload), 0) + payload
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, _ip(ip_src), _ip(ip_dst))
    words = sum(struct.unpack("!10H", head))
    while words >> 16:
        words = (words & 0xFFFF) + (words >> 16)
    head = head[:10] + struct.pack("!H", ~words & 0xFFFF) + head[12:]
    return _mac(dst) + _mac(src) + b"\x08\x00" + head + udp


def vxlan(vni: int, inner: bytes, outer_dst: str = LOCAL_VTEP, src: str = "02:00:0a:00:00:fe") -> bytes:
    """`inner` in VXLAN (VNI `vni`) from the remote VTEP 10.0.0.2 to `outer_dst`."""
    header = struct.pack("!II", 0x08 << 24, vni << 8)
    return frame(src, "02:00:0a:00:00:01", outer_dst, 4789, header + inner, "10.0.0.2")


def test_the_hand_built_frames_are_what_scapy_builds() -> None:
    inner = frame(MAC_OF[1], REMOTE_OF[1], "10.0.0.2", 80, b"abc")
    built = Ether(src=MAC_OF[1], dst=REMOTE_OF[1]) / IP(src="192.168.1.1", dst="10.0.0.2", id=1)
    assert inner == bytes(built / UDP(sport=49152, dport=80, chksum=0) / Raw(b"abc"))
    outer = Ether(dst="02:00:0a:00:00:01", src="02:00:0a:00:00:fe") / IP(src="10.0.0.2", dst=LOCAL_VTEP, id=1)
    assert vxlan(2002, inner) == bytes(
        outer / UDP(sport=49152, dport=4789, chksum=0) / VXLAN(vni=2002) / inner
    )


def random_frames(rng: np.random.Generator) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """Frames from tenants' functions (some forging VXLAN or aiming at provider addresses),
    VXLAN from the network with any VNI, and plain garbage, from every port; and which of
    them the entries allow. ALLOWED_PER_EXAMPLE of them are drawn among the allowed: a
    function's frame to its tenant's remote VM, VXLAN to this VTEP for a local function."""
    frames, directions, ports, allowed = [], [], [], []
    macs = [*MAC_OF.values(), *REMOTE]
    drawn = rng.integers(4, size=PACKETS_PER_EXAMPLE - ALLOWED_PER_EXAMPLE)
    for kind in rng.permutation([4] * ALLOWED_PER_EXAMPLE + drawn.tolist()).tolist():
        src, dst = (macs[i] for i in rng.integers(len(macs), size=2))
        port, direction = int(rng.integers(0, 4)), int(rng.integers(2))
        aim = (str(rng.choice(PROVIDER_ADDRESSES)), int(rng.choice([4789, 80, 179])))
        inner = frame(src, dst, *aim, b"")
        if kind == 4:  # allowed by the entries, one way or the other
            fn, payload = int(rng.integers(1, 3)), bytes(int(rng.integers(0, 64)))
            if direction == 1:
                port, packet = fn, frame(MAC_OF[fn], REMOTE_OF[fn], "10.1.2.3", 80, payload)
            else:
                packet = vxlan(VNI_OF[fn], frame(REMOTE_OF[fn], MAC_OF[fn], "192.168.1.1", 80, payload))
            ok = True
        elif kind == 0:  # a function's frame, to anyone
            packet, direction = frame(src, dst, *aim, bytes(int(rng.integers(0, 64)))), 1
            ok = REMOTE_OF.get(port) == dst
        elif kind == 1:  # VXLAN forged from either side, with any VNI
            vni = int(rng.choice([1001, 2002, 3003]))
            packet = frame(src, dst, LOCAL_VTEP, 4789, struct.pack("!II", 0x08 << 24, vni << 8) + inner)
            owner = REMOTE_OF.get(port) if direction == 1 else MAC_OF.get(TENANT_OF_VNI.get(vni, 0))
            ok = owner == dst
        elif kind == 2:  # VXLAN from the network, to this VTEP or another
            vni, outer_dst = int(rng.choice([1001, 2002])), str(rng.choice([LOCAL_VTEP, "10.0.0.3"]))
            packet, direction = vxlan(vni, inner, outer_dst), 0
            ok = outer_dst == LOCAL_VTEP and MAC_OF[TENANT_OF_VNI[vni]] == dst
        else:  # garbage
            packet, ok = rng.bytes(int(rng.integers(0, 120))), False
        frames.append(packet)
        directions.append(direction)
        ports.append(port)
        allowed.append(ok)
    return frames, np.array(directions), np.array(ports), np.array(allowed)


@pytest.mark.slow
@settings(max_examples=EXAMPLES_PER_RUN, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_no_packet_crosses_tenants_or_reaches_the_underlay_bare(seed: int) -> None:
    frames, directions, ports, allowed = random_frames(np.random.default_rng(seed))
    result = GATEWAY.process(PacketBatch.from_packets(frames, directions, ports))
    forwarded = ~result.dropped
    assert allowed.sum() >= PACKETS_PER_EXAMPLE / 3  # a third at least is allowed ...
    assert forwarded[allowed].all()  # ... and every allowed packet is forwarded
    for i in np.flatnonzero(forwarded):
        out, original = result.packet(i), frames[i]
        assert out is not None
        if directions[i] == 1:  # from a tenant: only ever encapsulated, in its own VNI, to the network
            assert ports[i] in VNI_OF and result.out_port[i] == 0
            assert out[12:14] == b"\x08\x00" and out[23] == 17 and out[36:38] == b"\x12\xb5"  # IPv4/UDP/4789
            assert int.from_bytes(out[46:49], "big") == VNI_OF[ports[i]] and out[26:30] == _ip(LOCAL_VTEP)
            assert out[50:] == original
        else:  # from the network: only to the function that owns the VNI and the MAC
            port = int(result.out_port[i])
            assert original[12:14] == b"\x08\x00" and original[23] == 17 and original[36:38] == b"\x12\xb5"
            assert port in VNI_OF and int.from_bytes(original[46:49], "big") == VNI_OF[port]
            assert original[30:34] == _ip(LOCAL_VTEP) and out[:6] == _mac(MAC_OF[port])
            assert out == original[50:]


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
