"""The P4 interpreter: runs a `Program` over a batch of real packets with numpy.

One packet is a batch of one, so the per-packet and batch paths share one meaning.
Every field is a column over the batch (uint64 for bit<N> with N <= 64, Python ints
in object arrays above); control flow is a row mask, so `if`, `select`, table hits
and actions each act on the rows that take them. The parser moves a per-row cursor
over the packet bytes; a packet too short for a header is a parser error, counted and
dropped. The deparser writes the valid emitted headers followed by the unparsed
payload, which is moved as a block per distinct size change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.smartnic.p4.arch.externs import arch_extern
from cloudtwin.smartnic.p4.frontend import ISTD_FIELDS, parse_number
from cloudtwin.smartnic.p4.meter import meter_colours
from cloudtwin.smartnic.p4.pcap import Records, dense_rows
from cloudtwin.smartnic.p4.program import Action, Control, HeaderType, MatchKind, ParserBlock, Program, Table

__all__ = [
    "DENSE_CELLS",
    "BatchResult",
    "Datapath",
    "PacketBatch",
    "SparseCells",
    "TableEntry",
    "compile_program",
]

MAX_PARSER_STEPS = 64
"""A packet still in the parser after this many state visits is rejected (loops)."""

GREEN, YELLOW, RED = 0, 1, 2
_COLOURS = ("GREEN", "YELLOW", "RED")

Value = np.ndarray | int
ExprFn = Callable[["_Ctx", np.ndarray], Value]
StmtFn = Callable[["_Ctx", np.ndarray], None]
ActionFn = Callable[["_Ctx", np.ndarray, list[np.ndarray]], None]

MAX_LOOP_ITERATIONS = 4096
"""The most rounds a `for` loop may run for a packet (more is refused, naming the loop)."""

MAX_ACTION_CALLS = 10_000
"""The most action runs one action may make through the actions it calls (and they call)."""


@dataclass(frozen=True)
class PacketBatch:
    """Packets as a byte matrix: row i holds `length[i]` bytes (or, in a matrix narrower than
    the longest packet, the packet's head: see `Datapath.process`); where each came from and when."""

    data: np.ndarray
    length: np.ndarray
    direction: np.ndarray
    input_port: np.ndarray
    timestamp_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.length.size)

    @classmethod
    def from_packets(
        cls,
        packets: list[bytes],
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch from packet bytes; `direction` 0 is from the network, 1 from the host."""
        laid = Records.of(packets, timestamp_ns)
        times = laid.timestamp_ns
        return cls.from_buffer(laid.buffer, laid.offset, laid.length, direction, input_port, times)

    @classmethod
    def from_buffer(
        cls,
        buffer: np.ndarray,
        offset: np.ndarray,
        length: np.ndarray,
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch of the packets at `buffer[offset[i]:][:length[i]]` (a capture's bytes, read
        in place by `index_pcap`): no Python object per packet."""
        return cls.of_rows(dense_rows(buffer, offset, length), length, direction, input_port, timestamp_ns)

    @classmethod
    def of_rows(
        cls,
        data: np.ndarray,
        length: np.ndarray,
        direction: int | np.ndarray = 0,
        input_port: int | np.ndarray = 0,
        timestamp_ns: np.ndarray | None = None,
    ) -> PacketBatch:
        """A batch of rows already laid out as a byte matrix (row i: `length[i]` bytes, then zeros)."""
        n = length.size
        times = np.zeros(n, dtype=np.uint64) if timestamp_ns is None else np.asarray(timestamp_ns, np.uint64)
        return cls(
            data,
            np.asarray(length, dtype=np.int64),
            np.broadcast_to(np.asarray(direction, dtype=np.uint64), (n,)).copy(),
            np.broadcast_to(np.asarray(input_port, dtype=np.uint64), (n,)).copy(),
            times,
        )


@dataclass(frozen=True)
class BatchResult:
    """What left the pipeline: bytes and output port per packet, or why it did not."""

    data: np.ndarray
    length: np.ndarray
    out_port: np.ndarray
    dropped: np.ndarray
    parser_error: np.ndarray

    def packet(self, i: int) -> bytes | None:
        """Packet i's output bytes, None when it was dropped."""
        if self.dropped[i]:
            return None
        return self.data[i, : self.length[i]].tobytes()

    def packets(self) -> list[bytes | None]:
        return [self.packet(i) for i in range(self.length.size)]


@dataclass(frozen=True)
class TableEntry:
    """An installed entry: one match per key (exact int, (value, prefix), (value, mask))."""

    match: tuple[int | tuple[int, int], ...]
    action: str
    params: tuple[int, ...] = ()
    priority: int = 0


@dataclass
class _TableState:
    table: Table
    widths: tuple[int, ...]
    entries: list[TableEntry] = field(default_factory=list)
    default: tuple[str, tuple[int, ...]] = ("NoAction", ())
    hits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hook: Callable[[_Ctx, np.ndarray, list[np.ndarray], np.ndarray], np.ndarray] | None = None
    _lookup: Callable[[list[np.ndarray]], np.ndarray] | None = None
    _cache: dict[object, np.ndarray] = field(default_factory=dict)

    def invalidate(self) -> None:
        self._lookup = None
        self._cache = {}
        self.hits = np.zeros(len(self.entries), dtype=np.int64)


def _mask_of(width: int) -> int:
    return (1 << width) - 1


def _is_wide(width: int | None) -> bool:
    return width is not None and width > 64


def _column(value: Value, n: int, width: int | None) -> np.ndarray:
    """A value as a full column of the right storage type."""
    wide = _is_wide(width)
    if isinstance(value, np.ndarray):
        if wide and value.dtype != object:
            return value.astype(object)
        if not wide and value.dtype == object:
            return value.astype(np.uint64)
        return value
    if wide:
        out = np.empty(n, dtype=object)
        out[:] = int(value)
        return out
    return np.full(n, int(value), dtype=np.uint64)


def _fit(value: Value, width: int) -> Value:
    """`value` truncated to `width` bits (P4 assignment semantics)."""
    if isinstance(value, (int, np.integer)):
        return int(value) & _mask_of(width)
    if value.dtype == bool:
        value = value.astype(np.uint64)
    if width >= 64 and value.dtype != object:
        return value
    if value.dtype == object:
        out = value & _mask_of(width)
        return out if width > 64 else out.astype(np.uint64)
    return value & np.uint64(_mask_of(width))


@dataclass
class _Ctx:
    """The state of one batch while it runs through the pipeline."""

    n: int
    data: np.ndarray
    length: np.ndarray
    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray]
    widths: dict[str, int]
    cursor: np.ndarray
    parser_error: np.ndarray
    drop: np.ndarray
    port: np.ndarray
    exited: np.ndarray
    any_exit: bool = False  # has any row run `exit` (until then no mask needs narrowing)
    error: np.ndarray | None = None  # each row's parser error code (0: none), once one is set
    returned: np.ndarray | None = None  # rows that ran `return` in the running action/function
    loop_stop: np.ndarray | None = None  # rows that ran `break` or `continue` in this iteration
    broken: np.ndarray | None = None  # rows that ran `break` in the running loop

    def stopped(self, mask: np.ndarray) -> np.ndarray:
        """`mask` without the rows that ran `exit`, or `return` in what is running."""
        if self.any_exit:
            mask = mask & ~self.exited
        if self.returned is not None:
            mask = mask & ~self.returned
        if self.loop_stop is not None:
            mask = mask & ~self.loop_stop
        return mask

    def take(self, rows: np.ndarray) -> _Ctx:
        """A new run state holding copies of rows `rows` (repeats allowed: packet copies)."""
        return _Ctx(
            n=int(rows.size),
            data=self.data[rows],
            length=self.length[rows],
            values={k: v[rows] for k, v in self.values.items()},
            valid={k: v[rows] for k, v in self.valid.items()},
            widths=self.widths,
            cursor=self.cursor[rows],
            parser_error=self.parser_error[rows],
            drop=self.drop[rows],
            port=self.port[rows],
            exited=self.exited[rows],
            error=None if self.error is None else self.error[rows],
        )

    def fail_rows(self, rows: np.ndarray, code: int) -> None:
        """Rows `rows` leave the parser with error `code` (the first error a row meets stays)."""
        fresh = rows & ~self.parser_error
        if not fresh.any():
            return
        if self.error is None:
            self.error = np.zeros(self.n, dtype=np.uint64)
        self.error = np.where(fresh, np.uint64(code), self.error)
        self.parser_error = self.parser_error | fresh

    def get(self, key: str) -> np.ndarray:
        column = self.values.get(key)
        if column is None:
            column = _column(0, self.n, self.widths[key])
            self.values[key] = column
        return column

    def put(self, key: str, value: Value, mask: np.ndarray) -> None:
        width = self.widths[key]
        value = _fit(value, width)
        if mask.all():
            self.values[key] = _column(value, self.n, width)
            return
        old = self.get(key)
        if isinstance(value, int) and old.dtype != object:  # a constant: no column to build
            self.values[key] = np.where(mask, np.uint64(value), old)
            return
        new = _column(value, self.n, width)
        self.values[key] = np.where(mask, new, old)

    def header_valid(self, header: str) -> np.ndarray:
        valid = self.valid.get(header)
        if valid is None:
            valid = np.zeros(self.n, dtype=bool)
            self.valid[header] = valid
        return valid


@dataclass(frozen=True)
class _Expr:
    fn: ExprFn
    width: int | None  # None: an unsized integer literal
    is_bool: bool = False
    constant: bool = False  # known when the program is compiled (fn ignores its arguments)
    signed: bool = False  # an int<N>: its bits (held as bit<N>) read in two's complement


def _const(value: int, width: int | None = None) -> _Expr:
    return _Expr(lambda ctx, mask: value, width, constant=True)


def _sequence_of(steps: list[StmtFn]) -> StmtFn:
    def run(ctx: _Ctx, mask: np.ndarray) -> None:
        for step in steps:
            step(ctx, mask)

    return run


def _pick(ctx: _Ctx, at: np.ndarray, cells: list[str], width: int) -> np.ndarray:
    """Each row's value of `cells[at]` (0 where `at` names no cell)."""
    out = _column(0, ctx.n, width)
    for i, cell in enumerate(cells):
        out = np.where(at == i, ctx.get(cell), out)
    return out


def _last_of(cells: list[str], following: str, width: int) -> ExprFn:
    """A stack's `last.<field>`: each row's field of the element before its nextIndex."""
    return lambda ctx, mask: _pick(ctx, ctx.get(following).astype(np.int64) - 1, cells, width)


def _copy_in(key: str, value: _Expr) -> StmtFn:
    return lambda ctx, mask: ctx.put(key, value.fn(ctx, mask), mask)


def _copy_out(key: str, target: str) -> StmtFn:
    return lambda ctx, mask: ctx.put(target, ctx.get(key), mask)


def _element_of(cells: list[str], index: _Expr, width: int, where: str) -> ExprFn:
    """`s[e].f` read with a run-time index; past the stack it is refused (P4: undefined)."""

    def element(ctx: _Ctx, mask: np.ndarray) -> Value:
        at = _column(index.fn(ctx, mask), ctx.n, index.width)
        if (mask & (at >= np.uint64(len(cells)))).any():
            raise P4Error(f"{where}: header stack index past {len(cells)} elements at run time")
        return _pick(ctx, at.astype(np.int64), cells, width)

    return element


def _short_circuit(left: _Expr, right: _Expr, both: bool) -> ExprFn:
    """`a && b` (`both`) or `a || b`: `b` is evaluated only on the rows `a` leaves undecided,
    so a table applied or a function called in `b` runs on those rows alone."""

    def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
        first = _as_bool(left.fn(ctx, mask), ctx)
        undecided = mask & (first if both else ~first)
        if not undecided.any():
            return first.copy()
        second = _as_bool(right.fn(ctx, undecided), ctx)
        return (first & second) if both else (first | second)

    return fn


def _last_index(following: str) -> ExprFn:
    return lambda ctx, mask: _fit(ctx.get(following) - np.uint64(1), 32)


def _ref(key: str, node: Tree) -> Tree:
    """A `ref` tree naming storage key `key` (the path that a compiled copy reads)."""
    return Tree("ref", [Tree("path", [Token("NAME", part) for part in key.split(".")], node.meta)], node.meta)


def _sized(expr: _Expr, width: int, signed: bool = False) -> _Expr:
    """An unsized literal taken at `width` bits (P4: `8w255 == -1` holds), as an int<N>
    when it meets one."""
    value = _fit(expr.fn(None, None), width)  # type: ignore[arg-type]
    return _Expr(lambda ctx, mask: int(value), width, constant=True, signed=signed)


def _signed_of(value: Value, width: int) -> Any:
    """The bits of an int<`width`> read in two's complement: int64 columns up to 64 bits,
    Python ints (object columns) beyond."""
    half = 1 << (width - 1)
    if isinstance(value, (int, np.integer)):
        number = int(value) & _mask_of(width)
        return number - (1 << width) if number >= half else number
    if width > 64 or value.dtype == object:
        wide = value.astype(object) & _mask_of(width)
        return np.where(wide >= half, wide - (1 << width), wide)
    bits = value.astype(np.uint64) & np.uint64(_mask_of(width))
    if width == 64:
        return bits.view(np.int64)
    return (bits.astype(np.int64) ^ np.int64(half)) - np.int64(half)


def _bits_of(value: Any, width: int) -> Value:
    """A signed number (from `_signed_of` and arithmetic on it) back to its `width` bits."""
    if isinstance(value, (int, np.integer)):
        return int(value) & _mask_of(width)
    if value.dtype == object:
        out = value & _mask_of(width)
        return out if width > 64 else out.astype(np.uint64)
    return value.astype(np.uint64) & np.uint64(_mask_of(width))


def _resize(value: Value, source: int, target: int, signed: bool) -> Value:
    """`value` of `source` bits as `target` bits: sign-extended when it is signed."""
    if signed and target > source:
        return _bits_of(_signed_of(value, source), target)
    return _fit(value, target)


class _Compiler:
    """Turns the program's trees into closures over a batch context."""

    def __init__(self, datapath: Datapath) -> None:
        self.dp = datapath
        self.program = datapath.program
        self.widths = datapath.widths
        self.roles: dict[str, str] = {}
        self.params: dict[str, str] = {}  # action parameter name -> storage key
        self.control: Control | None = None
        self.runners: dict[str, ActionFn] = {}  # each action compiled once
        self.calls: dict[str, int] = {}  # action runs one run of each action makes (itself too)
        self.compiling: list[str] = []  # the actions being compiled, caller first
        self.scopes: list[dict[str, str | int]] = []  # block-local variables and constants
        self.writable: set[str] = set()  # the running action's directional parameters
        self.returns: list[str | None] = []  # where `return` puts its value (None: no value)
        self.inlined: list[Control] = []  # the controls with tables applied so far
        self.loops = 0  # for loops being compiled around the statement at hand

    def fail(self, node: Tree | Token, what: str) -> P4Error:
        if isinstance(node, Token):
            line, column = node.line, node.column
        else:
            line, column = (node.meta.line, node.meta.column) if not node.meta.empty else (0, 0)
        return P4Error(f"{self.program.source}:{line}:{column}: {what}")

    # names -------------------------------------------------------------------------
    def path(self, node: Tree) -> list[str]:
        names = [str(t) for t in node.children]
        if names[0] in self.roles:
            names[0] = self.roles[names[0]]
        return names

    def resolve(self, node: Tree) -> _Expr:
        names = self.path(node)
        key = ".".join(names)
        raw = ".".join(str(t) for t in node.children)
        if len(names) == 1 and names[0] in self.params:
            store = self.params[names[0]]
            return self.load(store)
        local = self.local(names)
        if isinstance(local, int) and len(names) == 1:
            return _const(local)
        if isinstance(local, str):
            key = ".".join([local, *names[1:]])
            if key in self.widths:
                return self.load(key)
            raise self.fail(
                node, f"{raw!r} is not a bit field (a header or struct as a value is outside the subset)"
            )
        if raw in self.program.constants:
            return _const(self.program.constants[raw], self.program.constant_widths.get(raw))
        if f"{key}$len" in self.widths:
            raise self.fail(node, f"{raw}: a varbit field is only extracted, emitted, copied or checksummed")
        if key in self.widths:
            return self.load(key)
        stacked = self.stack_member(key, node)
        if stacked is not None:
            return stacked
        raise self.fail(node, f"unknown name {raw!r}")

    def stack_member(self, key: str, node: Tree) -> _Expr | None:
        """`s.size`, `s.lastIndex` and `s.last.f` of header stack `s` (the element before
        `next`), or None when `key` names none of them."""
        for stack, (htype, size) in self.program.stacks.items():
            if not key.startswith(stack + "."):
                continue
            rest = key[len(stack) + 1 :]
            following = f"{stack}.$next"
            if rest == "size":
                return _const(size, 32)
            if rest == "lastIndex":
                return _Expr(_last_index(following), 32)
            field_name = rest.removeprefix("last.")
            width = dict(htype.fields).get(field_name)
            if rest.startswith("last.") and width is not None:
                cells = [f"{stack}[{i}].{field_name}" for i in range(size)]
                return _Expr(_last_of(cells, following, width), width)
        return None

    def local(self, names: list[str]) -> str | int | None:
        """A variable's storage key (or a local constant's value), innermost scope first."""
        for scope in reversed(self.scopes):
            if names[0] in scope:
                return scope[names[0]]
        owner = self.control or self.program.parser
        if names[0] in owner.variables:
            return f"var.{owner.name}.{names[0]}"
        return None

    def declare_local(self, node: Tree) -> StmtFn:
        """A variable declared in a block: its own storage, 0 (or its initialiser) from here on."""
        type_, name, init = node.children
        owner = (self.control or self.program.parser).name
        self.dp.sites += 1
        key = f"var.{owner}.{name}#{self.dp.sites}"
        type_name = str(type_.children[0]) if type_.data == "named_type" else ""
        if type_name in self.program.headers or type_name in self.program.structs:
            self.declare_composite(key, type_name, node)
            self.scopes[-1][str(name)] = key
            clear = self.clear_composite(key)
            if init is not None and init.data == "list_expr" and type_name in self.program.structs:
                return _sequence_of([clear, self.struct_from_list(key, type_name, init)])
            copy = self.copy_composite(key, init, node) if init is not None else None
            return clear if copy is None else _sequence_of([clear, copy])
        width = self.type_width(type_, str(name))
        self.widths[key] = width
        if self.is_signed(type_):
            self.dp.signed.add(key)
        value = self.expr(init) if init is not None else _const(0, width)
        self.scopes[-1][str(name)] = key
        return lambda ctx, mask: ctx.put(key, value.fn(ctx, mask), mask)

    def declare_constant(self, node: Tree) -> StmtFn:
        """A constant declared in a block: a value of its type's width from here on."""
        type_, name, value = node.children
        named = type_.data == "named_type" and str(type_.children[0]) in self.program.type_widths
        if type_.data == "bit_type" or named:
            return self.declare_local(Tree("var_decl", [type_, name, value], node.meta))
        self.scopes[-1][str(name)] = self.constant(value)
        return lambda ctx, mask: None

    def is_signed(self, node: Tree) -> bool:
        """Whether type `node` is int<N> or a typedef of one."""
        named = node.data == "named_type" and str(node.children[0]) in self.program.signed_types
        return node.data == "int_type" or named

    def type_width(self, node: Tree, what: str) -> int:
        if node.data == "bit_type":
            return parse_number(str(node.children[0].children[0]))[0]
        if node.data == "int_type":
            return parse_number(str(node.children[0]))[0]
        if node.data == "bool_type":
            return 1
        if node.data == "error_type":
            return self.program.type_widths["error"]
        name = str(node.children[0]) if node.data == "named_type" else ""
        width = self.program.type_widths.get(name)
        if width is None:
            raise self.fail(node, f"{what}: type {name or node.data!r} is outside the supported subset")
        return width

    def load(self, key: str) -> _Expr:
        width = self.widths[key]
        return _Expr(lambda ctx, mask: ctx.get(key), width, signed=key in self.dp.signed)

    def key_of(self, node: Tree) -> str:
        """The storage key a dotted path names (a local variable's, or a field's)."""
        names = self.path(node)
        local = self.local(names)
        if isinstance(local, str):
            return ".".join([local, *names[1:]])
        return ".".join(names)

    def composite(self, key: str) -> tuple[list[str], list[str]] | None:
        """A header's or struct's leaves below `key` (field suffixes, header suffixes); None
        when `key` is a bit field or names nothing."""
        if key in self.widths:
            return None
        head = (key + ".", key + "[")
        fields = sorted(k[len(key) :] for k in self.widths if k.startswith(head))
        headers = sorted(k[len(key) :] for k in self.dp.headers if k == key or k.startswith(head))
        return (fields, headers) if fields or headers else None

    def declare_composite(self, base: str, type_name: str, node: Tree, depth: int = 0) -> None:
        """Storage for a local of header or struct type `type_name` at `base`."""
        htype = self.program.headers.get(type_name)
        if htype is not None:
            self.dp.headers[base] = htype
            for fname, width in htype.storage():
                self.widths[f"{base}.{fname}"] = width
            self.dp.signed.update(f"{base}.{fname}" for fname in htype.signed)
            return
        fields = self.program.structs.get(type_name)
        if fields is None or depth > 32:
            raise self.fail(node, f"type {type_name!r} is not a bit<N>, header or struct type")
        for fname, ftype in fields:
            inner = str(ftype.children[0]) if ftype.data == "named_type" else ""
            if inner in self.program.headers or inner in self.program.structs:
                self.declare_composite(f"{base}.{fname}", inner, node, depth + 1)
            else:
                self.widths[f"{base}.{fname}"] = self.type_width(ftype, f"{type_name}.{fname}")
                if self.is_signed(ftype):
                    self.dp.signed.add(f"{base}.{fname}")

    def struct_from_list(self, key: str, type_name: str, init: Tree) -> StmtFn:
        """`S s = {a, b, ...};`: the struct's bit fields, in declaration order."""
        items = [c for c in init.children if c is not None]
        fields = self.program.structs[type_name]
        if len(items) != len(fields) or any(f"{key}.{name}" not in self.widths for name, _ in fields):
            raise self.fail(init, f"a list initialises {type_name}'s bit fields, one value each, in order")
        exprs = [(f"{key}.{name}", self.expr(item)) for (name, _), item in zip(fields, items, strict=True)]

        def init_fields(ctx: _Ctx, mask: np.ndarray) -> None:
            for target, expr in exprs:
                ctx.put(target, expr.fn(ctx, mask), mask)

        return init_fields

    def copy_composite(self, target: str, source: Tree, node: Tree) -> StmtFn:
        """`target = source` for headers and structs: every field, and every header's validity;
        `source` a path of the same shape or a list `{a, b, ...}` of the fields in order."""
        shape = self.composite(target)
        if shape is None:  # a struct without fields (`struct empty_t {}`): nothing to copy
            return lambda ctx, mask: None
        fields, headers = shape
        if source.data == "list_expr":
            items = [c for c in source.children if c is not None]
            if headers != [""] or len(items) != len(fields):
                raise self.fail(node, "a list initialises a header's fields, one value each, in order")
            htype = self.dp.headers[target]
            exprs = [(f"{target}.{f}", self.expr(i)) for (f, _), i in zip(htype.fields, items, strict=True)]

            def init(ctx: _Ctx, mask: np.ndarray) -> None:
                for key, expr in exprs:
                    ctx.put(key, expr.fn(ctx, mask), mask)
                ctx.valid[target] = ctx.header_valid(target) | mask

            return init
        call = source.children[0] if source.data == "call_expr" else None
        if call is not None and call.data == "call" and len(call.children[0].children) == 1:
            name = str(call.children[0].children[0])
            function = self.program.functions.get(name)
            if function is not None and function.returns_type:
                run, value = self.composite_call(name, [a for a in call.children[1:] if a is not None], call)
                return _sequence_of([run, self.copy_composite(target, _ref(value, source), node)])
        if source.data != "ref":
            raise self.fail(node, "a header or struct is assigned from another of its type")
        origin = self.key_of(source.children[0])
        if self.composite(origin) != shape:
            raise self.fail(node, f"{origin} and {target} are not of the same type")

        siblings = self.siblings(target)  # a union member made valid invalidates the others

        def copy(ctx: _Ctx, mask: np.ndarray) -> None:
            for suffix in fields:
                ctx.put(target + suffix, ctx.get(origin + suffix), mask)
            for suffix in headers:
                valid = ctx.header_valid(origin + suffix)
                ctx.valid[target + suffix] = np.where(mask, valid, ctx.header_valid(target + suffix))
            if siblings:
                made = mask & ctx.header_valid(target)
                for other in siblings:
                    ctx.valid[other] = ctx.header_valid(other) & ~made

        return copy

    def lvalue(self, node: Tree) -> tuple[str, int]:
        names = self.path(node)
        if len(names) == 1 and names[0] in self.params:
            if names[0] not in self.writable:
                raise self.fail(node, f"action parameter {names[0]!r} is read-only")
            return self.params[names[0]], self.widths[self.params[names[0]]]
        key = self.key_of(node)
        if key not in self.widths or key.startswith("istd."):
            raise self.fail(node, f"{'.'.join(str(t) for t in node.children)!r} cannot be assigned")
        return key, self.widths[key]

    def header(self, node: Tree) -> str:
        key = self.key_of(node)
        if key not in self.dp.headers:
            raise self.fail(node, f"{key!r} is not a header")
        return key

    # expressions -------------------------------------------------------------------
    def expr(self, node: Tree) -> _Expr:
        kind = node.data
        if kind == "number":
            value, width = parse_number(str(node.children[0]))
            signed = re.match(r"[0-9]+s", str(node.children[0])) is not None  # `4s7`: an int<4>
            value = value if width is None else value & _mask_of(width)
            return _Expr(lambda ctx, mask: value, width, constant=True, signed=signed)
        if kind in ("true", "false"):
            flag = kind == "true"
            return _Expr(lambda ctx, mask: np.full(ctx.n, flag), 1, True)
        if kind == "ref":
            return self.resolve(node.children[0])
        if kind == "call_expr":
            return self.call_expr(node.children[0])
        if kind in _BINARY:
            return self.binary(node, kind)
        if kind in ("lnot", "bnot", "neg"):
            return self.unary(node, kind)
        if kind == "slice_expr":
            base = self.expr(node.children[0])
            hi, lo = (self.constant(c) for c in node.children[1:])
            return self.slice(base, hi, lo, node)
        if kind == "mux":
            return self.mux(node)
        if kind == "member" and node.children[0].data == "index":
            stack, index, field_name, width = self.dynamic_element(node)
            cells = [f"{stack}[{i}].{field_name}" for i in range(self.program.stacks[stack][1])]
            return _Expr(_element_of(cells, index, width, self.program.where(node)), width)
        if kind in ("sat_add", "sat_sub"):
            return self.saturating(node, kind)
        if kind == "member" and isinstance(node.children[0], Tree) and node.children[0].data == "lookahead":
            return self.lookahead(node.children[0], str(node.children[1]))
        if kind == "lookahead":
            return self.lookahead(node)
        if kind == "error_const":
            name = f"error.{node.children[0]}"
            if name not in self.program.constants:
                raise self.fail(node, f"unknown error {name}")
            return _const(self.program.constants[name], self.program.type_widths.get("error"))
        if kind in ("cast", "name_cast"):
            return self.cast(node)
        raise self.fail(node, f"expression {kind} is outside the supported subset")

    def cast(self, node: Tree) -> _Expr:
        """`(bit<N>) e`, `(bool) e`, `(T) e` for a typedef or enum T of bit<N>."""
        target, operand = node.children
        inner = self.expr(operand)
        signed = False
        if isinstance(target, Token):  # a type name
            width = self.program.type_widths.get(str(target))
            if width is None or str(target) == "error":
                raise self.fail(node, f"a cast to {target} is outside the supported subset")
            signed = str(target) in self.program.signed_types
        elif target.data == "int_type":
            width, signed = parse_number(str(target.children[0]))[0], True
        elif target.data == "bool_type":
            if inner.width not in (1, None) and not inner.is_bool:
                raise self.fail(node, "(bool) takes a bit<1>")
            return _Expr(lambda ctx, mask: _as_bool(inner.fn(ctx, mask), ctx), 1, True)
        elif target.data == "bits":
            width = parse_number(str(target.children[0]))[0]
        else:
            what = target.data.removesuffix("_type")
            raise self.fail(node, f"a cast to {what} is outside the supported subset")
        if inner.signed and inner.width is not None:  # int<M> to N bits: sign-extended
            source = inner.width
            return _Expr(
                lambda ctx, mask: _resize(inner.fn(ctx, mask), source, width, True), width, signed=signed
            )
        return _Expr(lambda ctx, mask: _fit(inner.fn(ctx, mask), width), width, signed=signed)

    def dynamic_element(self, node: Tree) -> tuple[str, _Expr, str, int]:
        """`s[e].f` with a run-time index: the stack, the index, the field and its width."""
        base, field_name = node.children
        stack_ref, index = base.children
        stack = self.key_of(stack_ref.children[0]) if stack_ref.data == "ref" else ""
        if stack not in self.program.stacks:
            raise self.fail(node, "indexing something other than a header stack is outside the subset")
        htype, _ = self.program.stacks[stack]
        width = dict(htype.fields).get(str(field_name))
        if width is None:
            raise self.fail(node, f"{htype.name} has no field {field_name}")
        return stack, self.expr(index), str(field_name), width

    def saturating(self, node: Tree, kind: str) -> _Expr:
        """`a |+| b`, `a |-| b` on bit<N>: clamped to 0 .. 2**N - 1 instead of wrapping."""
        left, right = (self.expr(c) for c in node.children)
        signed = left.signed or right.signed
        if left.width is None and right.width is not None:
            left = _sized(left, right.width, signed)
        elif right.width is None and left.width is not None:
            right = _sized(right, left.width, signed)
        width = left.width or right.width
        if width is None or width > 64:
            raise self.fail(node, "saturating arithmetic needs a known width of at most 64 bits")
        # bit<N>: 0 .. 2**N - 1; int<N>: -2**(N-1) .. 2**(N-1) - 1
        low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, _mask_of(width))

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            a = _column(left.fn(ctx, mask), ctx.n, width).astype(object)
            b = _column(right.fn(ctx, mask), ctx.n, width).astype(object)
            if signed:
                a, b = _signed_of(a, width), _signed_of(b, width)
            out = np.clip(a + b if kind == "sat_add" else a - b, low, high)
            return _bits_of(out.astype(object), width)

        return _Expr(fn, width, signed=signed)

    def mux(self, node: Tree) -> _Expr:
        """`c ? a : b`: `a` evaluated on the rows where `c` holds, `b` on the others."""
        cond, left, right = (self.expr(c) for c in node.children)
        if left.width is None and right.width is not None:
            left = _sized(left, right.width)
        elif right.width is None and left.width is not None:
            right = _sized(right, left.width)
        width = max(left.width or 0, right.width or 0) or None
        if width is None:
            raise self.fail(node, "?: needs an operand of known width (cast a literal)")
        is_bool = left.is_bool and right.is_bool

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            chosen = _as_bool(cond.fn(ctx, mask), ctx)
            a = _column(_fit(left.fn(ctx, mask & chosen), width), ctx.n, width)
            b = _column(_fit(right.fn(ctx, mask & ~chosen), width), ctx.n, width)
            out = np.where(chosen, a, b)
            return out.astype(bool) if is_bool else out

        return _Expr(fn, width, is_bool)

    def constant(self, node: Tree) -> int:
        if node.data in ("true", "false"):
            return int(node.data == "true")
        expr = self.expr(node)
        if not expr.constant:
            raise self.fail(node, "a compile-time constant is needed here")
        return int(expr.fn(None, None))  # type: ignore[arg-type]

    def slice(self, base: _Expr, hi: int, lo: int, node: Tree) -> _Expr:
        if hi < lo or (base.width is not None and hi >= base.width):
            raise self.fail(node, f"slice [{hi}:{lo}] is outside bit<{base.width}>")
        width = hi - lo + 1

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            value = base.fn(ctx, mask)
            if isinstance(value, int):
                return (value >> lo) & _mask_of(width)
            shifted = value >> (lo if value.dtype == object else np.uint64(lo))
            return _fit(shifted, width)

        return _Expr(fn, width)

    def unary(self, node: Tree, kind: str) -> _Expr:
        inner = self.expr(node.children[0])
        if kind == "lnot":
            return _Expr(lambda ctx, mask: ~_as_bool(inner.fn(ctx, mask), ctx), 1, True)
        if inner.width is None:  # an unsized literal: exact, fitted where it meets a width
            value = int(inner.fn(None, None))  # type: ignore[arg-type]
            return _const(-value if kind == "neg" else ~value)
        width = inner.width or 64
        signed = inner.signed
        if kind == "bnot":
            return _Expr(
                lambda ctx, mask: _fit(_invert(inner.fn(ctx, mask), width), width), width, signed=signed
            )
        return _Expr(lambda ctx, mask: _fit(_sub(0, inner.fn(ctx, mask), width), width), width, signed=signed)

    def binary(self, node: Tree, kind: str) -> _Expr:
        if kind in ("eq", "ne") and any(self.composite_ref(c) for c in node.children):
            return self.composite_equal(node, kind == "ne")
        left, right = (self.expr(c) for c in node.children)
        if kind in ("land", "lor"):
            return _Expr(_short_circuit(left, right, kind == "land"), 1, True)
        if kind == "concat":
            if left.width is None or right.width is None:
                raise self.fail(node, "++ needs operands of known width (cast the literal)")
            total, shift = left.width + right.width, right.width
            return _Expr(
                lambda ctx, mask: _concat(left.fn(ctx, mask), right.fn(ctx, mask), shift, total), total
            )
        if left.width is None and right.width is None and kind not in _COMPARE:
            a, b = int(left.fn(None, None)), int(right.fn(None, None))  # type: ignore[arg-type]
            if kind in ("div", "mod") and b <= 0:
                raise self.fail(node, "division by a constant that is not positive")
            return _const(int(_BINARY[kind](a, b)))
        shift = kind in ("shl", "shr")
        signed = left.signed or (right.signed and not shift)
        if left.width is None and right.width is not None and not left.is_bool:
            left = _sized(left, right.width, signed)
        elif right.width is None and left.width is not None and not shift:
            right = _sized(right, left.width, signed)
        width = left.width if left.width is not None else right.width
        if left.width is not None and right.width is not None and not shift:
            width = max(left.width, right.width)
        compute = _BINARY[kind]
        if kind in _COMPARE and signed and width is not None:
            return _Expr(_signed_compare(compute, left, right, width), 1, True)
        if kind in _COMPARE:
            return _Expr(
                lambda ctx, mask: _compare(compute, left.fn(ctx, mask), right.fn(ctx, mask), width), 1, True
            )
        w = width or 64
        if kind in ("div", "mod"):
            if signed:
                raise self.fail(node, "/ and % on int<N> are outside the supported subset")
            return _Expr(_divide(kind, left, right, w, self.program.where(node)), width)
        if kind == "shr" and signed:
            return _Expr(_arithmetic_shift(left, right, w), width, signed=True)
        return _Expr(
            lambda ctx, mask: _fit(_arith(kind, left.fn(ctx, mask), right.fn(ctx, mask), w), w),
            width,
            signed=signed,
        )

    def composite_ref(self, node: Tree) -> str | None:
        """The storage key of a header or struct `node` names, or None."""
        if node.data != "ref":
            return None
        key = self.key_of(node.children[0])
        return key if self.composite(key) is not None else None

    def composite_equal(self, node: Tree, negate: bool) -> _Expr:
        """`a == b` on headers or structs of one type: every header both invalid, or both
        valid with equal fields; every other field equal."""
        left, right = (self.composite_ref(c) for c in node.children)
        if left is None or right is None or self.composite(left) != self.composite(right):
            raise self.fail(node, "== and != compare headers or structs of one type only")
        fields, headers = self.composite(left)  # type: ignore[misc]
        owner = {f: max((h for h in headers if f.startswith(h + ".")), key=len, default=None) for f in fields}

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            same = np.ones(ctx.n, dtype=bool)
            valid = {h: (ctx.header_valid(left + h), ctx.header_valid(right + h)) for h in headers}
            for a, b in valid.values():
                same &= a == b
            for f in fields:
                equal = ctx.get(left + f) == ctx.get(right + f)
                h = owner[f]
                same &= equal if h is None else (equal | ~(valid[h][0] | valid[h][1]))
            return ~same if negate else same

        return _Expr(fn, 1, True)

    def call_expr(self, call: Tree) -> _Expr:
        if call.data == "call_member":
            path, *rest = call.children
            member = str(rest[-1])
            names = self.path(path)
            if names[-1] != "apply" or member not in ("hit", "miss"):
                raise self.fail(call, f"only table.apply().hit/.miss, not .{member}")
            apply = self.table_apply(names[:-1], call)
            want_hit = member == "hit"
            return _Expr(lambda ctx, mask: apply(ctx, mask) == want_hit, 1, True)
        path, *args = call.children
        args = [a for a in args if a is not None]
        names = self.path(path)
        if len(names) == 1 and names[0] in self.program.functions:
            function = self.function_call(names[0], args, call)
            if function.width is None:
                raise self.fail(call, f"function {names[0]} returns nothing; it is not a value")
            return function
        union = self.key_of(Tree("path", path.children[:-1], path.meta)) if len(names) > 1 else ""
        if names[-1] == "isValid" and union in self.program.unions:
            members = self.program.unions[union]
            return _Expr(
                lambda ctx, mask: np.logical_or.reduce([ctx.header_valid(m) for m in members]), 1, True
            )
        if names[-1] == "isValid":
            header = self.header(Tree("path", path.children[:-1], path.meta))
            return _Expr(lambda ctx, mask: ctx.header_valid(header).copy(), 1, True)
        if names == ["checksum16"]:
            return self.checksum(args, call)
        if self.dp.pna is not None:
            value = self.dp.pna.value(self, names, args, call)
            if value is not None:
                return value
        if len(names) == 2 and names[1] == "execute":
            return self.meter_execute(names[0], args, call)
        owner = self.control or self.program.parser
        psa_checksum = self.program.architecture == "psa" and len(names) == 2
        if psa_checksum and owner.instances.get(names[0]) == "InternetChecksum" and not args:
            state = f"csum.{owner.name}.{names[0]}"
            self.widths.setdefault(state, 16)
            if names[1] == "get":  # the checksum: the sum's ones' complement
                return _Expr(lambda ctx, mask: ~ctx.get(state) & np.uint64(0xFFFF), 16)
            if names[1] == "get_state":
                return _Expr(lambda ctx, mask: ctx.get(state), 16)
        if len(names) == 2 and names[1] == "read" and names[0] in self.dp.registers and len(args) == 1:
            return self.register_read(names[0], args[0], call)  # PSA's `r.read(index)`
        raise self.fail(call, f"call {'.'.join(names)}(...) is not an expression in the supported subset")

    def varbit_key(self, node: Tree) -> str | None:
        """The storage key of the varbit field `node` names, or None."""
        if node.data != "ref":
            return None
        key = self.key_of(node.children[0])
        return key if f"{key}$len" in self.widths else None

    def checksum_rows(self, args: list[Tree], node: Tree, payload: bool = False) -> _Expr:
        """The ones' complement checksum of fields that include varbit ones (each as long
        as its row's length), and then the payload (the bytes after the parsed headers) when
        `payload`; computed row by row; an odd byte at the end is padded with 0."""
        parts: list[tuple[str | None, _Expr | None]] = []
        for arg in args:
            key = self.varbit_key(arg)
            expr = None if key is not None else self.expr(arg)
            if expr is not None and expr.width is None:
                raise self.fail(arg, "checksum16 takes fields of known width")
            parts.append((key, expr))

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            columns = []
            for key, expr in parts:
                if key is not None:
                    columns.append((ctx.get(key).tolist(), ctx.get(f"{key}$len").tolist()))
                else:
                    assert expr is not None and expr.width is not None
                    column = _column(expr.fn(ctx, mask), ctx.n, expr.width).tolist()
                    columns.append((column, [expr.width] * ctx.n))
            out = np.zeros(ctx.n, dtype=np.uint64)
            for row in np.flatnonzero(mask).tolist():
                value = bits = 0
                for values, lengths in columns:
                    value, bits = (value << int(lengths[row])) | int(values[row]), bits + int(lengths[row])
                if payload:
                    rest = ctx.data[row, int(ctx.cursor[row]) : int(ctx.length[row])].tobytes()
                    value, bits = (value << 8 * len(rest)) | int.from_bytes(rest, "big"), bits + 8 * len(rest)
                if bits % 16:
                    value, bits = value << (16 - bits % 16), bits + 16 - bits % 16
                total = sum((value >> (16 * i)) & 0xFFFF for i in range(bits // 16))
                while total >> 16:
                    total = (total & 0xFFFF) + (total >> 16)
                out[row] = ~total & 0xFFFF
            return out

        return _Expr(fn, 16)

    def checksum(self, args: list[Tree], node: Tree, payload: bool = False) -> _Expr:
        if payload or any(self.varbit_key(a) is not None for a in args):
            return self.checksum_rows(args, node, payload)
        exprs = [self.expr(a) for a in args]
        if any(e.width is None or e.width > 64 for e in exprs):
            raise self.fail(node, "checksum16 takes fields of known width up to 64 bits")
        if sum(e.width for e in exprs) % 16:  # type: ignore[misc]
            raise self.fail(node, "checksum16: the fields must add up to whole 16-bit words")

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            total = np.zeros(ctx.n, dtype=np.uint64)
            offset = 0
            for e in exprs:
                value = _column(e.fn(ctx, mask), ctx.n, e.width)
                total += _words(value, offset, e.width or 0)
                offset += e.width or 0
            while True:
                carry = total >> np.uint64(16)
                if not carry.any():
                    break
                total = (total & np.uint64(0xFFFF)) + carry
            return (~total) & np.uint64(0xFFFF)

        return _Expr(fn, 16)

    # tables, externs, actions --------------------------------------------------------
    def table_apply(self, names: list[str], node: Tree) -> Callable[[_Ctx, np.ndarray], np.ndarray]:
        apply = self.table_apply_runs(names, node)
        return lambda ctx, mask: apply(ctx, mask)[0]

    def table_apply_runs(
        self, names: list[str], node: Tree
    ) -> Callable[[_Ctx, np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Applying a table: each row's hit, and the rows that ran each action."""
        assert self.control is not None
        if len(names) != 1 or names[0] not in self.control.tables:
            raise self.fail(node, f"{'.'.join(names)!r} is not a table of {self.control.name}")
        state = self.dp.tables[names[0]]
        keys = [self.expr(k.expr) for k in state.table.keys]
        if len(state.widths) != len(keys):  # a table of a control applied from another
            if any(k.width is None for k in keys):
                raise self.fail(node, f"table {state.table.name}: a key needs a known width")
            state.widths = tuple(k.width for k in keys if k.width is not None)
            self.dp.initialise(state)
        actions = {a: self.action_runner(a, node) for a in state.table.actions}
        actions.setdefault(state.table.default_action, self.action_runner(state.table.default_action, node))

        for action_name in list(actions):
            action = self.find_action(action_name, node)
            if action is not None and any(action.types):
                what = f"action {action_name} has header or struct parameters"
                raise self.fail(node, f"table {state.table.name}: {what}")
            if action is not None and any(action.directions):
                actions[action_name] = self.bind_directional(action, state.table, actions[action_name], node)

        def apply(ctx: _Ctx, mask: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            values = [k.fn(ctx, mask) for k in keys]
            columns = [_column(v, ctx.n, w) for v, w in zip(values, state.widths, strict=True)]
            index = self.dp.lookup(state, columns, ctx.n)
            if state.hook is not None:  # PNA: entries that expired, keys for add_entry
                index = state.hook(ctx, mask, columns, index)
            hit = (index >= 0) & mask
            if hit.any():
                _add_at(state.hits, index[hit], 1)
            chosen = np.where(hit, index, -1)
            codes = _entry_action_codes(state)
            # each row's action, as its position in the table's action list (-1: a miss)
            taken = np.where(hit, codes[np.maximum(chosen, 0)], -1) if codes.size else chosen
            ran: dict[str, np.ndarray] = {}
            for name, run in actions.items():
                rows = self.dp.rows_for(state, chosen, taken, name, mask)
                if rows is not None:
                    ran[name] = rows[0]
                    run(ctx, rows[0], rows[1])
            return hit, ran

        return apply

    def action_runner(self, name: str, node: Tree) -> ActionFn:
        """The runner of action `name`, compiled once; P4Error when the action reaches itself
        (P4 has no recursion) or one run of it would run more than MAX_ACTION_CALLS actions."""
        cached = self.runners.get(name)
        if cached is not None:
            self.count_calls(name, node)
            return cached
        action = self.find_action(name, node)
        if action is None:
            return lambda ctx, mask, params: None
        if name in self.compiling:
            chain = " -> ".join([*self.compiling[self.compiling.index(name) :], name])
            raise self.fail(node, f"action {name} calls itself ({chain}); P4 actions cannot recurse")
        saved, saved_writable, saved_returns = self.params, self.writable, self.returns
        scope = self.param_scope(action)
        self.params = {p: f"param.{scope}{action.name}.{p}" for p, _ in action.params}
        self.writable = {p for (p, _), d in zip(action.params, action.directions, strict=False) if d}
        self.returns = [None]
        self.compiling.append(name)
        self.calls[name] = 1
        try:
            body = self.block(action.body)
        finally:
            self.compiling.pop()
            self.params, self.writable, self.returns = saved, saved_writable, saved_returns
        keys = [f"param.{scope}{action.name}.{p}" for p, _ in action.params]

        runs = self.dp.action_runs

        def run(ctx: _Ctx, mask: np.ndarray, params: list[np.ndarray]) -> None:
            runs[action.name] = runs.get(action.name, 0) + int(mask.sum())
            for key, value in zip(keys, params, strict=True):
                ctx.values[key] = _column(_fit(value, ctx.widths[key]), ctx.n, ctx.widths[key])
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned

        self.runners[name] = run
        self.count_calls(name, node)
        return run

    def param_scope(self, action: Action) -> str:
        """Where `action`'s parameters are stored: under its control unless it is global."""
        assert self.control is not None
        local = self.control.actions.get(action.name) is action
        return f"{self.control.name}." if local else ""

    def count_calls(self, name: str, node: Tree) -> None:
        """Add the runs of action `name` to the action being compiled, if any."""
        if not self.compiling:
            return
        caller = self.compiling[-1]
        if caller not in self.calls:  # a function, parser or control being inlined
            return
        self.calls[caller] += self.calls[name]
        if self.calls[caller] > MAX_ACTION_CALLS:
            raise self.fail(
                node,
                f"action {caller} runs more than {MAX_ACTION_CALLS:,} actions each time it runs "
                "(actions calling actions several times, nested)",
            )

    def find_action(self, name: str, node: Tree) -> Action | None:
        if name == "NoAction":
            return None
        assert self.control is not None
        action = self.control.actions.get(name) or self.program.global_actions.get(name)
        if action is None:
            raise self.fail(node, f"unknown action {name!r}")
        return action

    def meter_execute(self, name: str, args: list[Tree], node: Tree) -> _Expr:
        assert self.control is not None
        extern = self.control.externs.get(name)
        if extern is None or extern.kind != "Meter" or len(args) != 1:
            raise self.fail(node, f"{name}.execute(index): {name!r} is not a Meter")
        index = self.expr(args[0])
        meter = self.dp.meters[name]
        if self.program.pna_file:  # pna.p4's own PNA_MeterColor_t { RED, GREEN, YELLOW }
            named = [self.program.constants[f"PNA_MeterColor_t.{c}"] for c in _COLOURS]
            codes = np.array(named, dtype=np.uint64)

            def pna_colour(ctx: _Ctx, mask: np.ndarray) -> Value:
                return codes[meter.execute(ctx, mask, index.fn(ctx, mask), index.width)]

            return _Expr(pna_colour, 32)
        if self.program.architecture == "psa":  # PSA_MeterColor_t { RED, GREEN, YELLOW }
            names = (f"PSA_MeterColor_t.{c}" for c in ("GREEN", "YELLOW", "RED"))
            colour = np.array([self.program.constants[n] for n in names], dtype=np.uint64)

            def psa_colour(ctx: _Ctx, mask: np.ndarray) -> Value:
                return colour[meter.execute(ctx, mask, index.fn(ctx, mask), index.width)]

            return _Expr(psa_colour, 32)
        return _Expr(lambda ctx, mask: meter.execute(ctx, mask, index.fn(ctx, mask), index.width), 2)

    # statements ----------------------------------------------------------------------
    def block(self, node: Tree) -> StmtFn:
        self.scopes.append({})
        try:
            stmts = [self.statement(s) for s in node.children]
        finally:
            self.scopes.pop()

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            for stmt in stmts:
                mask = ctx.stopped(mask)  # rows that ran `exit` or `return` run nothing more
                if not mask.any():
                    return
                stmt(ctx, mask)

        return run

    def statement(self, node: Tree) -> StmtFn:
        kind = node.data
        if kind == "block":
            return self.block(node)
        if kind == "empty_stmt":
            return lambda ctx, mask: None
        if kind == "exit_stmt":

            def exit_(ctx: _Ctx, mask: np.ndarray) -> None:
                ctx.exited |= mask
                ctx.any_exit = True

            return exit_
        if kind == "assign":
            return self.assign(node)
        if kind == "opassign_element":
            return self.opassign_element(node)
        if kind == "if_stmt":
            return self.if_stmt(node)
        if kind == "call_stmt":
            return self.call_stmt(node.children[0])
        if kind == "return_stmt":
            return self.return_stmt(node)
        if kind == "switch_stmt":
            return self.switch_stmt(node)
        if kind == "for_stmt":
            return self.for_stmt(node)
        if kind in ("break_stmt", "continue_stmt"):
            if not self.loops:
                raise self.fail(node, f"{kind.removesuffix('_stmt')} outside a for loop")
            stop = kind == "break_stmt"

            def leave(ctx: _Ctx, mask: np.ndarray) -> None:
                assert ctx.loop_stop is not None and ctx.broken is not None
                ctx.loop_stop = ctx.loop_stop | mask
                if stop:
                    ctx.broken = ctx.broken | mask

            return leave
        if kind == "var_decl":
            return self.declare_local(node)
        if kind == "const_decl":
            return self.declare_constant(node)
        raise self.fail(node, f"statement {kind} is outside the supported subset")

    def internet_checksum(self, state: str, method: str, args: list[Tree], node: Tree) -> StmtFn:
        """PSA's InternetChecksum: a running ones' complement sum of 16-bit words (RFC 1624):
        clear, add({fields}), subtract({fields}), set_state(v); `get()` is its complement."""
        self.widths.setdefault(state, 16)
        if method == "clear" and not args:
            return lambda ctx, mask: ctx.put(state, 0, mask)
        if method == "set_state" and len(args) == 1:
            value = self.expr(args[0])
            return lambda ctx, mask: ctx.put(state, value.fn(ctx, mask), mask)
        if method not in ("add", "subtract") or len(args) != 1 or args[0].data != "list_expr":
            raise self.fail(node, f"InternetChecksum.{method}(...) is outside the supported subset")
        words = self.checksum([a for a in args[0].children if a is not None], node)  # ~sum
        add = method == "add"

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            total = _column(words.fn(ctx, mask), ctx.n, 16)
            part = (~total & np.uint64(0xFFFF)) if add else total  # the words' sum, or its complement
            value = ctx.get(state) + part
            value = (value & np.uint64(0xFFFF)) + (value >> np.uint64(16))
            ctx.put(state, (value & np.uint64(0xFFFF)) + (value >> np.uint64(16)), mask)

        return run

    def register_read(self, name: str, index_node: Tree, node: Tree) -> _Expr:
        """`r.read(index)`: the cell's value. An index past the register reads as 0 under
        PSA (a value it leaves unspecified) and is an error at run time otherwise."""
        cells, width = self.dp.registers[name]
        psa = self.program.architecture == "psa"
        where = self.program.where(node)
        index = self.expr(index_node)

        def read(ctx: _Ctx, mask: np.ndarray) -> Value:
            at = _column(index.fn(ctx, mask), ctx.n, index.width)
            outside = at >= np.uint64(cells.size)
            if psa:  # PSA: a read past the register gives an unspecified value, here 0
                mask = mask & ~outside
            elif (mask & outside).any():
                raise P4Error(f"{where}: register {name} index past its {cells.size} cells at run time")
            column = _column(0, ctx.n, width)
            rows = np.flatnonzero(mask)
            column[rows] = cells[at[rows].astype(np.int64)]
            return column

        return _Expr(read, width)

    def for_stmt(self, node: Tree) -> StmtFn:
        """`for (init; condition; update) body`, each row looping on its own: rows whose
        condition fails or that `break` leave, `continue` skips to the update. A loop still
        running after MAX_LOOP_ITERATIONS rounds is refused, naming its line."""
        init, cond, update, body = node.children
        if self.control is None:
            raise self.fail(node, "a for loop in a parser is outside P4 (a parser loops through its states)")
        self.scopes.append({})  # the loop variable lives in the loop
        self.loops += 1
        try:
            first = self.statement(init) if init is not None else None
            test = self.expr(cond) if cond is not None else None
            inner = self.statement(body)
            step = self.statement(update) if update is not None else None
        finally:
            self.loops -= 1
            self.scopes.pop()
        where = self.program.where(node)

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            if first is not None:
                first(ctx, mask)
            saved = ctx.loop_stop, ctx.broken
            ctx.broken = np.zeros(ctx.n, dtype=bool)
            active = mask
            for _ in range(MAX_LOOP_ITERATIONS):
                ctx.loop_stop = None
                active = ctx.stopped(active)
                if test is not None and active.any():
                    active = active & _as_bool(test.fn(ctx, active), ctx)
                if not active.any():
                    break
                ctx.loop_stop = np.zeros(ctx.n, dtype=bool)
                inner(ctx, active)
                active = active & ~ctx.broken
                ctx.loop_stop = None
                if step is not None and active.any():
                    step(ctx, ctx.stopped(active))
            else:
                raise P4Error(f"{where}: a for loop ran more than {MAX_LOOP_ITERATIONS:,} rounds")
            ctx.loop_stop, ctx.broken = saved

        return run

    def register_access(self, name: str, method: str, args: list[Tree], node: Tree) -> StmtFn:
        """v1model `r.read(out value, index)` and `r.write(index, value)`; an index past the
        register is refused when a packet reaches it."""
        cells, width = self.dp.registers[name]
        if len(args) != 2:
            raise self.fail(node, f"{name}.{method} takes two arguments")
        where = self.program.where(node)
        index = self.expr(args[1] if method == "read" else args[0])

        psa = self.program.architecture == "psa"

        def rows_and_cells(ctx: _Ctx, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            at = _column(index.fn(ctx, mask), ctx.n, index.width)
            if psa:  # PSA: a write past the register does nothing
                mask = mask & (at < np.uint64(cells.size))
            elif (mask & (at >= np.uint64(cells.size))).any():
                raise P4Error(f"{where}: register {name} index past its {cells.size} cells at run time")
            rows = np.flatnonzero(mask)
            return rows, at[rows].astype(np.int64)

        if method == "read":
            key, _ = self.lvalue_of(args[0])

            def read(ctx: _Ctx, mask: np.ndarray) -> None:
                rows, at = rows_and_cells(ctx, mask)
                column = _column(0, ctx.n, width)
                column[rows] = cells[at]
                ctx.put(key, column, mask)

            return read
        value = self.expr(args[1])

        def write(ctx: _Ctx, mask: np.ndarray) -> None:
            rows, at = rows_and_cells(ctx, mask)
            cells[at] = _column(_fit(value.fn(ctx, mask), width), ctx.n, width)[rows]

        return write

    def assign_element(self, target: Tree, value_node: Tree) -> StmtFn:
        """`s[e].f = v` with a run-time index `e`; an index past the stack is refused when
        a packet reaches it (P4 leaves what it does undefined)."""
        stack, index, field_name, width = self.dynamic_element(target)
        size = self.program.stacks[stack][1]
        value = self.expr(value_node)
        where = self.program.where(target)

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            at = _column(index.fn(ctx, mask), ctx.n, index.width)
            if (mask & (at >= np.uint64(size))).any():
                raise P4Error(f"{where}: header stack index past {stack}'s {size} elements at run time")
            computed = value.fn(ctx, mask)
            for i in range(size):
                rows = mask & (at == np.uint64(i))
                if rows.any():
                    ctx.put(f"{stack}[{i}].{field_name}", computed, rows)

        return run

    def opassign_element(self, node: Tree) -> StmtFn:
        """`s[e].f op= v` with a run-time index: `e` is evaluated once (it may call a
        function that changes state), kept, and names the element read and written."""
        target, operator, value_node = node.children
        base, field_name = target.children
        stack_ref, index_node = base.children
        index = self.expr(index_node)
        self.dp.sites += 1
        key = f"opassign#{self.dp.sites}"
        self.widths[key] = index.width or 64
        element = Tree("member", [Tree("index", [stack_ref, _ref(key, index_node)], base.meta), field_name],
                       target.meta)
        store = self.assign_element(element, Tree(str(operator), [element, value_node], node.meta))

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            ctx.put(key, _column(index.fn(ctx, mask), ctx.n, index.width), mask)
            store(ctx, mask)

        return run

    def return_stmt(self, node: Tree) -> StmtFn:
        value = node.children[0]
        target = self.returns[-1] if self.returns else None
        if (value is None) != (target is None):
            what = "returns a value" if target is not None else "returns nothing here"
            raise self.fail(node, f"return: the enclosing function {what}")
        if value is not None and target is not None and self.composite(target) is not None:
            copy = self.copy_composite(target, value, node)  # a header or struct returned

            def give(ctx: _Ctx, mask: np.ndarray) -> None:
                copy(ctx, mask)
                ctx.returned = mask.copy() if ctx.returned is None else ctx.returned | mask

            return give
        expr = self.expr(value) if value is not None else None

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            if expr is not None and target is not None:
                ctx.put(target, expr.fn(ctx, mask), mask)
            ctx.returned = mask.copy() if ctx.returned is None else ctx.returned | mask

        return run

    def switch_stmt(self, node: Tree) -> StmtFn:
        """`switch (t.apply().action_run)` on the action each row ran, or on a value."""
        subject, *cases = node.children
        groups: list[tuple[list[Tree], StmtFn]] = []
        labels: list[Tree] = []
        default: StmtFn | None = None
        for case in cases:
            label, body = case.children
            labels.append(label)
            if body is None:
                continue
            compiled = self.block(body)
            if any(lab.data == "sw_default" for lab in labels):
                if len(labels) > 1 or case is not cases[-1]:
                    raise self.fail(case, "switch: default must be the last label, on its own")
                default = compiled
            else:
                groups.append((labels, compiled))
            labels = []
        if labels:
            raise self.fail(node, "switch: the last label has no block")
        choose = self.switch_rows(subject, [g[0] for g in groups], node)
        bodies = [g[1] for g in groups]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            chosen = choose(ctx, mask)
            taken = np.zeros(ctx.n, dtype=bool)
            for rows, body in zip(chosen, bodies, strict=True):
                rows = rows & mask & ~taken
                taken |= rows
                if rows.any():
                    body(ctx, rows)
            rest = ctx.stopped(mask & ~taken)
            if default is not None and rest.any():
                default(ctx, rest)

        return run

    def switch_rows(
        self, subject: Tree, groups: list[list[Tree]], node: Tree
    ) -> Callable[[_Ctx, np.ndarray], list[np.ndarray]]:
        """Each group's rows: the rows whose subject matches one of its labels."""
        call = subject.children[0] if subject.data == "call_expr" else None
        if call is not None and call.data == "call_member" and str(call.children[-1]) == "action_run":
            names = self.path(call.children[0])
            apply = self.table_apply_runs(names[:-1], call)
            table = self.dp.tables[names[-2]].table
            wanted = []
            for labels in groups:
                actions = []
                for label in labels:
                    value = label.children[0]
                    action = str(value.children[0].children[-1]) if value.data == "ref" else ""
                    if action not in table.actions and action != table.default_action:
                        what = f"switch: {action or 'label'} is not an action of {table.name}"
                        raise self.fail(label, what)
                    actions.append(action)
                wanted.append(actions)

            def by_action(ctx: _Ctx, mask: np.ndarray) -> list[np.ndarray]:
                _, ran = apply(ctx, mask)
                none = np.zeros(ctx.n, dtype=bool)
                return [np.logical_or.reduce([ran.get(a, none) for a in acts] + [none]) for acts in wanted]

            return by_action
        value = self.expr(subject)
        constants = [[self.constant(label.children[0]) for label in labels] for labels in groups]

        def by_value(ctx: _Ctx, mask: np.ndarray) -> list[np.ndarray]:
            column = _column(value.fn(ctx, mask), ctx.n, value.width)
            none = np.zeros(ctx.n, dtype=bool)
            out = []
            for values in constants:
                rows = none.copy()
                for v in values:
                    rows |= column == (v & _mask_of(value.width or 64))
                out.append(rows)
            return out

        return by_value

    def assign(self, node: Tree) -> StmtFn:
        target, value_node = node.children
        if target.data == "member" and target.children[0].data == "index":
            return self.assign_element(target, value_node)
        if target.data != "lvalue":
            what = target.data.replace("_", " ")
            raise self.fail(node, f"assigning to {what} is outside the supported subset")
        path, slice_ = target.children
        if slice_ is None and self.composite(self.key_of(path)) is not None:
            return self.copy_composite(self.key_of(path), value_node, node)
        key, width = self.lvalue(path)
        value = self.expr(value_node)
        if slice_ is None:
            return lambda ctx, mask: ctx.put(key, value.fn(ctx, mask), mask)
        hi, lo = (self.constant(c) for c in slice_.children)
        if hi < lo or hi >= width:
            raise self.fail(slice_, f"slice [{hi}:{lo}] is outside bit<{width}>")
        part = _mask_of(hi - lo + 1) << lo
        keep = _mask_of(width) ^ part

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            old = ctx.get(key)
            new = _column(_fit(value.fn(ctx, mask), hi - lo + 1), ctx.n, width)
            if old.dtype == object:
                merged = (old & keep) | (new.astype(object) << lo)
            else:
                merged = (old & np.uint64(keep)) | (new << np.uint64(lo))
            ctx.put(key, merged, mask)

        return run

    def if_stmt(self, node: Tree) -> StmtFn:
        cond_node, then_node, else_node = node.children
        cond = self.expr(cond_node)
        then = self.statement(then_node)
        other = self.statement(else_node) if else_node is not None else None

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            taken = _as_bool(cond.fn(ctx, mask), ctx) & mask
            if taken.any():
                then(ctx, taken)
            if other is not None:
                rest = ctx.stopped(mask & ~taken)
                if rest.any():
                    other(ctx, rest)

        return run

    def call_stmt(self, call: Tree) -> StmtFn:
        if call.data == "lookahead":  # `pkt.lookahead<T>();`: only whether the bits are there
            return self.lookahead_statement(call)
        if call.data == "call_member":
            expr = self.call_expr(call)

            def evaluate(ctx: _Ctx, mask: np.ndarray) -> None:
                expr.fn(ctx, mask)

            return evaluate
        path, *args = call.children
        args = [a for a in args if a is not None]
        names = self.path(path)
        if len(names) == 1 and names[0] in self.program.functions:
            expr = self.function_call(names[0], args, call)

            def call_function(ctx: _Ctx, mask: np.ndarray) -> None:
                expr.fn(ctx, mask)

            return call_function
        method = names[-1]
        target = names[:-1]
        if method in ("setValid", "setInvalid"):
            header = self.header(Tree("path", path.children[:-1], path.meta))
            flag = method == "setValid"

            siblings = self.siblings(header) if flag else []

            def set_valid(ctx: _Ctx, mask: np.ndarray) -> None:
                valid = ctx.header_valid(header)
                ctx.valid[header] = np.where(mask, flag, valid)
                for other in siblings:
                    ctx.valid[other] = ctx.header_valid(other) & ~mask

            return set_valid
        if method in ("push_front", "pop_front") and ".".join(target) in self.program.stacks:
            return self.shift_stack(".".join(target), method, args, call)
        owner = self.control or self.program.parser
        if method == "apply" and len(target) == 1 and target[0] in owner.instances:
            return self.inline_block(self.program.blocks[owner.instances[target[0]]], args, call)
        if method == "apply" and len(target) == 1 and target[0] in self.program.blocks:
            return self.inline_block(self.program.blocks[target[0]], args, call)  # `Type.apply(...)`
        if method == "apply":
            apply = self.table_apply(target, call)

            def apply_table(ctx: _Ctx, mask: np.ndarray) -> None:
                apply(ctx, mask)

            return apply_table
        if method == "extract" and target == ["pkt"]:
            return self.extract(args, call)
        if method == "emit" and target == ["pkt"] and self.program.architecture != "pna":
            return lambda ctx, mask: None  # a deparser's emits: written after it ran, in order
        checksum = owner.instances.get(target[0]) if len(target) == 1 else None
        if checksum == "InternetChecksum" and self.program.architecture == "psa":
            return self.internet_checksum(f"csum.{owner.name}.{target[0]}", method, args, call)
        if method == "advance" and target == ["pkt"] and len(args) == 1:
            return self.advance(args[0], call)
        if self.dp.pna is not None:
            stmt = self.dp.pna.statement(self, names, args, call)
            if stmt is not None:
                return stmt
        if names in (["log_msg"], ["digest"]) and self.program.architecture == "v1model":
            return lambda ctx, mask: None  # nothing a packet shows
        if method in ("read", "write") and len(target) == 1 and target[0] in self.dp.registers:
            return self.register_access(target[0], method, args, call)
        if method == "count" and len(target) == 1:
            return self.count(target[0], args, call)
        if names == ["send_to_port"] and len(args) == 1:
            port = self.expr(args[0])

            def send(ctx: _Ctx, mask: np.ndarray) -> None:
                value = _column(port.fn(ctx, mask), ctx.n, 32).astype(np.int64)
                ctx.port = np.where(mask, value, ctx.port)
                ctx.drop = ctx.drop & ~mask

            return send
        if names == ["drop_packet"] and not args:

            def drop(ctx: _Ctx, mask: np.ndarray) -> None:
                ctx.drop = ctx.drop | mask

            return drop
        if names == ["verify"] and len(args) == 2:
            return self.verify(args)
        extern = arch_extern(self.program.architecture, names[-1])
        if extern is not None and len(names) == 1:
            return extern(self, args, call)
        if len(names) == 1 and self.control is not None:
            return self.direct_action(names[0], args, call)
        raise self.fail(call, f"call {'.'.join(names)}(...) is outside the supported subset")

    def verify(self, args: list[Tree]) -> StmtFn:
        """core.p4's verify(check, error): rows where `check` is false leave the parser with it."""
        check = self.expr(args[0])
        code = self.constant(args[1])

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            failed = mask & ~_as_bool(check.fn(ctx, mask), ctx)
            if failed.any():
                ctx.fail_rows(failed, code)

        return run

    def direct_action(self, name: str, args: list[Tree], node: Tree) -> StmtFn:
        action = self.find_action(name, node)
        if action is None:
            return lambda ctx, mask: None
        if len(args) != len(action.params):
            raise self.fail(node, f"action {name} takes {len(action.params)} arguments, got {len(args)}")
        if any(action.types):
            return self.inline_action(action, args, node)
        directions = action.directions or ("",) * len(args)
        exprs = [self.expr(a) if d != "out" else _const(0) for a, d in zip(args, directions, strict=True)]
        outs = [
            (self.lvalue_of(a), f"param.{self.param_scope(action)}{action.name}.{p}")
            for a, d, (p, _) in zip(args, directions, action.params, strict=True)
            if d in ("out", "inout")
        ]
        run = self.action_runner(name, node)

        def call(ctx: _Ctx, mask: np.ndarray) -> None:
            pairs = zip(exprs, action.params, strict=True)
            values = [_column(e.fn(ctx, mask), ctx.n, w) for e, (_, w) in pairs]
            run(ctx, mask, values)
            for (key, _), param in outs:
                ctx.put(key, ctx.get(param), mask)

        return call

    def bind_directional(self, action: Action, table: Table, run: ActionFn, node: Tree) -> ActionFn:
        """A table's action whose directional parameters its `actions` list binds
        (`a(hdr.x)`): copied in before it runs, `out`/`inout` ones copied back after."""
        args = table.bound.get(action.name, ())
        count = sum(1 for d in action.directions if d)
        if len(args) != count or any(not d for d in action.directions[:count]):
            what = f"action {action.name} needs its {count} directional arguments"
            raise self.fail(node, f"table {table.name}: {what}")
        directions = zip(args, action.directions, strict=False)
        exprs = [self.expr(a) if d != "out" else _const(0) for a, d in directions]
        scope = self.param_scope(action)
        outs = [
            (self.lvalue_of(a)[0], f"param.{scope}{action.name}.{p}")
            for a, d, (p, _) in zip(args, action.directions, action.params, strict=False)
            if d in ("out", "inout")
        ]
        widths = [w for _, w in action.params[:count]]

        def bound(ctx: _Ctx, mask: np.ndarray, params: list[np.ndarray]) -> None:
            given = [_column(e.fn(ctx, mask), ctx.n, w) for e, w in zip(exprs, widths, strict=True)]
            run(ctx, mask, [*given, *params])
            for key, param in outs:
                ctx.put(key, ctx.get(param), mask)

        return bound

    def inline_block(self, block: Control | ParserBlock, args: list[Tree], node: Tree) -> StmtFn:
        """`instance.apply(args)` of a parser or control: its body inlined here, arguments
        copied in and `out`/`inout` ones copied back (as P4 calls are)."""
        if len(args) != len(block.params):
            raise self.fail(node, f"{block.name} takes {len(block.params)} arguments, got {len(args)}")
        if block.name in self.compiling:
            raise self.fail(node, f"{block.name} applies itself")
        busy = isinstance(block, Control) and (block.externs or block.variables or block.instances)
        if busy or (isinstance(block, Control) and block.tables and block not in _applied(self.program)):
            what = "a control with externs, variables or tables and more than one instance,"
            raise self.fail(node, f"applying {block.name}, {what} is outside the subset")
        if block in self.inlined:
            raise self.fail(node, f"{block.name} is applied twice; one application per instance is supported")
        if isinstance(block, Control) and block.tables:
            self.inlined.append(block)
        self.dp.sites += 1
        prefix = f"inl.{block.name}#{self.dp.sites}"
        roles: dict[str, str] = {}
        params, bound = [], []
        for (name, direction, type_), arg in zip(block.params, args, strict=True):
            type_name = str(type_.children[0]) if type_.data == "named_type" else ""
            if type_name in ("packet_in", "packet_out"):
                roles[name] = "pkt"
                continue
            if type_name.startswith("pna_main_") and type_name.endswith("_metadata_t"):  # the architecture's
                roles[name] = "ostd" if "output" in type_name else "istd"
                continue
            composite = type_name in self.program.headers or type_name in self.program.structs
            if composite and direction == "inout" and arg.data == "ref":
                caller = self.key_of(arg.children[0])
                if any(stack.startswith(caller + ".") for stack in self.program.stacks):
                    # a struct holding header stacks: the parameter names the caller's own
                    # storage (what copy-in/copy-out gives, as no other path reaches it here)
                    roles[name] = caller
                    continue
            width = 0 if composite else self.type_width(type_, f"{block.name} parameter {name}")
            params.append((name, direction, type_name if composite else "", width))
            bound.append(arg)
        scope, enter, leave = self.bind(prefix, params, bound, node)
        saved = (self.scopes, self.params, self.roles, self.returns, self.writable, self.control)
        self.scopes, self.params, self.roles, self.returns, self.writable = [scope], {}, roles, [None], set()
        self.compiling.append(block.name)
        try:
            if isinstance(block, ParserBlock):
                self.control = None
                body = _parser_machine(self, block, f"{block.name}.")
            else:
                self.control = block
                assert block.apply is not None
                body = self.block(Tree("block", [*block.prelude, *block.apply.children], block.apply.meta))
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.roles, self.returns, self.writable, self.control = saved

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            for step in enter:
                step(ctx, mask)
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned
            for step in leave:
                step(ctx, mask)

        return run

    def bind(
        self, prefix: str, params: list[tuple[str, str, str, int]], args: list[Tree], node: Tree
    ) -> tuple[dict[str, str | int], list[StmtFn], list[StmtFn]]:
        """Storage for the parameters (name, direction, header/struct type or "", width) of
        an inlined call under `prefix`: the scope naming them, the copy-in steps and the
        copy-out steps (`out` parameters start as 0 or invalid headers)."""
        scope: dict[str, str | int] = {}
        enter: list[StmtFn] = []
        leave: list[StmtFn] = []
        for (name, direction, type_name, width), arg in zip(params, args, strict=True):
            key = f"{prefix}.{name}"
            scope[name] = key
            if type_name:
                self.declare_composite(key, type_name, node)
                out = direction == "out"
                enter.append(self.clear_composite(key) if out else self.copy_composite(key, arg, node))
            else:
                self.widths[key] = width
                enter.append(_copy_in(key, self.expr(arg) if direction != "out" else _const(0)))
            if direction not in ("out", "inout"):
                continue
            dynamic = arg.data == "member" and arg.children[0].data == "index"
            if dynamic and not type_name:  # s[e].f: copied back to the element e named on entry
                enter_at, back = self.element_out(arg, key)
                enter.append(enter_at)
                leave.append(back)
                continue
            if arg.data == "slice_expr" and arg.children[0].data == "ref" and not type_name:
                lvalue = Tree("lvalue", [arg.children[0].children[0], Tree("slice", arg.children[1:])])
                leave.append(self.assign(Tree("assign", [lvalue, _ref(key, arg)], arg.meta)))  # f[hi:lo]
                continue
            if arg.data != "ref":
                raise self.fail(arg, "an out or inout argument must be a header, struct or field")
            if type_name:
                leave.append(self.copy_composite(self.key_of(arg.children[0]), _ref(key, arg), node))
            else:
                leave.append(_copy_out(key, self.lvalue_of(arg)[0]))
        return scope, enter, leave

    def element_out(self, target: Tree, key: str) -> tuple[StmtFn, StmtFn]:
        """For `s[e].f` passed as an out or inout argument held at `key`: the step that
        notes which element `e` names when the call starts, and the copy back into it."""
        stack, index, field_name, _ = self.dynamic_element(target)
        size = self.program.stacks[stack][1]
        at_key = f"{key}$at"
        self.widths[at_key] = 32
        where = self.program.where(target)

        def note(ctx: _Ctx, mask: np.ndarray) -> None:
            at = _column(index.fn(ctx, mask), ctx.n, index.width)
            if (mask & (at >= np.uint64(size))).any():
                raise P4Error(f"{where}: header stack index past {stack}'s {size} elements at run time")
            ctx.put(at_key, at, mask)

        def back(ctx: _Ctx, mask: np.ndarray) -> None:
            at = ctx.get(at_key)
            for i in range(size):
                rows = mask & (at == np.uint64(i))
                if rows.any():
                    ctx.put(f"{stack}[{i}].{field_name}", ctx.get(key), rows)

        return note, back

    def clear_composite(self, key: str) -> StmtFn:
        """A header or struct made fresh: fields 0, headers invalid."""
        fields, headers = self.composite(key) or ([], [])

        def fresh(ctx: _Ctx, mask: np.ndarray) -> None:
            for suffix in fields:
                ctx.put(key + suffix, 0, mask)
            for suffix in headers:
                ctx.valid[key + suffix] = ctx.header_valid(key + suffix) & ~mask

        return fresh

    def inline_action(self, action: Action, args: list[Tree], node: Tree) -> StmtFn:
        """A direct call of an action with header or struct parameters: inlined here, its
        arguments copied in and `out`/`inout` ones back."""
        if action.name in self.compiling:
            raise self.fail(node, f"action {action.name} calls itself; P4 actions cannot recurse")
        self.dp.sites += 1
        prefix = f"act.{action.name}#{self.dp.sites}"
        params = [
            (p, d or "in", t, w)
            for (p, w), d, t in zip(action.params, action.directions, action.types, strict=True)
        ]
        scope, enter, leave = self.bind(prefix, params, args, node)
        saved = (self.scopes, self.params, self.returns, self.writable)
        self.scopes, self.params, self.returns, self.writable = [scope], {}, [None], set()
        self.compiling.append(action.name)
        try:
            body = self.block(action.body)
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.returns, self.writable = saved

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            for step in enter:
                step(ctx, mask)
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned
            for step in leave:
                step(ctx, mask)

        return run

    def lvalue_of(self, node: Tree) -> tuple[str, int]:
        """The storage an `out`/`inout` argument names (a field or variable, no slices)."""
        if node.data != "ref":
            raise self.fail(node, "an out or inout argument must be a field or variable")
        return self.lvalue(node.children[0])

    def function_call(self, name: str, args: list[Tree], node: Tree) -> _Expr:
        """A call of a function, inlined here: copy in, run the body, copy out, its value."""
        if self.program.functions[name].returns_type:
            run, _ = self.composite_call(name, args, node)
            return _Expr(lambda ctx, mask: (run(ctx, mask), 0)[1], None)
        return self._function_call(name, args, node)[0]

    def composite_call(self, name: str, args: list[Tree], node: Tree) -> tuple[StmtFn, str]:
        """A call of a function that returns a header or struct: the call, and where its
        value is (a header it leaves invalid unless a `return` gives it one)."""
        expr, target = self._function_call(name, args, node)

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            expr.fn(ctx, mask)

        return run, target

    def _function_call(self, name: str, args: list[Tree], node: Tree) -> tuple[_Expr, str]:
        function = self.program.functions[name]
        if len(args) != len(function.params):
            raise self.fail(node, f"function {name} takes {len(function.params)} arguments, got {len(args)}")
        if name in self.compiling:
            raise self.fail(node, f"function {name} calls itself; P4 functions cannot recurse")
        self.dp.sites += 1
        prefix = f"fn.{name}#{self.dp.sites}"
        types = function.types or ("",) * len(args)
        params = [(p, d, t, w) for (p, w, d), t in zip(function.params, types, strict=True)]
        scope, enter, leave = self.bind(prefix, params, args, node)
        target = None
        fresh: StmtFn | None = None
        if function.returns is not None:
            target = f"{prefix}.$return"
            self.widths[target] = function.returns
        elif function.returns_type:
            target = f"{prefix}.$return"
            self.declare_composite(target, function.returns_type, node)
            fresh = self.clear_composite(target)
        saved = (self.scopes, self.params, self.roles, self.returns, self.writable)
        self.scopes, self.params, self.roles = [scope], {}, {}
        self.returns, self.writable = [target], set()
        self.compiling.append(name)
        try:
            body = self.block(function.body)
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.roles, self.returns, self.writable = saved

        def run(ctx: _Ctx, mask: np.ndarray) -> Value:
            for step in enter:
                step(ctx, mask)
            if fresh is not None:
                fresh(ctx, mask)
            elif target is not None:
                ctx.put(target, 0, mask)
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned
            for step in leave:
                step(ctx, mask)
            return ctx.get(target) if target is not None and fresh is None else 0

        return _Expr(run, function.returns), target or ""

    def count(self, name: str, args: list[Tree], node: Tree) -> StmtFn:
        assert self.control is not None
        extern = self.control.externs.get(name)
        if extern is None or extern.kind != "Counter" or len(args) != 1:
            raise self.fail(node, f"{name}.count(index): {name!r} is not a Counter")
        index = self.expr(args[0])
        packets, octets = self.dp.counters[name]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            rows, where = _in_array(index.fn(ctx, mask), index.width, ctx.n, packets.size, mask)
            _add_at(packets, where, 1)
            _add_at(octets, where, ctx.length[rows])

        return run

    def siblings(self, header: str) -> list[str]:
        """The other members of the header union `header` belongs to (none if it is in none)."""
        for members in self.program.unions.values():
            if header in members:
                return [m for m in members if m != header]
        return []

    def shift_stack(self, stack: str, method: str, args: list[Tree], node: Tree) -> StmtFn:
        """push_front(n) / pop_front(n): elements move n places, the freed ones invalid."""
        htype, size = self.program.stacks[stack]
        if len(args) != 1:
            raise self.fail(node, f"{method} takes a count")
        count = self.constant(args[0])
        if count < 0:
            raise self.fail(node, f"{method}: a negative count")
        names = [f for f, _ in htype.storage()]
        step = count if method == "push_front" else -count
        order = range(size - 1, -1, -1) if step > 0 else range(size)
        following = f"{stack}.$next"

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            for i in order:
                source = i - step
                cell = f"{stack}[{i}]"
                if 0 <= source < size:
                    for f in names:
                        ctx.put(f"{cell}.{f}", ctx.get(f"{stack}[{source}].{f}"), mask)
                    valid = ctx.header_valid(f"{stack}[{source}]")
                else:
                    valid = np.zeros(ctx.n, dtype=bool)
                ctx.valid[cell] = np.where(mask, valid, ctx.header_valid(cell))
            moved = ctx.get(following).astype(np.int64) + step
            ctx.put(following, np.clip(moved, 0, size).astype(np.uint64), mask)

        return run

    def advance(self, amount: Tree, node: Tree) -> StmtFn:
        """pkt.advance(bits): skip whole bytes; past the packet's end is error.PacketTooShort."""
        bits = self.expr(amount)
        too_short = self.dp.error_codes["PacketTooShort"]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            count = _column(bits.fn(ctx, mask), ctx.n, bits.width).astype(np.int64)
            if (mask & (count % 8 != 0)).any():
                where = self.program.where(node)
                raise P4Error(f"{where}: advance by bits that are not whole bytes")
            step = count // 8
            short = mask & (ctx.cursor + step > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)
            ctx.cursor = np.where(mask & ~short, ctx.cursor + step, ctx.cursor)

        return run

    def lookahead(self, node: Tree, member: str | None = None) -> _Expr:
        """pkt.lookahead<bit<N>>(): the next N bits (N <= 64) without moving, and
        pkt.lookahead<H>().f: field f of the header H the next bytes would be; rows without
        them leave the parser with error.PacketTooShort."""
        base, type_ = node.children[0], node.children[-1]
        name = str(type_.children[0]) if type_.data == "named_type" else ""
        header = self.program.headers.get(name) if member is not None else None
        if base.data != "ref" or self.path(base.children[0]) != ["pkt"]:
            raise self.fail(node, "lookahead from anything but the packet is outside the subset")
        if header is not None and member in header.offsets():
            offset, width = header.offsets()[member]
            size = header.size_bytes
        elif type_.data == "bit_type" and member is None:
            offset, width = 0, self.type_width(type_, "lookahead")
            size = -(-width // 8)
        else:
            what = "lookahead of anything but bit<N> or a header's field"
            raise self.fail(node, f"{what} is outside the subset")
        if width > 64:
            raise self.fail(node, "lookahead wider than 64 bits is outside the subset")
        too_short = self.dp.error_codes["PacketTooShort"]

        def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
            short = mask & (ctx.cursor + size > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)
            out = np.zeros(ctx.n, dtype=np.uint64)
            rows = np.flatnonzero(mask & ~short)
            if rows.size:
                raw = _gather(ctx.data, rows, ctx.cursor[rows], size, ctx.n)
                out[rows] = _bits(raw, offset, width)
            return out

        return _Expr(fn, width)

    def type_bits(self, node: Tree, depth: int = 0) -> int:
        """The bits of a bit<N>, header or struct-of-fields type."""
        name = str(node.children[0]) if node.data == "named_type" else ""
        if name in self.program.headers:
            return self.program.headers[name].width_bits
        if name in self.program.structs and depth < 32:
            return sum(self.type_bits(t, depth + 1) for _, t in self.program.structs[name])
        return self.type_width(node, "lookahead")

    def lookahead_statement(self, node: Tree) -> StmtFn:
        """`pkt.lookahead<T>();` as a statement: rows without T's bytes left leave the parser
        with error.PacketTooShort; nothing else changes."""
        base, type_ = node.children[0], node.children[-1]
        if base.data != "ref" or self.path(base.children[0]) != ["pkt"]:
            raise self.fail(node, "lookahead of anything but the packet is outside the subset")
        size = -(-self.type_bits(type_) // 8)
        too_short = self.dp.error_codes["PacketTooShort"]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            short = mask & (ctx.cursor + size > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)

        return run

    def extract(self, args: list[Tree], node: Tree) -> StmtFn:
        if len(args) == 2 and args[0].data == "ref":
            header = self.header(args[0].children[0])
            if self.dp.headers[header].varbit is None:
                raise self.fail(node, f"extract({header}, bits): {header} has no varbit field")
            return self.extract_varbit(header, self.expr(args[1]))
        if len(args) != 1 or args[0].data != "ref":
            raise self.fail(node, "extract takes one header")
        skipped = ".".join(str(t) for t in args[0].children[0].children)
        if skipped.startswith("__skip__"):  # extract<H>(_)
            return self.skip(skipped.removeprefix("__skip__"), node)
        key = self.key_of(args[0].children[0])
        if key.endswith(".next") and key[: -len(".next")] in self.program.stacks:
            return self.extract_next(key[: -len(".next")], node)
        stack, _, member = key.rpartition(".next.")
        if stack in self.program.union_stacks:
            return self.extract_next_member(stack, member, node)
        header = self.header(args[0].children[0])
        if self.dp.headers[header].varbit is not None:
            raise self.fail(node, f"{header} has a varbit field: extract({header}, bits) gives its length")
        run = self.extract_into(header)
        siblings = self.siblings(header)
        if not siblings:
            return run

        def extract_member(ctx: _Ctx, mask: np.ndarray) -> None:
            run(ctx, mask)
            done = mask & ~ctx.parser_error
            for other in siblings:
                ctx.valid[other] = ctx.header_valid(other) & ~done

        return extract_member

    def skip(self, type_name: str, node: Tree) -> StmtFn:
        """extract<H>(_): the cursor moves past an H; error.PacketTooShort without one."""
        htype = self.program.headers.get(type_name)
        if htype is None or htype.varbit is not None:
            raise self.fail(node, f"extract<{type_name}>(_): {type_name} is not a fixed-size header")
        size = htype.size_bytes
        too_short = self.dp.error_codes["PacketTooShort"]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            short = mask & (ctx.cursor + size > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)
            ctx.cursor = ctx.cursor + np.where(mask & ~short, size, 0)

        return run

    def extract_next_member(self, stack: str, member: str, node: Tree) -> StmtFn:
        """extract(u.next.m) on a stack of unions: member m of the element nextIndex names
        (the element's other members made invalid), then nextIndex + 1; past the last
        element the packet leaves the parser with error.StackOutOfBounds."""
        size = self.program.union_stacks[stack]
        elements = [f"{stack}[{i}]" for i in range(size)]
        if f"{elements[0]}.{member}" not in self.dp.headers:
            raise self.fail(node, f"{stack}: its unions have no member {member}")
        runs = [self.extract_into(f"{e}.{member}") for e in elements]
        others = [[m for m in self.program.unions[e] if m != f"{e}.{member}"] for e in elements]
        return self._extract_at_next(stack, runs, others)

    def extract_varbit(self, header: str, bits: _Expr) -> StmtFn:
        """extract(h, bits): h's fixed fields, then `bits` more into its varbit field. Not
        whole bytes: error.ParserInvalidArgument; more bits than the field holds:
        error.HeaderTooShort (core.p4's meaning); fewer bytes left than that:
        error.PacketTooShort (nothing extracted in each case)."""
        htype = self.dp.headers[header]
        assert htype.varbit is not None
        name, most = htype.varbit
        fixed = self.extract_into(header)
        size = htype.size_bytes
        value_key, length_key = f"{header}.{name}", f"{header}.{name}$len"
        codes = self.dp.error_codes
        invalid, too_long, too_short = (
            codes[e] for e in ("ParserInvalidArgument", "HeaderTooShort", "PacketTooShort")
        )

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            count = _column(bits.fn(ctx, mask), ctx.n, bits.width).astype(object)
            count = np.array([min(int(c), 1 << 40) for c in count.tolist()], dtype=np.int64)
            ctx.fail_rows(mask & (count % 8 != 0), invalid)
            ctx.fail_rows(mask & (count > most), too_long)  # (a row already failed keeps its error)
            bad = mask & ((count > most) | (count % 8 != 0))
            short = mask & ~bad & (ctx.cursor + size + count // 8 > ctx.length)
            ctx.fail_rows(short, too_short)
            ok = mask & ~bad & ~short
            if not ok.any():
                return
            fixed(ctx, ok)
            value = _column(0, ctx.n, most).astype(object)
            for row in np.flatnonzero(ok).tolist():
                at, step = int(ctx.cursor[row]), int(count[row]) // 8
                value[row] = int.from_bytes(ctx.data[row, at : at + step].tobytes(), "big")
            ctx.put(value_key, value, ok)
            ctx.put(length_key, count.astype(np.uint64), ok)
            ctx.cursor = ctx.cursor + np.where(ok, count // 8, 0)

        return run

    def extract_next(self, stack: str, node: Tree) -> StmtFn:
        """extract(s.next): into the element nextIndex names, then nextIndex + 1; past the
        last element the packet leaves the parser with error.StackOutOfBounds."""
        htype, size = self.program.stacks[stack]
        if htype.varbit is not None:
            raise self.fail(node, f"{stack}: a stack of headers with a varbit field is outside the subset")
        runs = [self.extract_into(f"{stack}[{i}]") for i in range(size)]
        return self._extract_at_next(stack, runs, [[] for _ in runs])

    def _extract_at_next(self, stack: str, runs: list[StmtFn], others: list[list[str]]) -> StmtFn:
        """Row by row, `runs[i]` where the stack's nextIndex is i (then the headers
        `others[i]` made invalid: a union's other members), then nextIndex + 1; past the
        last element the packet leaves the parser with error.StackOutOfBounds."""
        size = len(runs)
        following = f"{stack}.$next"
        out_of_bounds = self.dp.error_codes["StackOutOfBounds"]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            at = ctx.get(following)
            beyond = mask & (at >= np.uint64(size))
            if beyond.any():
                ctx.fail_rows(beyond, out_of_bounds)
            for i, extract in enumerate(runs):
                rows = mask & (at == np.uint64(i))
                if rows.any():
                    extract(ctx, rows)
                    if others[i]:
                        done = rows & ~ctx.parser_error
                        for other in others[i]:
                            ctx.valid[other] = ctx.header_valid(other) & ~done
            done = mask & ~ctx.parser_error
            ctx.put(following, at + np.uint64(1), done)

        return run

    def extract_into(self, header: str) -> StmtFn:
        htype = self.dp.headers[header]
        size = htype.size_bytes
        plan = [(f"{header}.{name}", offset, width) for name, (offset, width) in htype.offsets().items()]
        narrow = all(width <= 64 for _, width in htype.fields)

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            short = mask & (ctx.cursor + size > ctx.length)
            if short.any():
                ctx.fail_rows(short, self.dp.error_codes["PacketTooShort"])
            ok = mask & ~short
            count = int(ok.sum())
            if count == 0:
                return
            start = ctx.cursor[ok]
            if count * 4 >= ctx.n and (start == start[0]).all() and int(start[0]) + size <= ctx.data.shape[1]:
                # most rows, one offset: read every row's bytes there, keep the ones that extract
                self_start = int(start[0])
                raw = ctx.data[:, self_start : self_start + size]
                _extract_masked(
                    ctx, header, plan, raw, ok, _words_at(ctx.data, self_start, size) if narrow else None
                )
                ctx.cursor = ctx.cursor + np.where(ok, size, 0)
                return
            rows = np.flatnonzero(ok)
            raw = _gather(ctx.data, rows, ctx.cursor[rows], size, ctx.n)
            words = _to_words(raw) if narrow else None
            whole = rows.size == ctx.n
            for key, offset, width in plan:
                value = _bits(raw, offset, width) if words is None else _word_field(words, offset, width)
                if whole:
                    ctx.values[key] = value
                    continue
                column = ctx.get(key)
                if column.dtype == object or value.dtype == object:
                    column = column.astype(object)
                column = column.copy() if column is ctx.values.get(key) else column
                column[rows] = value
                ctx.values[key] = column
            ctx.valid[header] = ctx.header_valid(header) | ok
            ctx.cursor = ctx.cursor + np.where(ok, size, 0)

        return run


def _extract_masked(
    ctx: _Ctx,
    header: str,
    plan: list[tuple[str, int, int]],
    raw: np.ndarray,
    ok: np.ndarray,
    words: np.ndarray | None,
) -> None:
    """Field columns from every row's bytes `raw` (or their 64-bit `words` when every field
    fits in 64 bits), taken where `ok` (the others keep theirs)."""
    whole = bool(ok.all())
    for key, offset, width in plan:
        value = _bits(raw, offset, width) if words is None else _word_field(words, offset, width)
        if whole:
            ctx.values[key] = value
            continue
        old = ctx.values.get(key)
        if old is None:
            ctx.values[key] = (
                np.where(ok, value, value.dtype.type(0)) if value.dtype != object else np.where(ok, value, 0)
            )
        else:
            ctx.values[key] = np.where(ok, value, old)
    ctx.valid[header] = ctx.header_valid(header) | ok


def _in_array(
    index: Value, width: int | None, n: int, size: int, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `mask` whose `index` is a cell of an extern array of `size` cells, and
    those cells (int64).

    As in PNA (and PSA), an index at or past the array's size leaves the extern's state
    alone: a counter does not count the packet, a meter marks it GREEN. The index is
    compared at its own width (a bit<64> index of 2**63 or more, or a bit<128> one, is
    outside, never wrapped into a cell).
    """
    if not isinstance(index, np.ndarray):
        inside = 0 <= int(index) < size
        rows = mask if inside else np.zeros(n, dtype=bool)
        return rows, np.full(int(rows.sum()), int(index) if inside else 0, dtype=np.int64)
    cells = _column(index, n, width if _is_wide(width) else 64)
    rows = mask & np.asarray(cells < size, dtype=bool)
    return rows, cells[rows].astype(np.int64)


DENSE_CELLS = 1 << 20
"""A counter of at most this many cells is a numpy array per total; a larger one (up to
PNA's 2**32 - 1) keeps only the cells packets touched, so its memory follows the traffic."""


class SparseCells:
    """Totals of a large counter array, for the cells packets touched (the others are 0)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.totals: dict[int, int] = {}

    def add(self, cells: np.ndarray, amounts: np.ndarray | int) -> None:
        """`totals[cells] += amounts`, repeated cells adding up."""
        if cells.size == 0:
            return
        unique, inverse = np.unique(cells, return_inverse=True)
        if isinstance(amounts, int):
            sums = np.bincount(inverse.reshape(-1)) * amounts
        else:
            sums = np.rint(np.bincount(inverse.reshape(-1), weights=amounts)).astype(np.int64)
        for cell, amount in zip(unique.tolist(), sums.tolist(), strict=True):
            self.totals[cell] = self.totals.get(cell, 0) + amount


Cells = np.ndarray | SparseCells


def _cells(size: int) -> Cells:
    return np.zeros(size, dtype=np.int64) if size <= DENSE_CELLS else SparseCells(size)


def _add_at(totals: Cells, cells: np.ndarray, amounts: np.ndarray | int) -> None:
    """`totals[cells] += amounts`, repeated cells adding up (np.add.at); counted with bincount
    when the totals are few (exact: a batch's sums stay far below 2**53)."""
    if isinstance(totals, SparseCells):
        totals.add(cells, amounts)
        return
    if totals.size > 1 << 16 or cells.size == 0 or cells.min() < 0:
        np.add.at(totals, cells, amounts)
        return
    if isinstance(amounts, int):
        totals += np.bincount(cells, minlength=totals.size) * amounts
    else:
        totals += np.rint(np.bincount(cells, weights=amounts, minlength=totals.size)).astype(totals.dtype)


def _to_words(raw: np.ndarray) -> np.ndarray:
    """A (rows, bytes) matrix as big-endian 64-bit words (rows, ceil(bytes / 8))."""
    rows, size = raw.shape
    words = -(-size // 8)
    padded = np.zeros((rows, words * 8), dtype=np.uint8)
    padded[:, :size] = raw
    return padded.view(">u8").astype(np.uint64)


def _words_at(data: np.ndarray, start: int, size: int) -> np.ndarray:
    """`_to_words` of bytes [start, start + size) of every row, read in place when whole
    words fit in the rows (the bytes past `size` then fill the last word, never a field)."""
    end = start + -(-size // 8) * 8
    if end <= data.shape[1] and data.strides[1] == 1:
        return data[:, start:end].view(">u8").astype(np.uint64)
    return _to_words(data[:, start : start + size])


def _from_words(words: np.ndarray, size: int) -> np.ndarray:
    """The inverse of _to_words."""
    return np.ascontiguousarray(words.astype(">u8")).view(np.uint8)[:, :size]


def _word_field(words: np.ndarray, offset: int, width: int) -> np.ndarray:
    k, r = divmod(offset, 64)
    if r + width <= 64:
        return (words[:, k] >> np.uint64(64 - r - width)) & np.uint64(_mask_of(width))
    low_bits = r + width - 64
    high = (words[:, k] & np.uint64(_mask_of(64 - r))) << np.uint64(low_bits)
    return high | (words[:, k + 1] >> np.uint64(64 - low_bits))


def _word_put(words: np.ndarray, value: np.ndarray, offset: int, width: int) -> None:
    k, r = divmod(offset, 64)
    value = value & np.uint64(_mask_of(width))
    if r + width <= 64:
        words[:, k] |= value << np.uint64(64 - r - width)
        return
    low_bits = r + width - 64
    words[:, k] |= value >> np.uint64(low_bits)
    words[:, k + 1] |= value << np.uint64(64 - low_bits)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (fast when they are all the same, the common case, or
    small non-negative integers such as byte offsets, counted rather than sorted)."""
    if values.size and (values == values[0]).all():
        return values[:1]
    if values.size and values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < 1 << 16:
            return np.flatnonzero(np.bincount(values, minlength=high + 1)).astype(values.dtype)
    return np.unique(values)


def _gather(data: np.ndarray, rows: np.ndarray, starts: np.ndarray, size: int, n: int) -> np.ndarray:
    """Bytes [start, start + size) of each row; block slices where the rows share a start."""
    first = int(starts[0])
    if (starts == first).all():
        return data[:, first : first + size] if rows.size == n else data[rows, first : first + size]
    out = np.empty((rows.size, size), dtype=np.uint8)
    for start in _distinct(starts):
        same = starts == start
        out[same] = data[rows[same], int(start) : int(start) + size]
    return out


def _scatter(out: np.ndarray, rows: np.ndarray, starts: np.ndarray, raw: np.ndarray, n: int) -> None:
    """The inverse of _gather: write `raw` at each row's start."""
    size = raw.shape[1]
    for start in _distinct(starts):
        same = starts == start
        s = int(start)
        if same.all():
            if rows.size == n:
                out[:, s : s + size] = raw
            else:
                out[rows, s : s + size] = raw
        else:
            out[rows[same], s : s + size] = raw[same]


def _bits(raw: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Field values (big-endian, `width` bits at bit `offset`) from a (rows, bytes) matrix."""
    first, last = offset // 8, (offset + width - 1) // 8
    span = last - first + 1
    tail = 8 * span - (offset % 8) - width
    if span <= 8:
        value = np.zeros(raw.shape[0], dtype=np.uint64)
        for j in range(span):
            value = (value << np.uint64(8)) | raw[:, first + j].astype(np.uint64)
        return _fit(value >> np.uint64(tail), width)  # type: ignore[return-value]
    # wider: the span as big-endian 64-bit words, joined into Python ints a column at a time
    # (object arithmetic runs its loop in C: no Python statement per packet)
    words = _to_words(raw[:, first : last + 1])
    out = words[:, 0].astype(object)
    for k in range(1, words.shape[1]):
        out = (out << 64) | words[:, k].astype(object)
    out = (out >> (8 * (8 * words.shape[1] - span) + tail)) & _mask_of(width)
    return out if width > 64 else out.astype(np.uint64)


def _put_bits(out: np.ndarray, value: np.ndarray, offset: int, width: int) -> None:
    """Write `width`-bit values at bit `offset` into a (rows, bytes) matrix (the inverse of _bits)."""
    first, last = offset // 8, (offset + width - 1) // 8
    span = last - first + 1
    tail = 8 * span - (offset % 8) - width
    if span <= 7 and value.dtype != object:
        shifted = value << np.uint64(tail)
        keep = ~np.uint64(_mask_of(width) << tail) & np.uint64(_mask_of(8 * span))
        for j in range(span):
            shift = np.uint64(8 * (span - 1 - j))
            byte = ((shifted >> shift) & np.uint64(0xFF)).astype(np.uint8)
            kept = np.uint8((int(keep) >> int(shift)) & 0xFF)
            out[:, first + j] = (out[:, first + j] & kept) | byte
        return
    # wider: the span as big-endian 64-bit words; each word of the value cut from the Python
    # ints a column at a time (object arithmetic in C), merged with the bytes around the field
    region = _to_words(out[:, first : last + 1])
    count = region.shape[1]
    shift = tail + 8 * (8 * count - span)  # the words' padding after the span
    placed = (value.astype(object) & _mask_of(width)) << shift
    keep = ~(_mask_of(width) << shift) & _mask_of(64 * count)
    for k in range(count):
        down = 64 * (count - 1 - k)
        word = ((placed >> down) & _mask_of(64)).astype(np.uint64)
        region[:, k] = (region[:, k] & np.uint64((keep >> down) & _mask_of(64))) | word
    out[:, first : last + 1] = _from_words(region, span)


def _words(value: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Sum of the 16-bit words a `width`-bit value contributes when placed at bit `offset`."""
    total = np.zeros(value.size, dtype=np.uint64)
    end = offset + width
    word = offset // 16
    while word * 16 < end:
        lo, hi = max(offset, word * 16), min(end, word * 16 + 16)
        piece = (value >> np.uint64(end - hi)) & np.uint64(_mask_of(hi - lo))
        total += piece << np.uint64(word * 16 + 16 - hi)
        word += 1
    return total


def _as_bool(value: Value, ctx: _Ctx) -> np.ndarray:
    if isinstance(value, (int, np.integer)):
        return np.full(ctx.n, bool(value))
    return value.astype(bool) if value.dtype != bool else value


def _invert(value: Value, width: int) -> Value:
    if isinstance(value, (int, np.integer)):
        return ~int(value) & _mask_of(width)
    return ~value if value.dtype != object else (value ^ _mask_of(width))


def _sub(left: Value, right: Value, width: int) -> Value:
    return _arith("sub", left, right, width)


def _operands(left: Value, right: Value, width: int) -> tuple[Any, Any]:
    wide = width > 64 or any(isinstance(v, np.ndarray) and v.dtype == object for v in (left, right))
    if wide:
        left = left.astype(object) if isinstance(left, np.ndarray) else int(left)
        right = right.astype(object) if isinstance(right, np.ndarray) else int(right)
        return left, right
    if isinstance(left, np.ndarray) and left.dtype == bool:
        left = left.astype(np.uint64)
    if isinstance(right, np.ndarray) and right.dtype == bool:
        right = right.astype(np.uint64)
    a: Any = np.uint64(left & _mask_of(64)) if isinstance(left, int) else left
    b: Any = np.uint64(right & _mask_of(64)) if isinstance(right, int) else right
    return a, b


def _arith(kind: str, left: Value, right: Value, width: int) -> Value:
    if isinstance(left, int) and isinstance(right, int):
        return (
            _BINARY[kind](left, right) & _mask_of(width)
            if kind not in ("shl", "shr")
            else ((left << right if kind == "shl" else left >> right) & _mask_of(width))
        )
    a, b = _operands(left, right, width)
    if kind in ("shl", "shr"):
        if isinstance(b, (np.integer, int)) and int(b) >= max(width, 64 if not _is_wide(width) else width):
            return np.zeros_like(a) if isinstance(a, np.ndarray) else 0
        result = (a << b) if kind == "shl" else (a >> b)
        if isinstance(b, np.ndarray) and b.dtype != object:
            result = np.where(b >= np.uint64(64), np.uint64(0), result)
        return result
    with np.errstate(over="ignore"):
        return _BINARY[kind](a, b)


def _signed_compare(
    op: Callable[[Value, Value], Value], left: _Expr, right: _Expr, width: int
) -> ExprFn:
    """A comparison of int<N> values, in two's complement."""

    def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
        a = _signed_of(left.fn(ctx, mask), width)
        b = _signed_of(right.fn(ctx, mask), width)
        result = op(a, b)
        return result.astype(bool) if isinstance(result, np.ndarray) else np.asarray(bool(result))

    return fn


def _arithmetic_shift(left: _Expr, right: _Expr, width: int) -> ExprFn:
    """`a >> b` on an int<N>: the sign bit fills the bits shifted in."""
    source = left.width or width

    def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
        a = _signed_of(left.fn(ctx, mask), source)
        b = right.fn(ctx, mask)
        if isinstance(a, np.ndarray) and a.dtype == np.int64:
            amount = np.minimum(np.asarray(b, dtype=np.uint64), np.uint64(63)).astype(np.int64)
            return _bits_of(a >> amount, width)
        if isinstance(a, np.ndarray):
            amounts = _column(b, ctx.n, None).tolist()
            shifted = [int(x) >> int(s) for x, s in zip(a.tolist(), amounts, strict=True)]
            return _bits_of(np.array(shifted, dtype=object), width)
        return _bits_of(int(a) >> int(b), width)

    return fn


def _divide(kind: str, left: _Expr, right: _Expr, width: int, where: str) -> ExprFn:
    """`a / b`, `a % b` on bit<N> (unsigned, rounding down); a row dividing by 0 is refused
    when a packet reaches it (P4 leaves it undefined)."""

    def fn(ctx: _Ctx, mask: np.ndarray) -> Value:
        a, b = _operands(left.fn(ctx, mask), right.fn(ctx, mask), width)
        zero = _column(b, ctx.n, width) == 0
        if (mask & zero).any():
            raise P4Error(f"{where}: division by 0 at run time")
        safe = np.where(zero, 1, b) if isinstance(b, np.ndarray) else b
        return _fit(a // safe if kind == "div" else a % safe, width)

    return fn


def _compare(op: Callable[[Value, Value], Value], left: Value, right: Value, width: int | None) -> Value:
    a, b = _operands(left, right, width or 64)
    result = op(a, b)
    return result.astype(bool) if isinstance(result, np.ndarray) else np.asarray(bool(result))


def _concat(left: Value, right: Value, shift: int, width: int) -> Value:
    if width > 64:
        a = left.astype(object) if isinstance(left, np.ndarray) else int(left)
        b = right.astype(object) if isinstance(right, np.ndarray) else int(right)
        return (a << shift) | b
    a, b = _operands(left, right, width)
    out: np.ndarray = (a << np.uint64(shift)) | b
    return out


_BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b,
    "ge": lambda a, b: a >= b,
    "land": lambda a, b: a,
    "lor": lambda a, b: a,
    "concat": lambda a, b: a,
}
_COMPARE = {"eq", "ne", "lt", "gt", "le", "ge"}


class _Meter:
    """A two-rate three-colour meter (RFC 2698) per cell, in bytes or packets."""

    def __init__(self, size: int, unit: str) -> None:
        self.size = size
        self.unit = unit
        self.config: dict[int, tuple[float, float, float, float]] = {}
        self.tokens: dict[int, list[float]] = {}
        self.every_cell: tuple[float, float, float, float] | None = None  # set for the whole array

    def configure_all(self, cir: float, cburst: float, pir: float, pburst: float) -> None:
        """Every cell's rates (each cell's buckets start full when a packet first meets it)."""
        self.config, self.tokens = {}, {}
        self.every_cell = (cir, cburst, pir, pburst)

    def configure(self, index: int, cir: float, cburst: float, pir: float, pburst: float) -> None:
        self.config[index] = (cir, cburst, pir, pburst)
        self.tokens[index] = [cburst, pburst, -1.0]

    def execute(self, ctx: _Ctx, mask: np.ndarray, index: Value, width: int | None) -> np.ndarray:
        """The colour of each row of `mask` (GREEN for an unconfigured cell or an index outside
        the array), metered in rounds over the cells (`meter.meter_colours`)."""
        colours = np.zeros(ctx.n, dtype=np.uint64)
        rows, cells = _in_array(index, width, ctx.n, self.size, mask)
        if not cells.size:
            return colours
        times = ctx.get("istd.timestamp_ns")[rows]
        amounts = np.ones(cells.size) if self.unit == "packets" else ctx.length[rows].astype(np.float64)
        colours[rows] = meter_colours(self.config, self.tokens, cells, times, amounts, self.every_cell)
        return colours


class Datapath:
    """A compiled program with its tables, counters and meters; `process` runs a batch."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.widths = _storage_widths(program)
        self.state_visits: dict[str, int] = {}
        self.locals: set[str] = set()  # storage keys of variables declared in blocks
        self.sites = 0  # function calls inlined so far (each has its own storage)
        self.headers: dict[str, HeaderType] = dict(program.header_instances)  # and local ones
        self.signed = set(program.signed) | {  # storage keys of int<N> fields and variables
            f"{name}.{f}" for name, htype in self.headers.items() for f in htype.signed
        }
        self.action_runs: dict[str, int] = {}
        self.pna: Any = None  # a program that read pna.p4: its run-time state (arch/pna.py)
        if program.pna_file:
            from cloudtwin.smartnic.p4.arch.pna import PnaRuntime

            self.pna = PnaRuntime(self)
        declared = {name: i for i, name in enumerate(program.errors)}
        self.error_codes = {name: declared.get(name, i) for i, name in enumerate(CORE_ERRORS)}
        self.tables: dict[str, _TableState] = {}
        self.owners: dict[str, Control] = {}  # table, counter or meter -> its control
        for control in _applied(program):  # their keys' widths are known where they are applied
            for name, table in control.tables.items():
                self.own(name, control)
                self.tables[name] = _TableState(table, ())
        for control in _blocks(program):
            for name, table in control.tables.items():
                self.own(name, control)
                widths = tuple(self.key_width(table, k.expr, control) for k in table.keys)
                self.tables[name] = _TableState(table, widths)
            for name in control.externs:
                self.own(name, control)
        externs = {n: e for c in _blocks(program) for n, e in c.externs.items()} | program.global_externs
        self.counters = {
            name: (_cells(e.size), _cells(e.size)) for name, e in externs.items() if e.kind == "Counter"
        }
        self.meters = {name: _Meter(e.size, e.unit) for name, e in externs.items() if e.kind == "Meter"}
        self.registers = {
            name: (np.zeros(e.size, dtype=object if e.width > 64 else np.uint64), e.width)
            for name, e in externs.items()
            if e.kind == "register"
        }
        for state in self.tables.values():
            if len(state.widths) == len(state.table.keys):
                self.initialise(state)
        if self.pna is not None:
            self.pna.attach_tables()
        compiler = _Compiler(self)
        self.parser = _compile_parser(compiler)
        self.egress_parser: Callable[[_Ctx], None] | None = None  # PSA's
        if program.egress_parser is not None:
            self.egress_parser = _compile_parser(_Compiler(self), program.egress_parser)
        self.blocks: dict[str, StmtFn] = {}
        self.block_inits: dict[str, list[tuple[str, _Expr]]] = {}
        for control in program.deparsers():
            if control.tables or control.externs:
                assert control.apply is not None
                what = f"deparser {control.name} with tables or externs"
                line, column = control.apply.meta.line, control.apply.meta.column  # (relocated later)
                raise P4Error(f"{program.source}:{line}:{column}: a {what} is outside the subset")
        for control in (*_blocks(program), *program.deparsers()):  # (a deparser's emits: no-ops)
            compiler = _Compiler(self)
            compiler.roles = control.roles
            compiler.control = control
            assert control.apply is not None
            apply = Tree("block", [*control.prelude, *control.apply.children], control.apply.meta)
            self.blocks[control.name] = compiler.block(apply)
            self.block_inits[control.name] = [
                (f"var.{control.name}.{name}", compiler.expr(init))
                for name, (_, init) in control.variables.items()
                if init is not None
            ]
        self.control = self.blocks[program.control.name]
        self.var_inits = self.block_inits[program.control.name]

    def initialise(self, state: _TableState) -> None:
        """A table's default action and `entries`, once its keys' widths are known."""
        args = tuple(self.default_arg(a) for a in state.table.default_args)
        state.default = (state.table.default_action, args)
        state.entries = [self.const_entry(state, i, e) for i, e in enumerate(state.table.entries)]
        state.invalidate()

    def own(self, name: str, control: Control) -> None:
        """Record that `name` (a table or extern) belongs to `control`; P4Error when two
        controls declare the same name (the control plane could not tell them apart)."""
        first = self.owners.get(name)
        if first is not None and first is not control:
            raise P4Error(
                f"{self.program.source}: {name} is declared in both {first.name} and {control.name}; "
                "one name per table or extern across the pipeline is supported"
            )
        self.owners[name] = control

    def run_block(self, name: str, ctx: _Ctx, mask: np.ndarray) -> None:
        """Run control `name` (its variables initialised first) on the rows of `mask`."""
        for key, init in self.block_inits[name]:
            ctx.put(key, init.fn(ctx, mask), mask)
        ctx.exited = np.zeros(ctx.n, dtype=bool)
        ctx.any_exit = False
        ctx.returned = None
        if mask.any():
            self.blocks[name](ctx, mask)
        ctx.returned = None

    def counter_totals(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Each counter's touched cells: cell -> (packets, bytes), ascending."""
        out = {}
        for name, (packets, octets) in self.counters.items():
            if isinstance(packets, SparseCells) and isinstance(octets, SparseCells):
                cells = sorted(c for c, p in packets.totals.items() if p)
                out[name] = {c: (packets.totals[c], octets.totals.get(c, 0)) for c in cells}
            else:
                p, b = np.asarray(packets), np.asarray(octets)
                out[name] = {int(i): (int(p[i]), int(b[i])) for i in np.flatnonzero(p)}
        if self.pna is not None:
            out.update(self.pna.counter_totals())
        return out

    def key_width(self, table: Table, expr: Tree, control: Control) -> int:
        compiler = _Compiler(self)
        compiler.roles = control.roles
        compiler.control = control
        width = compiler.expr(expr).width
        if width is None:
            raise compiler.fail(expr, f"table {table.name}: a key needs a known width")
        return width

    def const_entry(self, state: _TableState, position: int, node: Tree) -> TableEntry:
        """An entry of a table's `entries` list; the earlier an entry, the higher its priority."""
        compiler = _Compiler(self)
        keyset, ref = node.children
        items = keyset.children if keyset.data == "keyset_tuple" else [keyset]
        keys = state.table.keys
        if len(items) == 1 and len(keys) != 1 and items[0].data == "ks_default":
            items = items * len(keys)
        if len(items) != len(keys):
            what = f"an entry has {len(items)} values for {len(keys)} keys"
            raise compiler.fail(node, f"table {state.table.name}: {what}")
        match = tuple(
            self.entry_match(compiler, item, key.kind, width)
            for item, key, width in zip(items, keys, state.widths, strict=True)
        )
        action = str(ref.children[0])
        if action not in state.table.actions:
            raise compiler.fail(ref, f"table {state.table.name}: {action} is not one of its actions")
        args = tuple(compiler.constant(a) for a in ref.children[1:] if a is not None)
        params = self.action_params(action, self.owners.get(state.table.name))
        if len(args) != len(params):
            raise compiler.fail(ref, f"action {action} takes {len(params)} arguments, got {len(args)}")
        values = tuple(a & _mask_of(w) for a, (_, w) in zip(args, params, strict=True))
        priorities = state.table.priorities
        return TableEntry(match, action, values, -(priorities[position] if priorities else position))

    def entry_match(
        self, compiler: _Compiler, item: Tree, kind: MatchKind, width: int
    ) -> int | tuple[int, int]:
        full = _mask_of(width)
        if item.data == "ks_default":
            if kind == MatchKind.EXACT:
                raise compiler.fail(item, "an exact key cannot be `_` or default")
            return (0, full) if kind == MatchKind.RANGE else (0, 0)
        if kind == MatchKind.RANGE and item.data in ("ks_value", "ks_range"):
            low, high = (compiler.constant(c) & full for c in item.children) if item.data == "ks_range" else (
                (compiler.constant(item.children[0]) & full,) * 2
            )
            return (low, high)
        if kind == MatchKind.OPTIONAL and item.data == "ks_value":
            return (compiler.constant(item.children[0]) & full, full)
        if item.data == "ks_value":
            value = compiler.constant(item.children[0]) & full
            return value if kind == MatchKind.EXACT else (value, width if kind == MatchKind.LPM else full)
        if item.data != "ks_mask" or kind == MatchKind.EXACT:
            raise compiler.fail(item, f"this entry value is outside the subset for a {kind.value} key")
        value, mask = (compiler.constant(c) & full for c in item.children)
        if kind == MatchKind.LPM:
            prefix = bin(mask).count("1")
            if mask != full ^ _mask_of(width - prefix):
                raise compiler.fail(item, f"an lpm key's mask {mask:#x} is not a prefix")
            return (value & mask, prefix)
        return (value & mask, mask)

    def default_arg(self, node: Tree) -> int:
        compiler = _Compiler(self)
        return compiler.constant(node)

    def action_params(self, name: str, control: Control | None = None) -> tuple[tuple[str, int], ...]:
        control = control or self.program.control
        action = control.actions.get(name) or self.program.global_actions.get(name)
        return action.plane_params if action is not None else ()

    # tables --------------------------------------------------------------------------
    def lookup(self, state: _TableState, keys: list[np.ndarray], n: int) -> np.ndarray:
        if not state.entries:
            return np.full(n, -1, dtype=np.int64)
        if not keys:  # a table without keys: its first entry matches every packet
            return np.zeros(n, dtype=np.int64)
        lookup = state._lookup
        if lookup is None:
            lookup = state._lookup = _build_lookup(state)
        return lookup(keys)

    def rows_for(
        self, state: _TableState, chosen: np.ndarray, taken: np.ndarray, action: str, mask: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """Rows that run `action` (hits of entries with it, misses when it is the default);
        `chosen` is each row's entry (-1: a miss), `taken` that entry's action code."""
        code = state.table.actions.index(action) if action in state.table.actions else -2
        rows = taken == code
        if state.default[0] == action:
            rows |= mask & (chosen < 0)
        if not rows.any():
            return None
        params = []
        for j, (_, width) in enumerate(self.action_params(action, self.owners.get(state.table.name))):
            per_entry = _entry_params(state, action, j, width)
            column = per_entry[np.maximum(chosen, 0)] if per_entry.size else _column(0, chosen.size, width)
            default = state.default[1][j] if state.default[0] == action else 0
            fallback = np.uint64(default) if column.dtype != object else _column(default, chosen.size, width)
            column = np.where(chosen >= 0, column, fallback)
            params.append(column)
        return rows, params

    # running -------------------------------------------------------------------------
    def process(self, batch: PacketBatch) -> BatchResult:
        """Run every packet of `batch` through parser, control and deparser (a program that
        read pna.p4: through arch/pna.py, with recirculation and data-plane table state).

        A batch narrower than its longest packet holds only each packet's head (at least
        the bytes the parser reads, `depth.parse_depth`): the result's rows are then the
        packets' new heads, which the bytes past each old head follow unchanged."""
        if self.pna is not None:
            return self.pna.process(batch)
        return self.single_pass(batch)

    def single_pass(self, batch: PacketBatch) -> BatchResult:
        """One pass of every packet of `batch` through parser, control and deparser."""
        ctx = self.context(batch)
        self.parser(ctx)
        alive = ~ctx.parser_error
        for key, init in self.var_inits:
            ctx.put(key, init.fn(ctx, alive), alive)
        if alive.any():
            self.control(ctx, alive)
        dropped = ctx.drop | ctx.parser_error
        data, length = self.deparse(ctx, ~dropped)
        return BatchResult(data, length, np.where(dropped, -1, ctx.port), dropped, ctx.parser_error)

    def payload_ends(self, ctx: _Ctx) -> np.ndarray:
        """Where each row's payload ends in `ctx.data`: at the packet's length, or, in a batch
        of heads (narrower than its longest packet, see `process`), at the end of the head:
        the bytes past it follow the deparsed packet unchanged."""
        head = ctx.data.shape[1]
        if not ctx.n or head >= int(ctx.length.max()):
            return ctx.length
        if int(ctx.cursor.max()) > head:
            raise P4Error(f"{self.program.source}: the parser read past the {head}-byte head")
        return np.minimum(ctx.length, head)

    def context(self, batch: PacketBatch) -> _Ctx:
        """A fresh run state for `batch`: nothing parsed, every packet headed for the drop."""
        n = len(batch)
        return _Ctx(
            n=n,
            data=batch.data,
            length=batch.length,
            values={
                "istd.direction": batch.direction.astype(np.uint64),
                "istd.input_port": batch.input_port.astype(np.uint64),
                "istd.packet_length": batch.length.astype(np.uint64),
                "istd.timestamp_ns": batch.timestamp_ns.astype(np.uint64),
            },
            valid={},
            widths=self.widths,
            cursor=np.zeros(n, dtype=np.int64),
            parser_error=np.zeros(n, dtype=bool),
            drop=np.ones(n, dtype=bool),
            port=np.full(n, -1, dtype=np.int64),
            exited=np.zeros(n, dtype=bool),
        )

    def deparse(
        self, ctx: _Ctx, alive: np.ndarray, order: tuple[str, ...] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Valid emitted headers (`order`, the deparser's by default), then the payload
        after the parser's cursor.

        Rows are grouped by which headers they emit and where their payload starts (a
        batch has few such groups); each group is written as blocks: its headers' bytes
        side by side, then its payload shifted into place."""
        program = self.program
        n = ctx.n
        emits = [(h, program.header_instances[h]) for h in (program.emit_order if order is None else order)]
        if any(htype.varbit is not None for _, htype in emits):
            return self.deparse_rows(ctx, alive, emits)
        valid = [ctx.header_valid(h) & alive for h, _ in emits]
        header_len = np.zeros(n, dtype=np.int64)
        for v, (_, htype) in zip(valid, emits, strict=True):
            header_len += v * htype.size_bytes
        length = np.where(alive, self.payload_ends(ctx) + header_len - ctx.cursor, 0)
        width = max(int(length.max()) if n else 0, 1)
        if not alive.any():
            return np.zeros((n, width), dtype=np.uint8), length
        out = np.empty((n, width), dtype=np.uint8)  # the largest group writes every byte of it
        groups = _deparse_groups(valid, alive, ctx.cursor)
        groups.sort(key=lambda group: -(n if isinstance(group[0], slice) else group[0].size))
        for i, (rows, emitted, start) in enumerate(groups):
            # the largest group is written in place over every row (its columns are there for
            # all rows); each other group builds its rows whole and overwrites them
            whole = i == 0
            index = np.arange(n) if whole or isinstance(rows, slice) else rows
            block = out if whole else np.zeros((index.size, width), dtype=np.uint8)
            at = 0
            for k in emitted:
                header, htype = emits[k]
                size = htype.size_bytes
                block[:, at : at + size] = self.header_bytes(ctx, header, htype, index)
                at += size
            span = max(min(ctx.data.shape[1] - start, width - at), 0)
            if span > 0:
                block[:, at : at + span] = ctx.data[slice(None) if whole else rows, start : start + span]
            if whole:
                out[:, at + span :] = 0
            if not whole:
                out[rows] = block
        if not isinstance(groups[0][0], slice):
            out[~alive] = 0  # rows that leave nothing, written over by the largest group
        return out, length

    def deparse_rows(
        self, ctx: _Ctx, alive: np.ndarray, emits: list[tuple[str, HeaderType]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The deparser row by row, for headers with a varbit field (each row's headers
        are as long as its varbit fields)."""
        packets: list[bytes] = []
        for row in range(ctx.n):
            if not alive[row]:
                packets.append(b"")
                continue
            at = np.array([row])
            parts = []
            for header, htype in emits:
                if not ctx.header_valid(header)[row]:
                    continue
                parts.append(self.header_bytes(ctx, header, htype, at)[0].tobytes())
                if htype.varbit is not None:
                    name = htype.varbit[0]
                    step = int(ctx.get(f"{header}.{name}$len")[row]) // 8
                    parts.append(int(ctx.get(f"{header}.{name}")[row]).to_bytes(step, "big"))
            parts.append(ctx.data[row, int(ctx.cursor[row]) : int(ctx.length[row])].tobytes())
            packets.append(b"".join(parts))
        length = np.array([len(p) for p in packets], dtype=np.int64)
        out = np.zeros((ctx.n, max(int(length.max()) if ctx.n else 0, 1)), dtype=np.uint8)
        for row, packet in enumerate(packets):
            out[row, : len(packet)] = np.frombuffer(packet, dtype=np.uint8)
        return out, length

    def header_bytes(self, ctx: _Ctx, header: str, htype: HeaderType, rows: np.ndarray) -> np.ndarray:
        """The wire bytes of `header` for `rows`, from its field columns."""
        all_rows = rows.size == ctx.n
        if all(w <= 64 for _, w in htype.fields):
            words = np.zeros((rows.size, -(-htype.size_bytes // 8)), dtype=np.uint64)
            for name, (bit, w) in htype.offsets().items():
                column = ctx.get(f"{header}.{name}")
                _word_put(words, column if all_rows else column[rows], bit, w)
            return _from_words(words, htype.size_bytes)
        raw = np.zeros((rows.size, htype.size_bytes), dtype=np.uint8)
        for name, (bit, w) in htype.offsets().items():
            _put_bits(raw, ctx.get(f"{header}.{name}")[rows], bit, w)
        return raw


def _deparse_groups(
    valid: list[np.ndarray], alive: np.ndarray, cursor: np.ndarray
) -> list[tuple[np.ndarray | slice, list[int], int]]:
    """The alive rows grouped by the headers they emit and their parser cursor: (rows, the
    emitted headers' positions in emit order, cursor). `rows` is a slice when it is every row."""
    n = alive.size
    rows = np.flatnonzero(alive)
    if len(valid) <= 62:  # which headers a row emits, as the bits of one code
        code = np.zeros(n, dtype=np.int64)
        for k, v in enumerate(valid):
            code |= v.astype(np.int64) << k
        code = code if rows.size == n else code[rows]
        codes = _distinct(code)
        patterns = [[k for k in range(len(valid)) if (int(c) >> k) & 1] for c in codes]
        members = [rows] if codes.size == 1 else [rows[code == c] for c in codes]
    else:
        matrix = np.stack([v[rows] for v in valid], axis=1)
        unique, inverse = np.unique(matrix, axis=0, return_inverse=True)
        patterns = [[int(k) for k in np.flatnonzero(u)] for u in unique]
        members = [rows[inverse.reshape(-1) == p] for p in range(len(unique))]
    groups: list[tuple[np.ndarray | slice, list[int], int]] = []
    for emitted, group in zip(patterns, members, strict=True):
        starts = cursor[group]
        distinct = _distinct(starts)
        for start in distinct:
            same = group if distinct.size == 1 else group[starts == start]
            groups.append((slice(None) if same.size == n else same, emitted, int(start)))
    return groups


def _entry_action_codes(state: _TableState) -> np.ndarray:
    codes = state._cache.get("actions")
    if codes is None:
        actions = state.table.actions
        codes = np.array([actions.index(e.action) for e in state.entries], dtype=np.int64)
        state._cache["actions"] = codes
    return codes


def _entry_params(state: _TableState, action: str, j: int, width: int) -> np.ndarray:
    key = (action, j)
    values = state._cache.get(key)
    if values is None:
        column = [e.params[j] if e.action == action else 0 for e in state.entries]
        values = np.array(column, dtype=object if width > 64 else np.uint64)
        state._cache[key] = values
    return values


def _storage_widths(program: Program) -> dict[str, int]:
    widths = {f"istd.{name}": w for name, w in ISTD_FIELDS.items()}
    for header, htype in program.header_instances.items():
        for name, width in htype.storage():
            widths[f"{header}.{name}"] = width
    widths.update(program.metadata_fields)
    for stack in (*program.stacks, *program.union_stacks):
        widths[f"{stack}.$next"] = 32  # nextIndex: the element `next` names
    for parser in (program.parser, program.egress_parser):
        for name, (width, _) in parser.variables.items() if parser is not None else ():
            widths[f"var.{parser.name}.{name}"] = width  # type: ignore[union-attr]
    for control in (*_blocks(program), *_applied(program), *program.deparsers()):
        for name, (width, _) in control.variables.items():
            widths[f"var.{control.name}.{name}"] = width
        for action in control.actions.values():
            for pname, width in action.params:
                if width:  # (a header or struct parameter is bound where the action is called)
                    widths[f"param.{control.name}.{action.name}.{pname}"] = width
    for action in program.global_actions.values():
        for pname, width in action.params:
            widths[f"param.{action.name}.{pname}"] = width
    return widths


def _blocks(program: Program) -> tuple[Control, ...]:
    """The program's controls that run per packet (PNA: its main control)."""
    return program.controls or (program.control,)


def _applied(program: Program) -> tuple[Control, ...]:
    """The controls instantiated exactly once inside others (their tables are the
    program's, under their own names); a control instantiated twice would need a table
    per instance, which is outside the subset."""
    names = [n for block in program.blocks.values() for n in block.instances.values()]
    once = [n for n in dict.fromkeys(names) if names.count(n) == 1]
    return tuple(b for n in once if isinstance(b := program.blocks.get(n), Control))


CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")
"""core.p4's errors in its order: a program that does not include it gets these codes."""


def _compile_parser(compiler: _Compiler, parser: ParserBlock | None = None) -> Callable[[_Ctx], None]:
    parser = parser or compiler.program.parser
    compiler.roles = parser.roles
    machine = _parser_machine(compiler, parser, "")
    return lambda ctx: machine(ctx, np.ones(ctx.n, dtype=bool))


def _parser_machine(compiler: _Compiler, parser: ParserBlock, label: str) -> StmtFn:
    """A parser's state machine run from `start` on the rows of a mask, until each row
    accepts, rejects or meets an error; `label` prefixes its state names in the counts."""
    states: dict[str, tuple[StmtFn, Callable[[_Ctx, np.ndarray], list[tuple[str, np.ndarray]]]]] = {}
    compiler.scopes.append({})
    prelude = [compiler.declare_local(node) for node in parser.prelude]
    for name, node in parser.states.items():
        compiler.scopes.append({})
        body = [compiler.statement(s) for s in node.children[1:-1]]
        states[name] = (_sequence(body), _transition(compiler, node.children[-1], parser.states))
        compiler.scopes.pop()
    inits = [
        (f"var.{parser.name}.{name}", compiler.expr(init))
        for name, (_, init) in parser.variables.items()
        if init is not None
    ]

    visits = compiler.dp.state_visits
    timeout = compiler.dp.error_codes["ParserTimeout"]

    compiler.scopes.pop()

    def run(ctx: _Ctx, everyone: np.ndarray) -> None:
        for key, init in inits:
            ctx.put(key, init.fn(ctx, everyone), everyone)
        for declare in prelude:
            declare(ctx, everyone)
        pending: dict[str, np.ndarray] = {"start": everyone}
        for _ in range(MAX_PARSER_STEPS):
            live = {s: m & ~ctx.parser_error for s, m in pending.items() if s not in ("accept", "reject")}
            live = {s: m for s, m in live.items() if m.any()}
            if "reject" in pending:
                ctx.parser_error |= pending["reject"]
            if not live:
                return
            pending = {}
            for state, mask in live.items():
                visits[label + state] = visits.get(label + state, 0) + int(mask.sum())
                body, transition = states[state]
                body(ctx, mask)
                mask = mask & ~ctx.parser_error
                for target, rows in transition(ctx, mask):
                    pending[target] = pending.get(target, np.zeros(ctx.n, dtype=bool)) | rows
        for state, mask in pending.items():
            if state != "accept":
                ctx.fail_rows(mask, timeout)

    return run


def _sequence(body: list[StmtFn]) -> StmtFn:
    def run(ctx: _Ctx, mask: np.ndarray) -> None:
        for stmt in body:
            stmt(ctx, mask & ~ctx.parser_error)

    return run


def _transition(
    compiler: _Compiler, node: Tree, states: dict[str, Tree]
) -> Callable[[_Ctx, np.ndarray], list[tuple[str, np.ndarray]]]:
    def target(token: Token) -> str:
        name = str(token)
        if name not in states and name not in ("accept", "reject"):
            raise compiler.fail(token, f"transition to unknown state {name!r}")
        return name

    if node.data == "goto":
        name = target(node.children[0])  # type: ignore[arg-type]
        return lambda ctx, mask: [(name, mask)]
    keys = [compiler.expr(e) for e in node.children[0].children]
    no_match = compiler.dp.error_codes["NoMatch"]
    cases = []
    for case in node.children[1:]:
        keyset, state = case.children
        items = keyset.children if keyset.data == "keyset_tuple" else [keyset]
        if len(items) != len(keys) and not (len(items) == 1 and items[0].data == "ks_default"):
            raise compiler.fail(case, f"keyset has {len(items)} values for {len(keys)} select keys")
        matchers: list[tuple[str, int, int] | None] = []
        for item in items:
            if item.data == "ks_default":
                matchers.append(None)
            elif item.data in ("ks_mask", "ks_range"):
                low, high = (compiler.constant(c) for c in item.children)
                matchers.append((item.data, low, high))
            elif item.data == "ks_value":
                matchers.append(("value", compiler.constant(item.children[0]), 0))
            else:
                raise compiler.fail(item, f"keyset {item.data} is outside the supported subset")
        cases.append((matchers, target(state)))  # type: ignore[arg-type]

    def run(ctx: _Ctx, mask: np.ndarray) -> list[tuple[str, np.ndarray]]:
        values = [_column(k.fn(ctx, mask), ctx.n, k.width) for k in keys]
        left = mask.copy()
        out = []
        for matchers, state in cases:
            rows = left.copy()
            for value, matcher, key in zip(values, matchers, keys, strict=False):
                if matcher is None:
                    continue
                form, want, other = matcher
                full = _mask_of(key.width or 64)
                if form == "value":
                    rows &= value == (want & full)
                elif form == "ks_mask":
                    rows &= (value & (other & full)) == (want & other & full)
                else:
                    rows &= (value >= (want & full)) & (value <= (other & full))
            if rows.any():
                out.append((state, rows))
                left &= ~rows
        if left.any():
            ctx.fail_rows(left, no_match)  # no case matched: P4's error.NoMatch
        return out

    return run


def _build_lookup(state: _TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    kinds = [k.kind for k in state.table.keys]
    entries = state.entries
    if {MatchKind.TERNARY, MatchKind.OPTIONAL, MatchKind.RANGE} & set(kinds) or not kinds:
        return _ternary_lookup(state)
    if MatchKind.LPM in kinds:
        return _lpm_lookup(state)
    columns = [[e.match[j] for e in entries] for j in range(len(kinds))]
    return _exact_lookup(columns, state.widths, np.arange(len(entries)))  # type: ignore[arg-type]


def _array(values: list[int], width: int) -> np.ndarray:
    return np.array(values, dtype=object if width > 64 else np.uint64)


def _exact_lookup(
    columns: list[list[int]], widths: tuple[int, ...], ids: np.ndarray
) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Exact match on several fields: each field becomes its rank among the entries' values,
    the ranks one mixed-radix code, and the code is found by binary search."""
    uniques = [np.unique(_array(col, w)) for col, w in zip(columns, widths, strict=True)]
    codes = np.zeros(len(ids), dtype=np.int64)
    for col, uniq, w in zip(columns, uniques, widths, strict=True):
        codes = codes * uniq.size + np.searchsorted(uniq, _array(col, w))
    order = np.argsort(codes, kind="stable")
    sorted_codes, sorted_ids = codes[order], ids[order]

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        n = keys[0].size
        row_codes = np.zeros(n, dtype=np.int64)
        ok = np.ones(n, dtype=bool)
        for key, uniq in zip(keys, uniques, strict=True):
            pos = np.minimum(np.searchsorted(uniq, key), uniq.size - 1)
            ok &= uniq[pos] == key
            row_codes = row_codes * uniq.size + pos
        at = np.minimum(np.searchsorted(sorted_codes, row_codes), sorted_codes.size - 1)
        ok &= sorted_codes[at] == row_codes
        return np.where(ok, sorted_ids[at], -1)

    return lookup


def _lpm_lookup(state: _TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Longest prefix first: one exact lookup per prefix length on the masked key."""
    kinds = [k.kind for k in state.table.keys]
    lpm = kinds.index(MatchKind.LPM)
    width = state.widths[lpm]
    groups: dict[int, list[int]] = {}
    for i, entry in enumerate(state.entries):
        groups.setdefault(entry.match[lpm][1], []).append(i)  # type: ignore[index]
    plans = []
    for prefix in sorted(groups, reverse=True):
        ids = np.array(groups[prefix], dtype=np.int64)
        prefix_mask = _mask_of(width) ^ _mask_of(width - prefix)
        columns = []
        for j in range(len(kinds)):
            column = [state.entries[i].match[j] for i in ids]
            columns.append([c[0] & prefix_mask for c in column] if j == lpm else column)
        plans.append((prefix_mask, _exact_lookup(columns, state.widths, ids)))

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        found = np.full(keys[0].size, -1, dtype=np.int64)
        for prefix_mask, exact in plans:
            masked = list(keys)
            bits = prefix_mask if keys[lpm].dtype == object else np.uint64(prefix_mask)
            masked[lpm] = keys[lpm] & bits
            hit = exact(masked)
            found = np.where(found < 0, hit, found)
            if (found >= 0).all():
                break
        return found

    return lookup


def _ternary_lookup(state: _TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Entries in priority order (highest first); the first one every key matches wins."""
    kinds = [k.kind for k in state.table.keys]
    order = sorted(range(len(state.entries)), key=lambda i: (-state.entries[i].priority, i))
    rules = []
    for i in order:
        terms = []
        for j, kind in enumerate(kinds):
            match, width = state.entries[i].match[j], state.widths[j]
            if kind == MatchKind.RANGE:
                terms.append((match[0], match[1], True))  # type: ignore[index]
                continue
            if kind == MatchKind.EXACT:
                value, bits = int(match), _mask_of(width)  # type: ignore[arg-type]
            elif kind == MatchKind.LPM:
                value, prefix = match  # type: ignore[misc]
                bits = _mask_of(width) ^ _mask_of(width - prefix)
            else:
                value, bits = match  # type: ignore[misc]
            terms.append((value & bits, bits, False))
        rules.append((i, terms))

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        n = keys[0].size if keys else 1
        found = np.full(n, -1, dtype=np.int64)
        left = np.ones(n, dtype=bool)
        for i, terms in rules:
            rows = left.copy()
            for key, (value, bits, is_range) in zip(keys, terms, strict=True):
                if is_range:  # value .. bits, inclusive
                    low, high = (b if key.dtype == object else np.uint64(b) for b in (value, bits))
                    rows &= (key >= low) & (key <= high)
                elif bits == 0:
                    continue
                elif key.dtype == object:
                    rows &= (key & bits) == value
                else:
                    rows &= (key & np.uint64(bits)) == np.uint64(value)
            found[rows] = i
            left &= ~rows
            if not left.any():
                break
        return found

    return lookup


def compile_program(program: Program) -> Datapath:
    """A fresh datapath for `program` (empty tables, zero counters)."""
    return Datapath(program)
