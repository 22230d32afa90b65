"""PNA's declarations as the front end reads them: the externs a control may instantiate
and the table properties PNA adds, checked when a program has read `pna.p4` itself.

The run-time behaviour of the same externs is in `arch/pna.py` (this module is imported by
the front end, which the interpreter imports, so it holds no run-time code).
"""

from __future__ import annotations

from typing import Any

from lark import Tree

from cloudtwin.p4.program import Extern

__all__ = ["MAX_REGISTER_CELLS", "PNA_EXTERNS", "PNA_TABLE_PROPERTIES", "pna_extern"]

PNA_EXTERNS = frozenset({"DirectCounter", "DirectMeter", "Register", "Hash"})
"""PNA extern objects a control may instantiate (besides Counter and Meter; InternetChecksum
takes no arguments and is read as a plain instance)."""

PNA_TABLE_PROPERTIES = frozenset(
    {
        "add_on_miss",
        "pna_idle_timeout",
        "idle_timeout_with_auto_delete",
        "default_idle_timeout_for_data_plane_added_entries",
        "pna_direct_counter",
        "pna_direct_meter",
    }
)
"""Table properties PNA defines (the examples use them); any other is refused."""

MAX_REGISTER_CELLS = 1 << 20
"""The most cells a PNA Register may declare (held as one array)."""

_HASHES = frozenset({"IDENTITY", "CRC16", "CRC32", "ONES_COMPLEMENT16"})
_UNITS = {"PACKETS": "packets", "BYTES": "bytes", "PACKETS_AND_BYTES": "packets_and_bytes"}
_TYPES = {"bit_type", "bool_type", "named_type"}


def _member(node: Tree, enum: str) -> str | None:
    """`E.X` written as an argument: X when E is `enum`, else None."""
    if node.data != "ref":
        return None
    names = [str(t) for t in node.children[0].children]
    return names[1] if len(names) == 2 and names[0] == enum else None


def pna_extern(checker: Any, node: Tree) -> Extern:
    """The Extern a PNA extern declaration makes; P4Error naming what is wrong with it."""
    kind, name = str(node.children[0]), str(node.children[-1])
    inner = [c for c in node.children[1:-1] if isinstance(c, Tree)]
    types = [c for c in inner if c.data in _TYPES]
    args = [c for c in inner if c.data not in _TYPES]
    if kind in ("DirectCounter", "DirectMeter"):
        enum = "PNA_CounterType_t" if kind == "DirectCounter" else "PNA_MeterType_t"
        unit = _member(args[0], enum) if len(args) == 1 else None
        if unit is None:
            raise checker.fail(node, f"{kind} {name}: takes one {enum} argument")
        return Extern(name, kind, 0, _UNITS[unit])
    if kind == "Register":
        if len(types) != 2 or len(args) not in (1, 2):
            raise checker.fail(node, f"Register {name}: Register<T, S>(size[, initial_value]) is expected")
        if len(args) == 2 and checker.constant(args[1]) != 0:
            raise checker.fail(
                args[1], f"Register {name}: an initial value other than 0 is outside the subset"
            )
        size = checker.constant(args[0])
        if not 1 <= size <= MAX_REGISTER_CELLS:
            raise checker.fail(node, f"Register {name}: size {size} is outside 1..{MAX_REGISTER_CELLS}")
        return Extern(name, "register", size, "cells", checker.width(types[0], f"Register {name}"))
    algorithm = _member(args[0], "PNA_HashAlgorithm_t") if len(args) == 1 and len(types) == 1 else None
    if algorithm is None:
        raise checker.fail(node, f"Hash {name}: Hash<O>(PNA_HashAlgorithm_t.X) is expected")
    if algorithm not in _HASHES:
        what = f"algorithm {algorithm} is outside the supported {', '.join(sorted(_HASHES))}"
        raise checker.fail(node, f"Hash {name}: {what}")
    return Extern(name, "Hash", 0, algorithm, checker.width(types[0], f"Hash {name}"))
