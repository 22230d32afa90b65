"""PNA's externs compiled for the interpreter core, for programs that read `pna.p4` itself:
table properties (add_on_miss, direct counters and meters), `add_entry`, the expiry timers,
`Hash`, `InternetChecksum`, `Register`, `mirror_packet`, `recirculate` and the port tests.
What they mean at run time, and the state they share, is described in `pna`, whose
`PnaRuntime` runs the batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.bits import read_bits, word_sum, write_bits
from cloudtwin.p4.cells import Meter
from cloudtwin.p4.context import Context, Expr, as_bool, literal
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.program import MatchKind
from cloudtwin.p4.tables import TableState
from cloudtwin.p4.values import as_column, fit

__all__ = [
    "DEFAULT_ENTRY",
    "Intent",
    "MAX_RECIRCULATIONS",
    "MIRROR_SLOTS",
    "NET_PORT",
    "NEVER",
    "PnaExterns",
    "RECIRCULATE",
]

MAX_RECIRCULATIONS = 16
"""The most times one packet may recirculate; one more pass is a recirculation loop."""


MIRROR_SLOTS = 4
"""Mirror slots per pass of the main control (PNA: at least four)."""


NET_PORT = 0
"""The network port; every other port is a host function (`is_host_port`)."""


RECIRCULATE = -2
"""The output port a packet heading for recirculation holds."""


DEFAULT_ENTRY = (1 << 31) - 1
"""The cell a DirectMeter uses for its table's default entry (a miss)."""


NEVER = np.iinfo(np.int64).max
"""The expiry time of an entry that does not expire."""


_EXPIRY_CALLS = (
    "set_entry_expire_time",
    "restart_expire_timer",
    "update_expire_info",
    "set_entry_expire_time_if",
)


_ADD_NAMES = ("action_name", "action_params", "expire_time_profile_id")


@dataclass
class _AddOnMiss:
    """An add-on-miss table's data-plane state: each entry's expiry (ns) and profile."""

    state: TableState
    expire_at: list[int] = field(default_factory=list)
    profile: list[int] = field(default_factory=list)
    index: dict[tuple[int, ...], int] = field(default_factory=dict)
    synced: int = -1

    def sync(self) -> None:
        """Entries the control plane installed (a new list): never expire."""
        if self.synced == id(self.state.entries) and len(self.expire_at) == len(self.state.entries):
            return
        entries = self.state.entries
        self.expire_at = [NEVER] * len(entries)
        self.profile = [0] * len(entries)
        self.index = {tuple(int(m) for m in e.match): i for i, e in enumerate(entries)}  # type: ignore[arg-type]
        self.synced = id(entries)


@dataclass
class Intent:
    """A table change one row asked for: added entry, new expiry profile, timer restart."""

    row: int
    seq: int
    kind: str  # "add", "expire" or "restart"
    table: str
    key: tuple[int, ...]
    time_ns: int
    profile: int = 0
    action: str = ""
    params: tuple[int, ...] = ()


def _where(compiler: Any, node: Tree) -> str:
    """`file:line:column` of `node` in the file it was written in (includes followed)."""
    return str(compiler.program.where(node))


def _arguments(compiler: Any, args: list[Tree], names: tuple[str, ...], node: Tree, what: str) -> list[Tree]:
    """Arguments by position or by name (`name = e`), in the order of `names`."""
    if len(args) != len(names):
        raise compiler.fail(
            node, f"{what} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}"
        )
    if not any(a.data == "named_arg" for a in args):
        return args
    if not all(a.data == "named_arg" for a in args):
        raise compiler.fail(node, f"{what}: arguments are all named or all by position")
    given = {str(a.children[0]): a.children[1] for a in args}
    unknown = sorted(set(given) - set(names))
    if unknown or len(given) != len(names):
        raise compiler.fail(
            node, f"{what}: unknown or repeated argument {unknown[0] if unknown else ''}".rstrip()
        )
    return [given[n] for n in names]


def _plain(compiler: Any, args: list[Tree], count: int, node: Tree, what: str) -> list[Tree]:
    if len(args) != count or any(a.data == "named_arg" for a in args):
        raise compiler.fail(node, f"{what} takes {count} arguments")
    return args


def _ones_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    total = a + b
    total = (total & np.uint64(0xFFFF)) + (total >> np.uint64(16))
    return (total & np.uint64(0xFFFF)) + (total >> np.uint64(16))


def _crc_table(polynomial: int) -> np.ndarray:
    """The byte-at-a-time table of a reflected CRC."""
    table = np.zeros(256, dtype=np.uint64)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ polynomial if crc & 1 else crc >> 1
        table[byte] = crc
    return table


_CRC16 = _crc_table(0xA001)  # CRC-16/ARC (0x8005 reflected, initial 0): bmv2's crc16


_CRC32 = _crc_table(0xEDB88320)  # CRC-32 (zlib's: initial and final XOR 0xffffffff)


def _digests(raw: np.ndarray, algorithm: str, width: int) -> np.ndarray:
    """Each row's hash of its bytes `raw` (rows, bytes), a column at a time over the rows."""
    if algorithm in ("CRC16", "CRC32"):
        table = _CRC16 if algorithm == "CRC16" else _CRC32
        crc = np.full(raw.shape[0], 0 if algorithm == "CRC16" else 0xFFFFFFFF, dtype=np.uint64)
        for j in range(raw.shape[1]):
            crc = (crc >> np.uint64(8)) ^ table[(crc ^ raw[:, j]) & np.uint64(0xFF)]
        return crc if algorithm == "CRC16" else crc ^ np.uint64(0xFFFFFFFF)
    if algorithm == "IDENTITY":  # the data's last `width` bits
        return read_bits(raw, 8 * raw.shape[1] - width, width)
    words = (raw[:, 0::2].astype(np.uint64) << np.uint64(8)) | raw[:, 1::2]
    total = words.sum(axis=1, dtype=np.uint64)
    for _ in range(4):  # fold the carries (a sum of 2^16 words needs three folds at most)
        total = (total & np.uint64(0xFFFF)) + (total >> np.uint64(16))
    return ~total & np.uint64(0xFFFF)


class PnaExterns:
    """The PNA state of one datapath (add-on-miss tables, direct counters, mirror counts) and
    the compilers of PNA's externs over it."""

    def __init__(self, dp: Datapath) -> None:
        self.dp = dp
        self.profiles_ns: dict[int, int] = {}
        self.aom: dict[str, _AddOnMiss] = {}
        self.direct: dict[str, str] = {}  # DirectCounter / DirectMeter -> its table
        self.direct_counts: dict[str, dict[int, list[int]]] = {}
        self.direct_meters: dict[str, Meter] = {}  # a DirectMeter's cell per entry (default: DEFAULT_ENTRY)
        self.mirror_copies: dict[int, int] = {}
        self.recirculations = 0
        self.recirculate_site = ""
        self.intents: list[Intent] | None = None
        self.lookups: list[tuple[str, np.ndarray, list[np.ndarray], np.ndarray, np.ndarray]] = []
        self.offset = 0
        self.seq = 0
        self.add_rows: dict[str, list[tuple[int, int | None]]] = {}  # per table: this round's adds
        # (row, expiry of the entry it added or None when the table was full)
        self.trace = False  # keep what the deparser emitted for every parsed packet (tests)
        self.emitted: list[bytes | None] = []
        program = dp.program
        source = program.source
        for node in program.arch_instances.values():
            if str(node.children[0]) != "crypto_accelerator":
                where = f"{source}:{node.meta.line}:{node.meta.column}"
                raise P4Error(
                    f"{where}: a top-level {node.children[0]} instance is outside the supported subset"
                )

    def attach_tables(self) -> None:
        """Read each table's PNA properties, once the datapath has its tables and externs."""
        for name, state in self.dp.tables.items():
            self.table_properties(name, state)

    # declarations ------------------------------------------------------------------
    def table_properties(self, name: str, state: TableState) -> None:
        props = state.table.properties
        source = self.dp.program.source
        for prop, value in props.items():
            where = f"{source}:{value.meta.line}:{value.meta.column}" if not value.meta.empty else source
            if prop == "add_on_miss":
                if value.data != "true" and value.data != "false":
                    raise P4Error(f"{where}: table {name}: add_on_miss is true or false")
                if value.data == "true":
                    if any(k.kind != MatchKind.EXACT for k in state.table.keys) or not state.table.keys:
                        raise P4Error(f"{where}: table {name}: an add_on_miss table has exact keys only")
                    self.aom[name] = _AddOnMiss(state)
            elif prop in ("pna_direct_counter", "pna_direct_meter"):
                extern = ".".join(str(t) for t in value.children[0].children) if value.data == "ref" else ""
                owner = self.dp.owners.get(name)
                found = owner.externs.get(extern) if owner is not None else None
                kind = "DirectCounter" if prop == "pna_direct_counter" else "DirectMeter"
                if found is None or found.kind != kind:
                    raise P4Error(f"{where}: table {name}: {prop} names no {kind} of its control")
                if extern in self.direct:
                    raise P4Error(f"{where}: {kind} {extern} belongs to table {self.direct[extern]} already")
                self.direct[extern] = name
                if kind == "DirectCounter":
                    self.direct_counts[extern] = {}
                else:
                    self.direct_meters[extern] = Meter(DEFAULT_ENTRY + 1, found.unit)
        for name, state in self.dp.tables.items():
            if name in self.aom or name in self.direct.values():
                state.hook = self.hook(name)

    def hook(self, name: str) -> Any:
        """The lookup hook of table `name`: expired entries miss; the row's entry and key
        are kept for the actions that follow (add_entry, timers, direct counters)."""
        aom = self.aom.get(name)
        state = self.dp.tables[name]
        widths = self.dp.widths

        def run(ctx: Context, mask: np.ndarray, columns: list[np.ndarray], index: np.ndarray) -> np.ndarray:
            if aom is not None:
                aom.sync()
                live = np.flatnonzero((index >= 0) & mask)
                if live.size:
                    expire = np.array(aom.expire_at, dtype=np.int64)[index[live]]
                    times = ctx.get("istd.timestamp_ns")[live].astype(np.int64)
                    index = index.copy()
                    index[live[times >= expire]] = -1
                for i, column in enumerate(columns):
                    widths.setdefault(f"$key.{name}.{i}", state.widths[i])
                    ctx.put(f"$key.{name}.{i}", column, mask)
                if self.intents is not None:
                    rows = np.flatnonzero(mask)
                    stamps = ctx.get("istd.timestamp_ns")[rows]
                    self.lookups.append(
                        (name, rows + self.offset, [c[rows] for c in columns], index[rows], stamps)
                    )
            widths.setdefault(f"$hit.{name}", 64)
            ctx.put(f"$hit.{name}", (index + 1).astype(np.uint64), mask)
            return index

        return run

    def owning_table(self, compiler: Any, node: Tree, what: str, default: bool) -> str:
        """The add-on-miss table whose default action (or one of whose actions) is being compiled."""
        action = compiler.compiling[-1] if compiler.compiling else ""
        for name, aom in self.aom.items():
            table = aom.state.table
            if (table.default_action == action) if default else (action in table.actions):
                return name
        place = "the default action" if default else "an action"
        raise compiler.fail(node, f"{what} is called only from {place} of an add_on_miss table")

    # expressions -------------------------------------------------------------------
    def value(self, compiler: Any, names: list[str], args: list[Tree], node: Tree) -> Expr | None:
        """A PNA extern call used as a value, or None when `names` is none of them."""
        if names in (["is_net_port"], ["is_host_port"]):
            (port,) = (compiler.expr(a) for a in _plain(compiler, args, 1, node, names[0]))
            net = names[0] == "is_net_port"
            return Expr(
                lambda ctx, mask: (as_column(port.fn(ctx, mask), ctx.n, 32) == NET_PORT) == net, 1, True
            )
        if names == ["SelectByDirection"]:
            cond, a, b = (compiler.expr(x) for x in _plain(compiler, args, 3, node, "SelectByDirection"))
            width = max(a.width or 0, b.width or 0) or None
            if width is None:
                raise compiler.fail(node, "SelectByDirection: a value of known width is needed")

            def select(ctx: Context, mask: np.ndarray) -> Any:
                chosen = as_bool(cond.fn(ctx, mask), ctx)
                left = as_column(fit(a.fn(ctx, mask), width), ctx.n, width)
                return np.where(chosen, left, as_column(fit(b.fn(ctx, mask), width), ctx.n, width))

            return Expr(select, width)
        if names in (["add_entry"], ["add_entry_if"]):
            return self.add_entry(compiler, args, node, names[0] == "add_entry_if")
        if len(names) >= 2 and names[-1] in ("minSizeInBytes", "minSizeInBits") and not args:
            header = compiler.header(Tree("path", [Token("NAME", n) for n in names[:-1]], node.meta))
            htype = compiler.dp.headers[header]
            size = htype.size_bytes if names[-1] == "minSizeInBytes" else htype.width_bits
            return literal(size, 32)
        if len(names) == 2:
            return self.method_value(compiler, names[0], names[1], args, node)
        return None

    def method_value(
        self, compiler: Any, name: str, method: str, args: list[Tree], node: Tree
    ) -> Expr | None:
        program = self.dp.program
        control = compiler.control
        extern = control.externs.get(name) if control is not None else None
        instance = program.arch_instances.get(name)
        if instance is not None and method == "get_results" and not args:
            return literal(program.constants.get("crypto_results_e.SUCCESS", 0), 32)
        if extern is not None and extern.kind == "register" and method == "read":
            return self.register_read(compiler, name, args, node)
        if extern is not None and extern.kind == "Hash" and method == "get_hash":
            return self.hash_value(compiler, extern, args, node)
        if extern is not None and extern.kind == "DirectMeter" and method == "execute":
            return self.direct_execute(compiler, name, args, node)
        kind = control.instances.get(name) if control is not None else None
        if kind == "InternetChecksum" and method in ("get", "get_state") and not args:
            key = self.checksum_key(compiler, name)
            if method == "get_state":
                return Expr(lambda ctx, mask: ctx.get(key), 16)
            return Expr(lambda ctx, mask: (~ctx.get(key)) & np.uint64(0xFFFF), 16)
        return None

    def add_entry(self, compiler: Any, args: list[Tree], node: Tree, conditional: bool) -> Expr:
        what = "add_entry_if" if conditional else "add_entry"
        names = (("do_add_entry",) if conditional else ()) + _ADD_NAMES
        ordered = _arguments(compiler, args, names, node, what)
        condition = compiler.expr(ordered[0]) if conditional else None
        action_node, params_node, profile_node = ordered[-3:]
        table = self.owning_table(compiler, node, what, default=True)
        state = self.dp.tables[table]
        if action_node.data != "string":
            raise compiler.fail(node, f"{what}: action_name is the action's name as a string")
        action_name = str(action_node.children[0]).strip('"')
        if action_name not in state.table.actions:
            raise compiler.fail(node, f"{what}: {action_name!r} is not an action of table {table}")
        params = self.action_params(compiler, action_name, params_node, node, what)
        profile = compiler.expr(profile_node)
        offset = self
        widths = state.widths

        size = state.table.size

        def run(ctx: Context, mask: np.ndarray) -> Any:
            rows_mask = mask if condition is None else mask & as_bool(condition.fn(ctx, mask), ctx)
            rows = np.flatnonzero(rows_mask)
            status = np.zeros(ctx.n, dtype=np.uint64)  # ADD_ENTRY_SUCCESS
            if rows.size and offset.intents is not None:
                keys = [ctx.get(f"$key.{table}.{i}")[rows].tolist() for i in range(len(widths))]
                values = [as_column(p.fn(ctx, rows_mask), ctx.n, w)[rows].tolist() for p, w in params]
                profiles = as_column(profile.fn(ctx, rows_mask), ctx.n, 8)[rows].tolist()
                stamps = ctx.get("istd.timestamp_ns")[rows]
                times = stamps.tolist()
                live = offset.live_entries(table, stamps.astype(np.int64)).tolist()
                tried = offset.add_rows.setdefault(table, [])
                for j, row in enumerate(rows.tolist()):
                    # the entries live at this packet's time: the table's, and those the round's
                    # earlier packets added that have not expired by now
                    added = sum(1 for _, expiry in tried if expiry is not None and expiry > times[j])
                    if live[j] + added >= size:  # the table is full: ADD_ENTRY_NOT_DONE
                        status[row] = 1
                        tried.append((row + offset.offset, None))
                        continue
                    tried.append(
                        (row + offset.offset, int(times[j]) + offset.profile_ns(int(profiles[j]) & 0xFF))
                    )
                    offset.seq += 1
                    offset.intents.append(
                        Intent(
                            row + offset.offset,
                            offset.seq,
                            "add",
                            table,
                            tuple(int(k[j]) for k in keys),
                            int(times[j]),
                            int(profiles[j]) & 0xFF,
                            action_name,
                            tuple(int(v[j]) for v in values),
                        )
                    )
            return status

        return Expr(run, 1)

    def action_params(
        self, compiler: Any, action_name: str, node: Tree, call: Tree, what: str
    ) -> list[tuple[Expr, int]]:
        """The values of `action_name`'s parameters from `action_params`: a struct (a variable,
        or `(T){...}`) whose fields are named like the action's parameters."""
        action = compiler.find_action(action_name, call)
        wanted = action.plane_params if action is not None else ()
        fields: dict[str, Expr] = {}
        if node.data == "struct_cast":
            type_name, *items = node.children
            items = [i for i in items if i is not None]
            declared = compiler.program.structs.get(str(type_name))
            if declared is None:
                raise compiler.fail(call, f"{what}: {type_name} is not a struct type")
            if items and len(items) != len(declared):
                raise compiler.fail(
                    call, f"{what}: {type_name} has {len(declared)} fields, {len(items)} given"
                )
            for k, (fname, _) in enumerate(declared):
                fields[fname] = compiler.expr(items[k]) if items else literal(0)
        elif node.data == "ref":
            key = compiler.key_of(node.children[0])
            shape = compiler.composite(key)
            if shape is None:
                raise compiler.fail(call, f"{what}: action_params is a struct")
            for suffix in shape[0]:
                fields[suffix.lstrip(".")] = compiler.load(key + suffix)
        else:
            raise compiler.fail(call, f"{what}: action_params is a struct variable or (T){{...}}")
        if sorted(fields) != sorted(p for p, _ in wanted):
            names = ", ".join(p for p, _ in wanted) or "none"
            raise compiler.fail(
                call, f"{what}: action_params must have one field per parameter of {action_name} ({names})"
            )
        return [(fields[p], w) for p, w in wanted]

    def direct_execute(self, compiler: Any, name: str, args: list[Tree], node: Tree) -> Expr:
        """`m.execute()` of a DirectMeter: the meter cell of the entry the packet hit (the
        default entry's on a miss), colour-blind (RFC 2698), in pna.p4's colour codes."""
        if args:
            raise compiler.fail(node, f"{name}.execute(color): a colour-aware meter is outside the subset")
        table = self.direct.get(name)
        if table is None:
            raise compiler.fail(node, f"DirectMeter {name} belongs to no table (pna_direct_meter)")
        meter = self.direct_meters[name]
        names = ("GREEN", "YELLOW", "RED")
        codes = np.array([self.dp.program.constants[f"PNA_MeterColor_t.{c}"] for c in names], dtype=np.uint64)

        def run(ctx: Context, mask: np.ndarray) -> Any:
            hit = ctx.get(f"$hit.{table}").astype(np.int64) - 1
            cells = np.where(hit >= 0, hit, DEFAULT_ENTRY).astype(np.uint64)
            return codes[meter.execute(ctx, mask, cells, 64)]

        return Expr(run, 32)

    def register_read(self, compiler: Any, name: str, args: list[Tree], node: Tree) -> Expr:
        """`r.read(index)`: the datapath's register read (an index past the register is an
        error at run time under PNA)."""
        (index,) = _plain(compiler, args, 1, node, f"{name}.read")
        return compiler.register_read(name, index, node)

    def hash_value(self, compiler: Any, extern: Any, args: list[Tree], node: Tree) -> Expr:
        if len(args) not in (1, 3):
            raise compiler.fail(
                node, f"{extern.name}.get_hash(data) or get_hash(base, data, max) is expected"
            )
        data = args[0] if len(args) == 1 else args[1]
        items = [c for c in data.children if c is not None] if data.data == "list_expr" else [data]
        fields = [compiler.expr(i) for i in items]
        widths = [f.width or 0 for f in fields]
        total = sum(widths)
        if any(f.width is None for f in fields) or total % (16 if extern.unit == "ONES_COMPLEMENT16" else 8):
            raise compiler.fail(node, f"{extern.name}.get_hash: the data must be fields of whole bytes")
        base = compiler.expr(args[0]) if len(args) == 3 else None
        limit = compiler.expr(args[2]) if len(args) == 3 else None
        where, algorithm, out_width = _where(compiler, node), extern.unit, extern.width

        def run(ctx: Context, mask: np.ndarray) -> Any:
            raw = np.zeros((ctx.n, total // 8), dtype=np.uint8)  # the fields' bytes, row by row
            offset = 0
            for f, width in zip(fields, widths, strict=True):
                write_bits(raw, as_column(f.fn(ctx, mask), ctx.n, f.width), offset, width)
                offset += width
            hashed = _digests(raw, algorithm, min(total, out_width))
            if limit is not None and base is not None:
                limits = as_column(limit.fn(ctx, mask), ctx.n, limit.width)
                if (mask & (limits == 0)).any():
                    raise P4Error(f"{where}: get_hash with max 0 at run time")
                bases = as_column(base.fn(ctx, mask), ctx.n, base.width)
                safe = np.where(limits == 0, 1, limits)
                if hashed.dtype == object or limits.dtype == object or bases.dtype == object:
                    hashed = bases.astype(object) + hashed.astype(object) % safe.astype(object)
                else:
                    hashed = bases + hashed % safe
            return as_column(fit(hashed, out_width), ctx.n, out_width)

        return Expr(run, out_width)

    def checksum_key(self, compiler: Any, name: str) -> str:
        key = f"$csum.{compiler.control.name}.{name}"
        self.dp.widths.setdefault(key, 16)
        return key

    # statements --------------------------------------------------------------------
    def statement(self, compiler: Any, names: list[str], args: list[Tree], node: Tree) -> Any:
        """A PNA extern call as a statement, or None when `names` is none of them."""
        if names == ["mirror_packet"]:
            return self.mirror(compiler, args, node)
        if names == ["recirc_packet"]:
            return self.recirculate(compiler, args, node)
        if len(names) == 1 and names[0] in _EXPIRY_CALLS:
            return self.expiry(compiler, names[0], args, node)
        if names in (["add_entry"], ["add_entry_if"]):
            value = self.add_entry(compiler, args, node, names[0] == "add_entry_if")
            return lambda ctx, mask: value.fn(ctx, mask)
        if len(names) != 2:
            return None
        name, method = names
        control = compiler.control
        program = self.dp.program
        if name in program.arch_instances:  # the null cipher: its settings are not even evaluated
            return lambda ctx, mask: None
        extern = control.externs.get(name) if control is not None else None
        if extern is not None and extern.kind == "DirectCounter" and method == "count":
            _plain(compiler, args, 0, node, f"{name}.count")
            return self.direct_count(name, node, compiler)
        if extern is not None and extern.kind == "Counter" and method == "count":
            return None
        kind = control.instances.get(name) if control is not None else None
        if kind == "InternetChecksum":
            return self.checksum_step(compiler, name, method, args, node)
        return None

    def mirror(self, compiler: Any, args: list[Tree], node: Tree) -> Any:
        slot, session = (compiler.expr(a) for a in _plain(compiler, args, 2, node, "mirror_packet"))
        where = _where(compiler, node)
        for k in range(MIRROR_SLOTS):
            self.dp.widths.setdefault(f"$mirror.{k}", 32)

        def run(ctx: Context, mask: np.ndarray) -> None:
            slots = as_column(slot.fn(ctx, mask), ctx.n, slot.width)
            if (mask & (slots >= np.uint64(MIRROR_SLOTS))).any():
                raise P4Error(f"{where}: mirror slot past 0..{MIRROR_SLOTS - 1} at run time")
            sessions = as_column(session.fn(ctx, mask), ctx.n, 16) + np.uint64(1)
            for k in range(MIRROR_SLOTS):
                rows = mask & (slots == np.uint64(k))
                if rows.any():
                    ctx.put(f"$mirror.{k}", sessions, rows)

        return run

    def recirculate(self, compiler: Any, args: list[Tree], node: Tree) -> Any:
        _plain(compiler, args, 0, node, "recirc_packet")
        self.recirculate_site = self.recirculate_site or _where(compiler, node)

        def run(ctx: Context, mask: np.ndarray) -> None:
            ctx.port = np.where(mask, RECIRCULATE, ctx.port)
            ctx.drop = ctx.drop & ~mask

        return run

    def expiry(self, compiler: Any, name: str, args: list[Tree], node: Tree) -> Any:
        table = self.owning_table(compiler, node, name, default=False)
        count = {"restart_expire_timer": 0, "set_entry_expire_time": 1}.get(
            name, 2 if name.endswith("_if") else 3
        )
        given = [compiler.expr(a) for a in _plain(compiler, args, count, node, name)]
        aom = self.aom[table]

        def run(ctx: Context, mask: np.ndarray) -> None:
            hit = ctx.get(f"$hit.{table}")
            rows_mask = mask & (hit > 0)
            restart = np.zeros(ctx.n, dtype=bool)
            if name == "restart_expire_timer":
                restart, change = rows_mask, np.zeros(ctx.n, dtype=bool)
            elif name == "set_entry_expire_time":
                change = rows_mask
            elif name == "set_entry_expire_time_if":
                change = rows_mask & as_bool(given[0].fn(ctx, mask), ctx)
            else:  # update_expire_info(update_aging_info, update_expire_time, profile)
                aging = rows_mask & as_bool(given[0].fn(ctx, mask), ctx)
                moved = as_bool(given[1].fn(ctx, mask), ctx)
                change, restart = aging & moved, aging & ~moved
            profiles = as_column(given[-1].fn(ctx, mask), ctx.n, 8) if given else as_column(0, ctx.n, 8)
            self.timer_intents(ctx, table, aom, hit, change, profiles, "expire")
            self.timer_intents(ctx, table, aom, hit, restart, profiles, "restart")

        return run

    def timer_intents(
        self,
        ctx: Context,
        table: str,
        aom: _AddOnMiss,
        hit: np.ndarray,
        rows_mask: np.ndarray,
        profiles: np.ndarray,
        kind: str,
    ) -> None:
        if self.intents is None or not rows_mask.any():
            return
        rows = np.flatnonzero(rows_mask)
        entries = (hit[rows].astype(np.int64) - 1).tolist()
        times = ctx.get("istd.timestamp_ns")[rows].tolist()
        chosen = profiles[rows].tolist()
        for j, row in enumerate(rows.tolist()):
            self.seq += 1
            match = aom.state.entries[entries[j]].match
            self.intents.append(
                Intent(
                    row + self.offset,
                    self.seq,
                    kind,
                    table,
                    tuple(int(m) for m in match),
                    int(times[j]),
                    int(chosen[j]) & 0xFF,
                )
            )

    def direct_count(self, name: str, node: Tree, compiler: Any) -> Any:
        table = self.direct.get(name)
        if table is None:
            raise compiler.fail(node, f"DirectCounter {name} belongs to no table (pna_direct_counter)")
        counts = self.direct_counts[name]

        def run(ctx: Context, mask: np.ndarray) -> None:
            rows = np.flatnonzero(mask)
            entries = ctx.get(f"$hit.{table}")[rows].astype(np.int64) - 1
            for entry in np.unique(entries).tolist():
                same = rows[entries == entry]
                cell = counts.setdefault(int(entry), [0, 0])
                cell[0] += int(same.size)
                cell[1] += int(ctx.length[same].sum())

        return run

    def checksum_step(self, compiler: Any, name: str, method: str, args: list[Tree], node: Tree) -> Any:
        key = self.checksum_key(compiler, name)
        if method == "clear" and not args:
            return lambda ctx, mask: ctx.put(key, 0, mask)
        if method == "set_state":
            (state,) = (compiler.expr(a) for a in _plain(compiler, args, 1, node, f"{name}.set_state"))
            return lambda ctx, mask: ctx.put(key, state.fn(ctx, mask), mask)
        if method not in ("add", "subtract") or len(args) != 1:
            raise compiler.fail(
                node, f"InternetChecksum {name}: {method} is outside clear/add/subtract/set_state"
            )
        data = args[0]
        items = [c for c in data.children if c is not None] if data.data == "list_expr" else [data]
        fields = [compiler.expr(i) for i in items]
        if any(f.width is None or f.width > 64 for f in fields) or sum(f.width or 0 for f in fields) % 16:
            raise compiler.fail(
                node, f"{name}.{method}: fields of known width up to 64 bits, whole 16-bit words"
            )
        subtract = method == "subtract"

        def run(ctx: Context, mask: np.ndarray) -> None:
            total = np.zeros(ctx.n, dtype=np.uint64)
            offset = 0
            for f in fields:
                total += word_sum(as_column(f.fn(ctx, mask), ctx.n, f.width), offset, f.width or 0)
                offset += f.width or 0
            total = _ones_add(total, np.zeros(ctx.n, dtype=np.uint64))
            if subtract:
                total = (~total) & np.uint64(0xFFFF)
            ctx.put(key, _ones_add(ctx.get(key), total), mask)

        return run

    def live_entries(self, table: str, times: np.ndarray) -> np.ndarray:
        """How many of `table`'s entries are live (not expired) at each of `times`."""
        aom = self.aom[table]
        aom.sync()
        expiry = np.sort(np.array(aom.expire_at, dtype=np.int64))
        return expiry.size - np.searchsorted(expiry, times, side="right")

    def profile_ns(self, profile: int) -> int:
        return self.profiles_ns.get(profile, profile * 1_000_000_000)
