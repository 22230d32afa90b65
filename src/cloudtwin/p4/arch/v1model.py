"""v1model on the interpreter core, with bmv2 simple_switch's semantics.

A packet runs the parser (a parser error does not drop it: `standard_metadata.parser_error`
says which), verifyChecksum, ingress; then a non-zero `mcast_grp` sends one copy per member
of that multicast group (`egress_rid` its replication id), else `egress_spec` 511 drops it,
else it goes to port `egress_spec`. Each copy runs egress (with `egress_port` set and
`egress_spec` reset to 0; `egress_spec` 511 at its end drops it), computeChecksum and the
deparser. Externs: `mark_to_drop`, `verify_checksum`/`update_checksum` (csum16), `hash`
(crc16, crc32).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.arch.externs import register
from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.context import Context, as_bool
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.values import as_column

__all__ = ["DROP_PORT", "INSTANCE_NORMAL", "INSTANCE_REPLICATION", "Replication", "process"]

DROP_PORT = 511
"""simple_switch's drop port: `egress_spec` set to it (by `mark_to_drop`) drops the packet."""

INSTANCE_NORMAL, INSTANCE_REPLICATION = 0, 5
"""`standard_metadata.instance_type` of an original packet and of a multicast copy."""

_STD = "standard_metadata"


@dataclass
class Replication:
    """The packet replication engine's multicast groups: group -> [(rid, port), ...]."""

    groups: dict[int, list[tuple[int, int]]] = field(default_factory=dict)


def _put(ctx: Context, name: str, value: Any, mask: np.ndarray | None = None) -> None:
    ctx.put(f"{_STD}.{name}", value, np.ones(ctx.n, dtype=bool) if mask is None else mask)


def process(dp: Datapath, batch: PacketBatch, engine: Replication) -> list[list[tuple[int, bytes]]]:
    """Each packet of `batch` through the pipeline: the (port, bytes) it sends out, in order."""
    ctx = dp.context(batch)
    _put(ctx, "ingress_port", batch.input_port.astype(np.uint64))
    _put(ctx, "packet_length", batch.length.astype(np.uint64))
    dp.parser(ctx)
    if ctx.error is not None:
        _put(ctx, "parser_error", ctx.error)
    everyone = np.ones(ctx.n, dtype=bool)
    verify, ingress, egress, compute = (c.name for c in dp.program.controls)
    dp.run_block(verify, ctx, everyone)
    dp.run_block(ingress, ctx, everyone)
    rows, ports, rids, kinds = _replicate(ctx, engine)
    out: list[list[tuple[int, bytes]]] = [[] for _ in range(ctx.n)]
    if not rows:
        return out
    copies = ctx.take(np.array(rows, dtype=np.int64))
    _put(copies, "egress_port", np.array(ports, dtype=np.uint64))
    _put(copies, "egress_rid", np.array(rids, dtype=np.uint64))
    _put(copies, "instance_type", np.array(kinds, dtype=np.uint64))
    _put(copies, "egress_spec", 0)
    alive = np.ones(copies.n, dtype=bool)
    dp.run_block(egress, copies, alive)
    alive &= copies.get(f"{_STD}.egress_spec") != DROP_PORT
    dp.run_block(compute, copies, alive)
    dp.run_block(dp.program.deparser.name, copies, alive)  # its statements besides the emits
    data, length = dp.deparse(copies, alive)
    for i in np.flatnonzero(alive).tolist():
        out[rows[i]].append((ports[i], data[i, : length[i]].tobytes()))
    return out


def _replicate(ctx: Context, engine: Replication) -> tuple[list[int], list[int], list[int], list[int]]:
    """After ingress: the rows that go on to egress, with their port, rid and instance type."""
    spec = ctx.get(f"{_STD}.egress_spec").tolist()
    groups = ctx.get(f"{_STD}.mcast_grp").tolist()
    rows, ports, rids, kinds = [], [], [], []
    for row in range(ctx.n):
        if groups[row]:
            for rid, port in engine.groups.get(int(groups[row]), []):
                rows.append(row)
                ports.append(port)
                rids.append(rid)
                kinds.append(INSTANCE_REPLICATION)
        elif spec[row] != DROP_PORT:
            rows.append(row)
            ports.append(int(spec[row]))
            rids.append(0)
            kinds.append(INSTANCE_NORMAL)
    return rows, ports, rids, kinds


# externs --------------------------------------------------------------------------------
@register("v1model", "mark_to_drop")
def _mark_to_drop(compiler: Any, args: list[Tree], node: Tree) -> Any:
    if len(args) != 1:
        raise compiler.fail(node, "mark_to_drop takes standard_metadata")
    target = ".".join(compiler.path(args[0].children[0])) if args[0].data == "ref" else ""
    if target != _STD:
        raise compiler.fail(node, "mark_to_drop takes the standard_metadata parameter")

    def run(ctx: Context, mask: np.ndarray) -> None:
        _put(ctx, "egress_spec", DROP_PORT, mask)
        _put(ctx, "mcast_grp", 0, mask)

    return run


def _csum16_args(
    compiler: Any, args: list[Tree], node: Tree, what: str, payload: bool = False
) -> tuple[Any, Any, Tree]:
    if len(args) != 4 or args[1].data != "list_expr":
        raise compiler.fail(node, f"{what}(condition, {{fields}}, checksum, algorithm) is expected")
    algorithm = args[3]
    names = [str(t) for t in algorithm.children[0].children] if algorithm.data == "ref" else []
    if names != ["HashAlgorithm", "csum16"]:
        raise compiler.fail(algorithm, f"{what}: only HashAlgorithm.csum16 is supported")
    fields = [a for a in args[1].children if a is not None]
    return compiler.expr(args[0]), compiler.checksum(fields, node, payload), args[2]


@register("v1model", "update_checksum_with_payload")
def _update_checksum_with_payload(compiler: Any, args: list[Tree], node: Tree) -> Any:
    """update_checksum over the fields and then the payload (the bytes after the headers
    the parser took), as simple_switch computes it."""
    return _update(compiler, args, node, payload=True)


@register("v1model", "verify_checksum_with_payload")
def _verify_checksum_with_payload(compiler: Any, args: list[Tree], node: Tree) -> Any:
    return _verify(compiler, args, node, payload=True)


@register("v1model", "update_checksum")
def _update_checksum(compiler: Any, args: list[Tree], node: Tree) -> Any:
    return _update(compiler, args, node)


def _update(compiler: Any, args: list[Tree], node: Tree, payload: bool = False) -> Any:
    condition, checksum, target = _csum16_args(compiler, args, node, "update_checksum", payload)
    if target.data != "ref":
        raise compiler.fail(target, "update_checksum: the checksum must be a field")
    key, _ = compiler.lvalue(target.children[0])

    def run(ctx: Context, mask: np.ndarray) -> None:
        rows = mask & as_bool(condition.fn(ctx, mask), ctx)
        if rows.any():
            ctx.put(key, checksum.fn(ctx, rows), rows)

    return run


@register("v1model", "verify_checksum")
def _verify_checksum(compiler: Any, args: list[Tree], node: Tree) -> Any:
    return _verify(compiler, args, node)


def _verify(compiler: Any, args: list[Tree], node: Tree, payload: bool = False) -> Any:
    condition, checksum, target = _csum16_args(compiler, args, node, "verify_checksum", payload)
    stored = compiler.expr(target)

    def run(ctx: Context, mask: np.ndarray) -> None:
        rows = mask & as_bool(condition.fn(ctx, mask), ctx)
        if not rows.any():
            return
        wrong = as_column(checksum.fn(ctx, rows), ctx.n, 16) != as_column(stored.fn(ctx, rows), ctx.n, 16)
        _put(ctx, "checksum_error", 1, rows & wrong)

    return run


def _crc16(data: bytes) -> int:
    """CRC-16/ARC, bmv2's `crc16` (polynomial 0x8005 reflected, initial 0, no final XOR)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


_HASHES: dict[str, Callable[[bytes], int]] = {"crc16": _crc16, "crc32": zlib.crc32}
"""The hash algorithms computed here, as bmv2 computes them (crc32 is zlib's CRC-32)."""


@register("v1model", "hash")
def _hash(compiler: Any, args: list[Tree], node: Tree) -> Any:
    """hash(result, algorithm, base, {fields}, max): result = base + hash(fields) % max, the
    fields concatenated into whole bytes."""
    if len(args) != 5 or args[3].data != "list_expr":
        raise compiler.fail(node, "hash(result, HashAlgorithm.x, base, {fields}, max) is expected")
    names = [str(t) for t in args[1].children[0].children] if args[1].data == "ref" else []
    algorithm = _HASHES.get(names[-1]) if len(names) == 2 and names[0] == "HashAlgorithm" else None
    if algorithm is None:
        raise compiler.fail(args[1], "hash: only HashAlgorithm.crc16 and crc32 are supported")
    fields = [compiler.expr(a) for a in args[3].children if a is not None]
    widths = [f.width for f in fields]
    if any(w is None for w in widths) or sum(w or 0 for w in widths) % 8:
        raise compiler.fail(args[3], "hash: the fields must have known widths adding up to whole bytes")
    base, limit = compiler.expr(args[2]), compiler.expr(args[4])
    key, _ = compiler.lvalue_of(args[0])
    size = sum(w or 0 for w in widths) // 8
    where = compiler.program.where(node)

    def run(ctx: Context, mask: np.ndarray) -> None:
        columns = [as_column(f.fn(ctx, mask), ctx.n, f.width).tolist() for f in fields]
        bases = as_column(base.fn(ctx, mask), ctx.n, base.width).tolist()
        limits = as_column(limit.fn(ctx, mask), ctx.n, limit.width).tolist()
        out = np.zeros(ctx.n, dtype=object)
        for row in np.flatnonzero(mask).tolist():
            if not limits[row]:
                raise P4Error(f"{where}: hash with max 0 at run time")
            value = 0
            for column, width in zip(columns, widths, strict=True):
                value = (value << (width or 0)) | int(column[row])
            digest = algorithm(value.to_bytes(size, "big"))
            out[row] = int(bases[row]) + digest % int(limits[row])
        ctx.put(key, out, mask)

    return run
