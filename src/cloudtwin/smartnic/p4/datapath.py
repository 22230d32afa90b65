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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.smartnic.p4.frontend import ISTD_FIELDS, parse_number
from cloudtwin.smartnic.p4.pcap import Records, dense_rows
from cloudtwin.smartnic.p4.program import Action, Control, HeaderType, MatchKind, Program, Table

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

Value = np.ndarray | int
ExprFn = Callable[["_Ctx", np.ndarray], Value]
StmtFn = Callable[["_Ctx", np.ndarray], None]
ActionFn = Callable[["_Ctx", np.ndarray, list[np.ndarray]], None]

MAX_ACTION_CALLS = 10_000
"""The most action runs one action may make through the actions it calls (and they call)."""


@dataclass(frozen=True)
class PacketBatch:
    """Packets as a byte matrix: row i holds `length[i]` bytes; where each came from and when."""

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


def _const(value: int, width: int | None = None) -> _Expr:
    return _Expr(lambda ctx, mask: value, width)


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
        if len(names) == 1 and self.control is not None and names[0] in self.control.variables:
            return self.load(f"var.{self.control.name}.{names[0]}")
        if raw in self.program.constants:
            return _const(self.program.constants[raw])
        if key in self.widths:
            return self.load(key)
        raise self.fail(node, f"unknown name {raw!r}")

    def load(self, key: str) -> _Expr:
        width = self.widths[key]
        return _Expr(lambda ctx, mask: ctx.get(key), width)

    def lvalue(self, node: Tree) -> tuple[str, int]:
        names = self.path(node)
        if len(names) == 1 and names[0] in self.params:
            raise self.fail(node, f"action parameter {names[0]!r} is read-only")
        if len(names) == 1 and self.control is not None and names[0] in self.control.variables:
            key = f"var.{self.control.name}.{names[0]}"
        else:
            key = ".".join(names)
        if key not in self.widths or key.startswith("istd."):
            raise self.fail(node, f"{'.'.join(str(t) for t in node.children)!r} cannot be assigned")
        return key, self.widths[key]

    def header(self, node: Tree) -> str:
        key = ".".join(self.path(node))
        if key not in self.program.header_instances:
            raise self.fail(node, f"{key!r} is not a header")
        return key

    # expressions -------------------------------------------------------------------
    def expr(self, node: Tree) -> _Expr:
        kind = node.data
        if kind == "number":
            value, width = parse_number(str(node.children[0]))
            return _const(value if width is None else value & _mask_of(width), width)
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
        if kind == "cast":
            width = parse_number(str(node.children[0].children[0]))[0]
            inner = self.expr(node.children[1])
            return _Expr(lambda ctx, mask: _fit(inner.fn(ctx, mask), width), width)
        raise self.fail(node, f"expression {kind} is outside the supported subset")

    def constant(self, node: Tree) -> int:
        expr = self.expr(node)
        if expr.width is not None and not node.data == "number":
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
        width = inner.width or 64
        if kind == "bnot":
            return _Expr(lambda ctx, mask: _fit(_invert(inner.fn(ctx, mask), width), width), width)
        return _Expr(lambda ctx, mask: _fit(_sub(0, inner.fn(ctx, mask), width), width), width)

    def binary(self, node: Tree, kind: str) -> _Expr:
        left, right = (self.expr(c) for c in node.children)
        if kind in ("land", "lor"):
            op = np.logical_and if kind == "land" else np.logical_or
            return _Expr(
                lambda ctx, mask: op(_as_bool(left.fn(ctx, mask), ctx), _as_bool(right.fn(ctx, mask), ctx)),
                1,
                True,
            )
        if kind == "concat":
            if left.width is None or right.width is None:
                raise self.fail(node, "++ needs operands of known width (cast the literal)")
            total, shift = left.width + right.width, right.width
            return _Expr(
                lambda ctx, mask: _concat(left.fn(ctx, mask), right.fn(ctx, mask), shift, total), total
            )
        width = left.width if left.width is not None else right.width
        if left.width is not None and right.width is not None and kind not in ("shl", "shr"):
            width = max(left.width, right.width)
        compute = _BINARY[kind]
        if kind in _COMPARE:
            return _Expr(
                lambda ctx, mask: _compare(compute, left.fn(ctx, mask), right.fn(ctx, mask), width), 1, True
            )
        w = width or 64
        return _Expr(
            lambda ctx, mask: _fit(_arith(kind, left.fn(ctx, mask), right.fn(ctx, mask), w), w), width
        )

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
        if names[-1] == "isValid":
            header = self.header(Tree("path", path.children[:-1], path.meta))
            return _Expr(lambda ctx, mask: ctx.header_valid(header).copy(), 1, True)
        if names == ["checksum16"]:
            return self.checksum(args, call)
        if len(names) == 2 and names[1] == "execute":
            return self.meter_execute(names[0], args, call)
        raise self.fail(call, f"call {'.'.join(names)}(...) is not an expression in the supported subset")

    def checksum(self, args: list[Tree], node: Tree) -> _Expr:
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
        assert self.control is not None
        if len(names) != 1 or names[0] not in self.control.tables:
            raise self.fail(node, f"{'.'.join(names)!r} is not a table of {self.control.name}")
        state = self.dp.tables[names[0]]
        keys = [self.expr(k.expr) for k in state.table.keys]
        actions = {a: self.action_runner(a, node) for a in state.table.actions}
        actions.setdefault(state.table.default_action, self.action_runner(state.table.default_action, node))

        def apply(ctx: _Ctx, mask: np.ndarray) -> np.ndarray:
            values = [k.fn(ctx, mask) for k in keys]
            index = self.dp.lookup(
                state, [_column(v, ctx.n, w) for v, w in zip(values, state.widths, strict=True)]
            )
            hit = (index >= 0) & mask
            if hit.any():
                _add_at(state.hits, index[hit], 1)
            chosen = np.where(hit, index, -1)
            codes = _entry_action_codes(state)
            # each row's action, as its position in the table's action list (-1: a miss)
            taken = np.where(hit, codes[np.maximum(chosen, 0)], -1) if codes.size else chosen
            for name, run in actions.items():
                rows = self.dp.rows_for(state, chosen, taken, name, mask)
                if rows is not None:
                    run(ctx, rows[0], rows[1])
            return hit

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
        saved = self.params
        self.params = {p: f"param.{action.name}.{p}" for p, _ in action.params}
        self.compiling.append(name)
        self.calls[name] = 1
        try:
            body = self.block(action.body)
        finally:
            self.compiling.pop()
            self.params = saved
        keys = [f"param.{action.name}.{p}" for p, _ in action.params]

        runs = self.dp.action_runs

        def run(ctx: _Ctx, mask: np.ndarray, params: list[np.ndarray]) -> None:
            runs[action.name] = runs.get(action.name, 0) + int(mask.sum())
            for key, value in zip(keys, params, strict=True):
                ctx.values[key] = _column(_fit(value, ctx.widths[key]), ctx.n, ctx.widths[key])
            body(ctx, mask)

        self.runners[name] = run
        self.count_calls(name, node)
        return run

    def count_calls(self, name: str, node: Tree) -> None:
        """Add the runs of action `name` to the action being compiled, if any."""
        if not self.compiling:
            return
        caller = self.compiling[-1]
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
        return _Expr(lambda ctx, mask: meter.execute(ctx, mask, index.fn(ctx, mask), index.width), 2)

    # statements ----------------------------------------------------------------------
    def block(self, node: Tree) -> StmtFn:
        stmts = [self.statement(s) for s in node.children]

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            for stmt in stmts:
                if ctx.any_exit:  # rows that ran `exit` run nothing more
                    mask = mask & ~ctx.exited
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
        if kind == "if_stmt":
            return self.if_stmt(node)
        if kind == "call_stmt":
            return self.call_stmt(node.children[0])
        if kind == "var_decl":
            raise self.fail(node, "declare variables at the top of the control, not in a block")
        raise self.fail(node, f"statement {kind} is outside the supported subset")

    def assign(self, node: Tree) -> StmtFn:
        target, value_node = node.children
        path, slice_ = target.children
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
                rest = mask & ~taken
                if ctx.any_exit:
                    rest &= ~ctx.exited
                if rest.any():
                    other(ctx, rest)

        return run

    def call_stmt(self, call: Tree) -> StmtFn:
        if call.data == "call_member":
            expr = self.call_expr(call)

            def evaluate(ctx: _Ctx, mask: np.ndarray) -> None:
                expr.fn(ctx, mask)

            return evaluate
        path, *args = call.children
        args = [a for a in args if a is not None]
        names = self.path(path)
        method = names[-1]
        target = names[:-1]
        if method in ("setValid", "setInvalid"):
            header = self.header(Tree("path", path.children[:-1], path.meta))
            flag = method == "setValid"

            def set_valid(ctx: _Ctx, mask: np.ndarray) -> None:
                valid = ctx.header_valid(header)
                ctx.valid[header] = np.where(mask, flag, valid)

            return set_valid
        if method == "apply":
            apply = self.table_apply(target, call)

            def apply_table(ctx: _Ctx, mask: np.ndarray) -> None:
                apply(ctx, mask)

            return apply_table
        if method == "extract" and target == ["pkt"]:
            return self.extract(args, call)
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
        if len(names) == 1 and self.control is not None:
            return self.direct_action(names[0], args, call)
        raise self.fail(call, f"call {'.'.join(names)}(...) is outside the supported subset")

    def direct_action(self, name: str, args: list[Tree], node: Tree) -> StmtFn:
        action = self.find_action(name, node)
        if action is None:
            return lambda ctx, mask: None
        if len(args) != len(action.params):
            raise self.fail(node, f"action {name} takes {len(action.params)} arguments, got {len(args)}")
        exprs = [self.expr(a) for a in args]
        run = self.action_runner(name, node)
        return lambda ctx, mask: run(
            ctx,
            mask,
            [_column(e.fn(ctx, mask), ctx.n, w) for e, (_, w) in zip(exprs, action.params, strict=True)],
        )

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

    def extract(self, args: list[Tree], node: Tree) -> StmtFn:
        if len(args) != 1 or args[0].data != "ref":
            raise self.fail(node, "extract takes one header")
        header = self.header(args[0].children[0])
        htype = self.program.header_instances[header]
        size = htype.size_bytes
        plan = [(f"{header}.{name}", offset, width) for name, (offset, width) in htype.offsets().items()]
        narrow = all(width <= 64 for _, width in htype.fields)

        def run(ctx: _Ctx, mask: np.ndarray) -> None:
            short = mask & (ctx.cursor + size > ctx.length)
            ctx.parser_error |= short
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
    out = np.empty(raw.shape[0], dtype=object)
    chunk = raw[:, first : last + 1]
    for i in range(raw.shape[0]):
        out[i] = (int.from_bytes(chunk[i].tobytes(), "big") >> tail) & _mask_of(width)
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
    keep_bits = ~(_mask_of(width) << tail) & _mask_of(8 * span)
    for i in range(out.shape[0]):
        old = int.from_bytes(out[i, first : last + 1].tobytes(), "big")
        merged = (old & keep_bits) | ((int(value[i]) & _mask_of(width)) << tail)
        out[i, first : last + 1] = np.frombuffer(merged.to_bytes(span, "big"), dtype=np.uint8)


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

    def configure(self, index: int, cir: float, cburst: float, pir: float, pburst: float) -> None:
        self.config[index] = (cir, cburst, pir, pburst)
        self.tokens[index] = [cburst, pburst, -1.0]

    def execute(self, ctx: _Ctx, mask: np.ndarray, index: Value, width: int | None) -> np.ndarray:
        colours = np.zeros(ctx.n, dtype=np.uint64)
        rows, cells = _in_array(index, width, ctx.n, self.size, mask)
        times = ctx.get("istd.timestamp_ns")
        for row, cell in zip(np.flatnonzero(rows).tolist(), cells.tolist(), strict=True):
            config = self.config.get(cell)
            if config is None:
                continue  # an unconfigured cell (or an index outside the array) marks green
            cir, cburst, pir, pburst = config
            state = self.tokens[cell]
            now = int(times[row]) * 1e-9
            if state[2] >= 0:
                elapsed = now - state[2]
                state[0] = min(cburst, state[0] + cir * elapsed)
                state[1] = min(pburst, state[1] + pir * elapsed)
            state[2] = now
            amount = 1.0 if self.unit == "packets" else float(ctx.length[row])
            if state[1] < amount:
                colours[row] = RED
            elif state[0] < amount:
                colours[row] = YELLOW
                state[1] -= amount
            else:
                colours[row] = GREEN
                state[0] -= amount
                state[1] -= amount
        return colours


class Datapath:
    """A compiled program with its tables, counters and meters; `process` runs a batch."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.widths = _storage_widths(program)
        self.state_visits: dict[str, int] = {}
        self.action_runs: dict[str, int] = {}
        self.tables = {
            name: _TableState(table, tuple(self.key_width(table, k.expr) for k in table.keys))
            for name, table in program.control.tables.items()
        }
        self.counters = {
            name: (_cells(e.size), _cells(e.size))
            for name, e in program.control.externs.items()
            if e.kind == "Counter"
        }
        self.meters = {
            name: _Meter(e.size, e.unit) for name, e in program.control.externs.items() if e.kind == "Meter"
        }
        for state in self.tables.values():
            args = tuple(self.default_arg(a) for a in state.table.default_args)
            state.default = (state.table.default_action, args)
            state.invalidate()
        compiler = _Compiler(self)
        self.parser = _compile_parser(compiler)
        compiler.roles = program.control.roles
        compiler.control = program.control
        assert program.control.apply is not None
        self.control = compiler.block(program.control.apply)
        self.var_inits = [
            (f"var.{program.control.name}.{name}", compiler.expr(init))
            for name, (_, init) in program.control.variables.items()
            if init is not None
        ]

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
        return out

    def key_width(self, table: Table, expr: Tree) -> int:
        compiler = _Compiler(self)
        compiler.roles = self.program.control.roles
        compiler.control = self.program.control
        width = compiler.expr(expr).width
        if width is None:
            raise compiler.fail(expr, f"table {table.name}: a key needs a known width")
        return width

    def default_arg(self, node: Tree) -> int:
        compiler = _Compiler(self)
        return compiler.constant(node)

    def action_params(self, name: str) -> tuple[tuple[str, int], ...]:
        action = self.program.control.actions.get(name) or self.program.global_actions.get(name)
        return action.params if action is not None else ()

    # tables --------------------------------------------------------------------------
    def lookup(self, state: _TableState, keys: list[np.ndarray]) -> np.ndarray:
        if not state.entries:
            return np.full(keys[0].size if keys else 0, -1, dtype=np.int64)
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
        for j, (_, width) in enumerate(self.action_params(action)):
            per_entry = _entry_params(state, action, j, width)
            column = per_entry[np.maximum(chosen, 0)] if per_entry.size else _column(0, chosen.size, width)
            default = state.default[1][j] if state.default[0] == action else 0
            fallback = np.uint64(default) if column.dtype != object else _column(default, chosen.size, width)
            column = np.where(chosen >= 0, column, fallback)
            params.append(column)
        return rows, params

    # running -------------------------------------------------------------------------
    def process(self, batch: PacketBatch) -> BatchResult:
        """Run every packet of `batch` through parser, control and deparser."""
        n = len(batch)
        ctx = _Ctx(
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
        self.parser(ctx)
        alive = ~ctx.parser_error
        for key, init in self.var_inits:
            ctx.put(key, init.fn(ctx, alive), alive)
        if alive.any():
            self.control(ctx, alive)
        dropped = ctx.drop | ctx.parser_error
        data, length = self.deparse(ctx, ~dropped)
        return BatchResult(data, length, np.where(dropped, -1, ctx.port), dropped, ctx.parser_error)

    def deparse(self, ctx: _Ctx, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Valid emitted headers, then the payload after the parser's cursor.

        Rows are grouped by which headers they emit and where their payload starts (a
        batch has few such groups); each group is written as blocks: its headers' bytes
        side by side, then its payload shifted into place."""
        program = self.program
        n = ctx.n
        emits = [(h, program.header_instances[h]) for h in program.emit_order]
        valid = [ctx.header_valid(h) & alive for h, _ in emits]
        header_len = np.zeros(n, dtype=np.int64)
        for v, (_, htype) in zip(valid, emits, strict=True):
            header_len += v * htype.size_bytes
        length = np.where(alive, ctx.length + header_len - ctx.cursor, 0)
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
        for name, width in htype.fields:
            widths[f"{header}.{name}"] = width
    widths.update(program.metadata_fields)
    for name, (width, _) in program.control.variables.items():
        widths[f"var.{program.control.name}.{name}"] = width
    for action in [*program.control.actions.values(), *program.global_actions.values()]:
        for pname, width in action.params:
            widths[f"param.{action.name}.{pname}"] = width
    return widths


def _compile_parser(compiler: _Compiler) -> Callable[[_Ctx], None]:
    parser = compiler.program.parser
    compiler.roles = parser.roles
    states: dict[str, tuple[StmtFn, Callable[[_Ctx, np.ndarray], list[tuple[str, np.ndarray]]]]] = {}
    for name, node in parser.states.items():
        body = [compiler.statement(s) for s in node.children[1:-1]]
        states[name] = (_sequence(body), _transition(compiler, node.children[-1], parser.states))

    visits = compiler.dp.state_visits

    def run(ctx: _Ctx) -> None:
        pending: dict[str, np.ndarray] = {"start": np.ones(ctx.n, dtype=bool)}
        for _ in range(MAX_PARSER_STEPS):
            live = {s: m & ~ctx.parser_error for s, m in pending.items() if s not in ("accept", "reject")}
            live = {s: m for s, m in live.items() if m.any()}
            if "reject" in pending:
                ctx.parser_error |= pending["reject"]
            if not live:
                return
            pending = {}
            for state, mask in live.items():
                visits[state] = visits.get(state, 0) + int(mask.sum())
                body, transition = states[state]
                body(ctx, mask)
                mask = mask & ~ctx.parser_error
                for target, rows in transition(ctx, mask):
                    pending[target] = pending.get(target, np.zeros(ctx.n, dtype=bool)) | rows
        for state, mask in pending.items():
            if state != "accept":
                ctx.parser_error |= mask

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
    cases = []
    for case in node.children[1:]:
        keyset, state = case.children
        items = keyset.children if keyset.data == "keyset_tuple" else [keyset]
        if len(items) != len(keys) and not (len(items) == 1 and items[0].data == "ks_default"):
            raise compiler.fail(case, f"keyset has {len(items)} values for {len(keys)} select keys")
        matchers: list[tuple[int, int | None] | None] = []
        for item in items:
            if item.data == "ks_default":
                matchers.append(None)
            elif item.data == "ks_mask":
                matchers.append((compiler.constant(item.children[0]), compiler.constant(item.children[1])))
            else:
                matchers.append((compiler.constant(item.children[0]), None))
        cases.append((matchers, target(state)))  # type: ignore[arg-type]

    def run(ctx: _Ctx, mask: np.ndarray) -> list[tuple[str, np.ndarray]]:
        values = [_column(k.fn(ctx, mask), ctx.n, k.width) for k in keys]
        left = mask.copy()
        out = []
        for matchers, state in cases:
            rows = left.copy()
            for value, matcher in zip(values, matchers, strict=False):
                if matcher is None:
                    continue
                want, bits = matcher
                if bits is None:
                    rows &= value == want
                else:
                    rows &= (value & bits) == (want & bits)
            if rows.any():
                out.append((state, rows))
                left &= ~rows
        if left.any():
            out.append(("reject", left))  # no case matched: P4's error.NoMatch
        return out

    return run


def _build_lookup(state: _TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    kinds = [k.kind for k in state.table.keys]
    entries = state.entries
    if MatchKind.TERNARY in kinds or not kinds:
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
            if kind == MatchKind.EXACT:
                value, bits = int(match), _mask_of(width)  # type: ignore[arg-type]
            elif kind == MatchKind.LPM:
                value, prefix = match  # type: ignore[misc]
                bits = _mask_of(width) ^ _mask_of(width - prefix)
            else:
                value, bits = match  # type: ignore[misc]
            terms.append((value & bits, bits))
        rules.append((i, terms))

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        n = keys[0].size if keys else 1
        found = np.full(n, -1, dtype=np.int64)
        left = np.ones(n, dtype=bool)
        for i, terms in rules:
            rows = left.copy()
            for key, (value, bits) in zip(keys, terms, strict=True):
                if bits == 0:
                    continue
                if key.dtype == object:
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
