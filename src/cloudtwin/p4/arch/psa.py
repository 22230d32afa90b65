"""PSA on the interpreter core, with bmv2 psa_switch's semantics.

A packet runs the ingress parser (a parser error does not drop it: `istd.parser_error`
says which), the ingress control with `psa_ingress_output_metadata_t` initialised as PSA
says (`drop` true, `multicast_group` 0, ...), and the ingress deparser. Then, unless
`drop`: a non-zero `multicast_group` sends one copy per member of the group (`instance`
its replication id, `packet_path` NORMAL_MULTICAST), else one copy goes to `egress_port`
(NORMAL_UNICAST). Each copy is parsed again by the egress parser (headers and user
metadata start afresh: nothing is bridged), runs the egress control (`drop` false) and
the egress deparser, and leaves by its `egress_port` unless dropped. A resubmit (unless
`drop`) sends the packet as it came in through ingress again with `packet_path` RESUBMIT
(at most MAX_RESUBMITS times). Clones and recirculations are refused when a packet asks
for one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cloudtwin.errors import P4Error
from cloudtwin.p4.arch.v1model import Replication
from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.context import Context
from cloudtwin.p4.datapath import Datapath

__all__ = [
    "MAX_RESUBMITS",
    "PATH_NORMAL",
    "PATH_NORMAL_MULTICAST",
    "PATH_NORMAL_UNICAST",
    "PATH_RESUBMIT",
    "PORT_RECIRCULATE",
    "process",
]

PATH_NORMAL, PATH_NORMAL_UNICAST, PATH_NORMAL_MULTICAST, PATH_RESUBMIT = 0, 1, 2, 5
"""`PSA_PacketPath_t` codes (its members' positions in psa.p4)."""

MAX_RESUBMITS = 8
"""The most times one packet may be resubmitted (a program resubmitting forever is refused)."""

PORT_RECIRCULATE = 0xFFFFFFFA
"""bmv2 psa.p4's PSA_PORT_RECIRCULATE."""

_IN_PARSER = "psa_ingress_parser_input_metadata_t"
_IN_INPUT = "psa_ingress_input_metadata_t"
_IN_OUTPUT = "psa_ingress_output_metadata_t"
_EG_PARSER = "psa_egress_parser_input_metadata_t"
_EG_INPUT = "psa_egress_input_metadata_t"
_EG_OUTPUT = "psa_egress_output_metadata_t"
_EG_DEPARSER = "psa_egress_deparser_input_metadata_t"


def _put(ctx: Context, key: str, value: Any, mask: np.ndarray | None = None) -> None:
    """Set an architecture field, where the program holds it (a block that takes no such
    parameter has no storage for it)."""
    if key in ctx.widths:
        ctx.put(key, value, np.ones(ctx.n, dtype=bool) if mask is None else mask)


def _get(ctx: Context, key: str) -> np.ndarray:
    return ctx.get(key) if key in ctx.widths else np.zeros(ctx.n, dtype=np.uint64)


def _refuse(dp: Datapath, block: int, rows: np.ndarray, what: str) -> None:
    """P4Error at control `block` (0 ingress, 1 egress) when a row of `rows` asks for `what`."""
    if rows.any():
        control = dp.program.controls[block]
        assert control.apply is not None
        where = dp.program.where(control.apply)
        asks = f"a packet leaves {control.name} asking for {what}"
        raise P4Error(f"{where}: {asks}, outside the supported subset")


def process(dp: Datapath, batch: PacketBatch, engine: Replication) -> list[list[tuple[int, bytes]]]:
    """Each packet of `batch` through ingress, replication and egress: the (port, bytes)
    it sends out, in order."""
    out: list[list[tuple[int, bytes]]] = [[] for _ in range(len(batch))]
    _run(dp, batch, engine, out, np.arange(len(batch)), PATH_NORMAL, 0)
    return out


def _run(
    dp: Datapath,
    batch: PacketBatch,
    engine: Replication,
    out: list[list[tuple[int, bytes]]],
    origin: np.ndarray,
    packet_path: int,
    resubmits: int,
) -> None:
    """`batch` through ingress (`packet_path` NORMAL, or RESUBMIT for the original bytes
    of packets resubmitted, at most MAX_RESUBMITS times), replication and egress; what
    row i sends joins `out[origin[i]]`."""
    ctx = dp.context(batch)
    ports = batch.input_port.astype(np.uint64)
    _put(ctx, f"{_IN_PARSER}.ingress_port", ports)
    _put(ctx, f"{_IN_PARSER}.packet_path", packet_path)
    dp.parser(ctx)
    _put(ctx, f"{_IN_INPUT}.ingress_port", ports)
    _put(ctx, f"{_IN_INPUT}.packet_path", packet_path)
    _put(ctx, f"{_IN_INPUT}.ingress_timestamp", batch.timestamp_ns)
    _put(ctx, f"{_IN_INPUT}.parser_error", 0 if ctx.error is None else ctx.error)
    for name in ("class_of_service", "clone", "clone_session_id", "resubmit", "multicast_group"):
        _put(ctx, f"{_IN_OUTPUT}.{name}", 0)
    _put(ctx, f"{_IN_OUTPUT}.drop", 1)
    everyone = np.ones(ctx.n, dtype=bool)
    ingress, egress = (c.name for c in dp.program.controls)
    dp.run_block(ingress, ctx, everyone)
    drop = _get(ctx, f"{_IN_OUTPUT}.drop") != 0
    _refuse(dp, 0, _get(ctx, f"{_IN_OUTPUT}.clone") != 0, "a clone (ostd.clone)")
    resubmit = ~drop & (_get(ctx, f"{_IN_OUTPUT}.resubmit") != 0)
    if resubmits >= MAX_RESUBMITS:
        _refuse(dp, 0, resubmit, f"a resubmit after {MAX_RESUBMITS} (a loop)")
    dp.run_block(dp.program.deparser.name, ctx, ~drop)  # its statements besides the emits
    if resubmit.any():  # the packet as it came in, through ingress again
        again = np.flatnonzero(resubmit)
        fields = (batch.data, batch.length, batch.direction, batch.input_port, batch.timestamp_ns)
        resubmitted = PacketBatch(*(f[again] for f in fields))
        _run(dp, resubmitted, engine, out, origin[again], PATH_RESUBMIT, resubmits + 1)
    forward = ~drop & ~resubmit
    data, length = dp.deparse(ctx, forward)
    rows, out_ports, instances, paths = _replicate(ctx, forward, engine)
    if not rows:
        return
    at = np.array(rows, dtype=np.int64)
    egress_port = np.array(out_ports, dtype=np.uint64)
    copies = dp.context(PacketBatch.of_rows(data[at], length[at], 0, egress_port, batch.timestamp_ns[at]))
    path = np.array(paths, dtype=np.uint64)
    _put(copies, f"{_EG_PARSER}.egress_port", egress_port)
    _put(copies, f"{_EG_PARSER}.packet_path", path)
    assert dp.egress_parser is not None
    dp.egress_parser(copies)
    _put(copies, f"{_EG_INPUT}.class_of_service", _get(ctx, f"{_IN_OUTPUT}.class_of_service")[at])
    _put(copies, f"{_EG_INPUT}.egress_port", egress_port)
    _put(copies, f"{_EG_INPUT}.packet_path", path)
    _put(copies, f"{_EG_INPUT}.instance", np.array(instances, dtype=np.uint64))
    _put(copies, f"{_EG_INPUT}.egress_timestamp", batch.timestamp_ns[at])
    _put(copies, f"{_EG_INPUT}.parser_error", 0 if copies.error is None else copies.error)
    for name in ("clone", "clone_session_id", "drop"):
        _put(copies, f"{_EG_OUTPUT}.{name}", 0)
    _put(copies, f"{_EG_DEPARSER}.egress_port", egress_port)
    dp.run_block(egress, copies, np.ones(copies.n, dtype=bool))
    _refuse(dp, 1, _get(copies, f"{_EG_OUTPUT}.clone") != 0, "a clone (ostd.clone)")
    alive = _get(copies, f"{_EG_OUTPUT}.drop") == 0
    _refuse(dp, 1, alive & (egress_port == PORT_RECIRCULATE), "a recirculation (PSA_PORT_RECIRCULATE)")
    assert dp.program.egress_deparser is not None
    dp.run_block(dp.program.egress_deparser.name, copies, alive)
    sent, sent_length = dp.deparse(copies, alive, dp.program.egress_emit_order)
    for i in np.flatnonzero(alive).tolist():
        out[int(origin[rows[i]])].append((out_ports[i], sent[i, : sent_length[i]].tobytes()))


def _replicate(
    ctx: Context, forward: np.ndarray, engine: Replication
) -> tuple[list[int], list[int], list[int], list[int]]:
    """After ingress: the rows that go on to egress, with their port, instance and path."""
    groups = _get(ctx, f"{_IN_OUTPUT}.multicast_group").tolist()
    ports = _get(ctx, f"{_IN_OUTPUT}.egress_port").tolist()
    rows, out_ports, instances, paths = [], [], [], []
    for row in np.flatnonzero(forward).tolist():
        if groups[row]:
            for rid, port in engine.groups.get(int(groups[row]), []):
                rows.append(row)
                out_ports.append(port)
                instances.append(rid)
                paths.append(PATH_NORMAL_MULTICAST)
        else:
            rows.append(row)
            out_ports.append(int(ports[row]))
            instances.append(0)
            paths.append(PATH_NORMAL_UNICAST)
    return rows, out_ports, instances, paths
