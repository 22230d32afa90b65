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
from typing import Any

import numpy as np
from lark import Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.batch import BatchResult, PacketBatch
from cloudtwin.p4.bits import distinct_values, from_words, word_put, write_bits
from cloudtwin.p4.cells import Meter, SparseCells, new_cells
from cloudtwin.p4.context import Context, Expr, StmtFn
from cloudtwin.p4.declarations import ISTD_FIELDS
from cloudtwin.p4.parsing import compile_parser
from cloudtwin.p4.program import Control, HeaderType, MatchKind, Program, Table
from cloudtwin.p4.statements import Compiler
from cloudtwin.p4.tables import TableEntry, TableState
from cloudtwin.p4.values import as_column, mask_of

__all__ = ["CORE_ERRORS", "Datapath", "compile_program", "storage_widths"]


class Datapath:
    """A compiled program with its tables, counters and meters; `process` runs a batch."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.widths = storage_widths(program)
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
            from cloudtwin.p4.arch.pna import PnaRuntime

            self.pna = PnaRuntime(self)
        declared = {name: i for i, name in enumerate(program.errors)}
        self.error_codes = {name: declared.get(name, i) for i, name in enumerate(CORE_ERRORS)}
        self.tables: dict[str, TableState] = {}
        self.owners: dict[str, Control] = {}  # table, counter or meter -> its control
        for control in program.applied_controls():  # their keys' widths are known where they are applied
            for name, table in control.tables.items():
                self.own(name, control)
                self.tables[name] = TableState(table, ())
        for control in program.packet_controls():
            for name, table in control.tables.items():
                self.own(name, control)
                widths = tuple(self.key_width(table, k.expr, control) for k in table.keys)
                self.tables[name] = TableState(table, widths)
            for name in control.externs:
                self.own(name, control)
        per_packet = program.packet_controls()
        externs = {n: e for c in per_packet for n, e in c.externs.items()} | program.global_externs
        self.counters = {
            name: (new_cells(e.size), new_cells(e.size)) for name, e in externs.items() if e.kind == "Counter"
        }
        self.meters = {name: Meter(e.size, e.unit) for name, e in externs.items() if e.kind == "Meter"}
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
        compiler = Compiler(self)
        self.parser = compile_parser(compiler)
        self.egress_parser: Callable[[Context], None] | None = None  # PSA's
        if program.egress_parser is not None:
            self.egress_parser = compile_parser(Compiler(self), program.egress_parser)
        self.blocks: dict[str, StmtFn] = {}
        self.block_inits: dict[str, list[tuple[str, Expr]]] = {}
        for control in program.deparsers():
            if control.tables or control.externs:
                assert control.apply is not None
                what = f"deparser {control.name} with tables or externs"
                line, column = control.apply.meta.line, control.apply.meta.column  # (relocated later)
                raise P4Error(f"{program.source}:{line}:{column}: a {what} is outside the subset")
        for control in (*program.packet_controls(), *program.deparsers()):  # (a deparser's emits: no-ops)
            compiler = Compiler(self)
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

    def initialise(self, state: TableState) -> None:
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

    def run_block(self, name: str, ctx: Context, mask: np.ndarray) -> None:
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
        compiler = Compiler(self)
        compiler.roles = control.roles
        compiler.control = control
        width = compiler.expr(expr).width
        if width is None:
            raise compiler.fail(expr, f"table {table.name}: a key needs a known width")
        return width

    def const_entry(self, state: TableState, position: int, node: Tree) -> TableEntry:
        """An entry of a table's `entries` list; the earlier an entry, the higher its priority."""
        compiler = Compiler(self)
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
        values = tuple(a & mask_of(w) for a, (_, w) in zip(args, params, strict=True))
        priorities = state.table.priorities
        return TableEntry(match, action, values, -(priorities[position] if priorities else position))

    def entry_match(
        self, compiler: Compiler, item: Tree, kind: MatchKind, width: int
    ) -> int | tuple[int, int]:
        full = mask_of(width)
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
            if mask != full ^ mask_of(width - prefix):
                raise compiler.fail(item, f"an lpm key's mask {mask:#x} is not a prefix")
            return (value & mask, prefix)
        return (value & mask, mask)

    def default_arg(self, node: Tree) -> int:
        compiler = Compiler(self)
        return compiler.constant(node)

    def action_params(self, name: str, control: Control | None = None) -> tuple[tuple[str, int], ...]:
        control = control or self.program.control
        action = control.actions.get(name) or self.program.global_actions.get(name)
        return action.plane_params if action is not None else ()

    # tables --------------------------------------------------------------------------
    def lookup(self, state: TableState, keys: list[np.ndarray], n: int) -> np.ndarray:
        """Each row's matching entry of table `state` (-1: a miss)."""
        return state.lookup(keys, n)

    def rows_for(
        self, state: TableState, chosen: np.ndarray, taken: np.ndarray, action: str, mask: np.ndarray
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
            per_entry = state.param_column(action, j, width)
            column = per_entry[np.maximum(chosen, 0)] if per_entry.size else as_column(0, chosen.size, width)
            default = state.default[1][j] if state.default[0] == action else 0
            fallback = (
                np.uint64(default) if column.dtype != object else as_column(default, chosen.size, width)
            )
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

    def parse_and_control(self, ctx: Context) -> np.ndarray:
        """The parser over every packet of `ctx`, then the control's variables and the
        control over those it accepted; which it accepted."""
        self.parser(ctx)
        alive = ~ctx.parser_error
        for key, init in self.var_inits:
            ctx.put(key, init.fn(ctx, alive), alive)
        if alive.any():
            self.control(ctx, alive)
        return alive

    def single_pass(self, batch: PacketBatch) -> BatchResult:
        """One pass of every packet of `batch` through parser, control and deparser."""
        ctx = self.context(batch)
        self.parse_and_control(ctx)
        dropped = ctx.drop | ctx.parser_error
        data, length = self.deparse(ctx, ~dropped)
        return BatchResult(data, length, np.where(dropped, -1, ctx.port), dropped, ctx.parser_error)

    def payload_ends(self, ctx: Context) -> np.ndarray:
        """Where each row's payload ends in `ctx.data`: at the packet's length, or, in a batch
        of heads (narrower than its longest packet, see `process`), at the end of the head:
        the bytes past it follow the deparsed packet unchanged."""
        head = ctx.data.shape[1]
        if not ctx.n or head >= int(ctx.length.max()):
            return ctx.length
        if int(ctx.cursor.max()) > head:
            raise P4Error(f"{self.program.source}: the parser read past the {head}-byte head")
        return np.minimum(ctx.length, head)

    def context(self, batch: PacketBatch) -> Context:
        """A fresh run state for `batch`: nothing parsed, every packet headed for the drop."""
        n = len(batch)
        return Context(
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
        self, ctx: Context, alive: np.ndarray, order: tuple[str, ...] | None = None
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
        self, ctx: Context, alive: np.ndarray, emits: list[tuple[str, HeaderType]]
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

    def header_bytes(self, ctx: Context, header: str, htype: HeaderType, rows: np.ndarray) -> np.ndarray:
        """The wire bytes of `header` for `rows`, from its field columns."""
        all_rows = rows.size == ctx.n
        if all(w <= 64 for _, w in htype.fields):
            words = np.zeros((rows.size, -(-htype.size_bytes // 8)), dtype=np.uint64)
            for name, (bit, w) in htype.offsets().items():
                column = ctx.get(f"{header}.{name}")
                word_put(words, column if all_rows else column[rows], bit, w)
            return from_words(words, htype.size_bytes)
        raw = np.zeros((rows.size, htype.size_bytes), dtype=np.uint8)
        for name, (bit, w) in htype.offsets().items():
            write_bits(raw, ctx.get(f"{header}.{name}")[rows], bit, w)
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
        codes = distinct_values(code)
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
        distinct = distinct_values(starts)
        for start in distinct:
            same = group if distinct.size == 1 else group[starts == start]
            groups.append((slice(None) if same.size == n else same, emitted, int(start)))
    return groups


def storage_widths(program: Program) -> dict[str, int]:
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
    for control in (*program.packet_controls(), *program.applied_controls(), *program.deparsers()):
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


CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")
"""core.p4's errors in its order: a program that does not include it gets these codes."""


def compile_program(program: Program) -> Datapath:
    """A fresh datapath for `program` (empty tables, zero counters)."""
    return Datapath(program)
