"""PNA on the interpreter core, for programs that read `pna.p4` itself.

A packet runs the main parser, the main control and the main deparser, as with the
built-in PNA-like declarations; on top of that this module gives the core what pna.p4
declares:

- `is_net_port(p)` (port 0 is the network), `is_host_port(p)`, `SelectByDirection(c, a, b)`;
  `istd.recirculated`, `istd.timestamp` (the packet's capture time in ns);
- add-on-miss tables (`add_on_miss = true`, exact keys only): `add_entry` /
  `add_entry_if` in the table's default action add an entry keyed by the packet's own key
  values; entries added so expire by their expire-time profile (profile p: `p` seconds
  unless `profiles_ns` says otherwise; profile 0 at once), measured on packet timestamps:
  a packet at or after an entry's expiry misses it (`set_entry_expire_time`,
  `restart_expire_timer`, `update_expire_info`, `set_entry_expire_time_if` in a hit action
  move it). Entries the control plane installs never expire;
- batches run in rounds so that a batch gives what one packet at a time gives: a round
  runs the rows, then replays the table changes it asked for in packet order; at the first
  row whose lookup would have come out otherwise, every counter and state is put back,
  the rows before it run again, and the next round starts at that row;
- `DirectCounter` (per entry of the table naming it in `pna_direct_counter`; a miss counts
  the default entry, reported as cell -1), `DirectMeter` (no control plane configures one
  yet: every packet is GREEN), `Register` (programs with one run a packet at a time),
  `Hash` (CRC16 as bmv2's crc16, CRC32, ONES_COMPLEMENT16, IDENTITY), `InternetChecksum`;
- `mirror_packet(slot, session)`: the last call per slot (0..3) wins; copies are counted
  per session (`mirror_copies`), none is written out (no session is configured with a port);
- `recirc_packet()` (the extern the IPsec example declares): a forwarding decision like
  `send_to_port` (the last one wins); the deparsed packet runs again with
  `istd.recirculated` true, after the batch's pass; more than MAX_RECIRCULATIONS passes
  is a recirculation loop, refused naming the call;
- the IPsec example's `crypto_accelerator` as a null cipher: its settings are accepted,
  the bytes stay as they are and `get_results()` is `SUCCESS`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.batch import BatchResult, PacketBatch
from cloudtwin.p4.bits import read_bits, word_sum, write_bits
from cloudtwin.p4.cells import Meter, SparseCells
from cloudtwin.p4.context import Context, Expr, as_bool, literal
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.depth import copies_packets
from cloudtwin.p4.program import MatchKind
from cloudtwin.p4.tables import TableEntry, TableState
from cloudtwin.p4.values import as_column, fit

__all__ = ["MAX_RECIRCULATIONS", "MIRROR_SLOTS", "NET_PORT", "PnaRuntime", "run_entries"]

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
class _Intent:
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


class PnaRuntime:
    """The PNA state of one datapath: add-on-miss tables, direct counters, mirror counts;
    `process` runs a batch (rounds, recirculation)."""

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
        self.intents: list[_Intent] | None = None
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
                        _Intent(
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
                _Intent(
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

    # control plane -----------------------------------------------------------------
    def settings(self, raw: Any) -> Any:
        """The `pna:` section of an entries document, checked (NicError naming the key):
        `expire_time_profiles: {profile: duration}` and `default_actions: {table: {action,
        params}}` (a table whose default action is not `const`)."""
        from cloudtwin.errors import NicError, ScenarioError
        from cloudtwin.p4.entries import parse_value
        from cloudtwin.scenario.units import parse_time

        if raw is None:
            return {}, {}, []
        if not isinstance(raw, dict) or set(raw) - {
            "expire_time_profiles",
            "default_actions",
            "direct_meters",
        }:
            raise NicError(
                "pna: a mapping with `expire_time_profiles`, `default_actions` and/or `direct_meters`"
            )
        profiles: dict[int, int] = {}
        for key, value in (raw.get("expire_time_profiles") or {}).items():
            where = f"pna.expire_time_profiles.{key}"
            if not isinstance(key, int) or isinstance(key, bool) or not 0 <= key <= 255:
                raise NicError(f"{where}: a profile is a number 0..255")
            try:
                seconds = parse_time(value)
            except (ScenarioError, ValueError, TypeError) as err:
                raise NicError(f"{where}: {err}") from err
            if not 0 <= seconds <= 10**9:
                raise NicError(f"{where}: a duration of 0 s to 10^9 s")
            profiles[key] = round(seconds * 1e9)
        defaults: dict[str, tuple[str, tuple[int, ...]]] = {}
        for table, given in (raw.get("default_actions") or {}).items():
            where = f"pna.default_actions.{table}"
            state = self.dp.tables.get(str(table))
            if state is None:
                raise NicError(f"{where}: the program has no table {table!r}")
            if state.table.default_is_const:
                raise NicError(f"{where}: the table's default action is const")
            if not isinstance(given, dict) or set(given) - {"action", "params"} or "action" not in given:
                raise NicError(f"{where}: a mapping with action and params")
            action = str(given["action"])
            if action not in state.table.actions and action != "NoAction":
                raise NicError(f"{where}.action: {action!r} is not an action of {table}")
            declared = self.dp.action_params(action, self.dp.owners.get(str(table)))
            params = given.get("params") or {}
            if not isinstance(params, dict) or sorted(params) != sorted(p for p, _ in declared):
                names = ", ".join(p for p, _ in declared) or "none"
                raise NicError(f"{where}.params: give exactly the parameters of {action} ({names})")
            values = tuple(parse_value(params[p], w, f"{where}.params.{p}") for p, w in declared)
            defaults[str(table)] = (action, values)
        return profiles, defaults, self.meter_settings(raw.get("direct_meters") or {})

    def meter_settings(self, raw: Any) -> list[tuple[str, int, tuple[float, float, float, float]]]:
        """`direct_meters: {m: [{entry, cir, cburst, pir, pburst}, ...]}`: the rates of the
        cell of entry `entry` (its position in the table's entries; `default` for a miss)."""
        from cloudtwin.errors import NicError, ScenarioError
        from cloudtwin.scenario.units import parse_rate, parse_size

        out = []
        if not isinstance(raw, dict):
            raise NicError("pna.direct_meters: a mapping of DirectMeter name to a list of settings")
        for name, rows in raw.items():
            meter = self.direct_meters.get(str(name))
            if meter is None or not isinstance(rows, list):
                raise NicError(
                    f"pna.direct_meters.{name}: a list of settings of one of the program's DirectMeters"
                )
            for i, row in enumerate(rows):
                where = f"pna.direct_meters.{name}.{i}"
                if not isinstance(row, dict) or set(row) != {"entry", "cir", "cburst", "pir", "pburst"}:
                    raise NicError(f"{where}: give entry, cir, cburst, pir and pburst")
                entry = row["entry"]
                if entry == "default":
                    entry = DEFAULT_ENTRY
                elif not isinstance(entry, int) or isinstance(entry, bool) or not 0 <= entry < DEFAULT_ENTRY:
                    raise NicError(f"{where}.entry: an entry's position (from 0) or `default`")
                try:
                    if meter.unit == "packets":
                        rates = (
                            float(row["cir"]),
                            float(row["cburst"]),
                            float(row["pir"]),
                            float(row["pburst"]),
                        )
                    else:
                        rates = (
                            parse_rate(row["cir"]) / 8, float(parse_size(row["cburst"])),
                            parse_rate(row["pir"]) / 8, float(parse_size(row["pburst"])),
                        )  # fmt: skip
                except (ValueError, TypeError, ScenarioError) as err:
                    raise NicError(f"{where}: {err}") from err
                if not all(0 <= r < float("inf") for r in rates) or rates[2] < rates[0]:
                    raise NicError(f"{where}: finite rates, the peak rate at least the committed rate")
                out.append((str(name), int(entry), rates))
        return out

    def apply(self, settings: Any) -> None:
        """Install checked `settings`: expire-time profiles, default actions, direct meters."""
        profiles, defaults, meters = settings
        self.profiles_ns.update(profiles)
        for name, entry, (cir, cburst, pir, pburst) in meters:
            self.direct_meters[name].configure(entry, cir, cburst, pir, pburst)
        for table, default in defaults.items():
            self.dp.tables[table].default = default

    # running -----------------------------------------------------------------------
    def counter_totals(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Each DirectCounter's entries (-1: the default entry): (packets, bytes); with
        `mirror_packet` (copies per session) and `recirc_packet` (passes, as cell 0) when
        a packet asked for them, so that `nic run` reports them with the counters."""
        out = {
            name: {e: (p, b) for e, (p, b) in sorted(cells.items())}
            for name, cells in self.direct_counts.items()
        }
        if self.mirror_copies:
            out["mirror_packet"] = {s: (c, 0) for s, c in sorted(self.mirror_copies.items())}
        if self.recirculations:
            out["recirc_packet"] = {0: (self.recirculations, 0)}
        return out

    def process(self, batch: PacketBatch) -> BatchResult:
        """Every packet of `batch` through the pipeline, recirculated ones again after each
        pass; P4Error naming the call when one recirculates more than MAX_RECIRCULATIONS times."""
        n = len(batch)
        if n and batch.data.shape[1] < int(batch.length.max()) and copies_packets(self.dp.program):
            # recirculation and mirroring need whole packets (nic run batches such programs
            # whole: depth.parse_depth bounds no program that calls them)
            raise P4Error(
                f"{self.dp.program.source}: a PNA program that recirculates or mirrors "
                "needs whole packets, not their heads"
            )
        origin = np.arange(n)
        outputs: list[tuple[np.ndarray, BatchResult, np.ndarray]] = []
        current = batch
        for passes in range(MAX_RECIRCULATIONS + 1):
            result = self.rounds(current, passes > 0)
            again = ~result.dropped & (result.out_port == RECIRCULATE)
            outputs.append((origin[~again], result, ~again))
            if not again.any():
                break
            if passes == MAX_RECIRCULATIONS:
                raise P4Error(
                    f"{self.recirculate_site}: a packet recirculated more than {MAX_RECIRCULATIONS} times "
                    "(a recirculation loop)"
                )
            self.recirculations += int(again.sum())
            current = PacketBatch.of_rows(
                result.data[again],
                result.length[again],
                current.direction[again],
                current.input_port[again],
                current.timestamp_ns[again],
            )
            origin = origin[again]
        return _gather(n, outputs)

    def rounds(self, batch: PacketBatch, recirculated: bool) -> BatchResult:
        """One pass of `batch`, in rounds when entries change in the data plane (see above)."""
        n = len(batch)
        if (not self.aom and not self.dp.registers) or n == 0:
            return self.one_pass(batch, recirculated, 0)
        parts: list[BatchResult] = []
        start, window = 0, (1 if self.dp.registers else n)
        while start < n:
            stop = min(n, start + window)
            saved = self.snapshot()
            result = self.one_pass(_rows(batch, start, stop), recirculated, start)
            cut = self.first_conflict()
            if cut is not None:
                self.restore(saved)
                stop = cut
                result = self.one_pass(_rows(batch, start, stop), recirculated, start)
                window = max(16, 2 * (stop - start))
            self.commit()
            parts.append(result)
            start = stop
        return _concat(parts)

    def one_pass(self, batch: PacketBatch, recirculated: bool, offset: int) -> BatchResult:
        dp = self.dp
        self.offset, self.intents, self.lookups, self.add_rows = offset, [], [], {}
        ctx = dp.context(batch)
        ctx.values["istd.timestamp"] = ctx.values["istd.timestamp_ns"]
        ctx.values["istd.recirculated"] = np.full(ctx.n, int(recirculated), dtype=np.uint64)
        dp.parser(ctx)
        alive = ~ctx.parser_error
        for key, init in dp.var_inits:
            ctx.put(key, init.fn(ctx, alive), alive)
        if alive.any():
            dp.control(ctx, alive)
        for k in range(MIRROR_SLOTS):
            sessions = ctx.values.get(f"$mirror.{k}")
            if sessions is None:
                continue
            chosen = sessions[alive & (sessions > 0)].astype(np.int64) - 1
            for session, count in zip(*np.unique(chosen, return_counts=True), strict=True):
                self.mirror_copies[int(session)] = self.mirror_copies.get(int(session), 0) + int(count)
        dropped = ctx.drop | ctx.parser_error
        if self.trace:
            every, sizes = dp.deparse(ctx, alive)
            self.emitted.extend(every[i, : sizes[i]].tobytes() if alive[i] else None for i in range(ctx.n))
        data, length = dp.deparse(ctx, ~dropped)
        return BatchResult(data, length, np.where(dropped, -1, ctx.port), dropped, ctx.parser_error)

    def live_entries(self, table: str, times: np.ndarray) -> np.ndarray:
        """How many of `table`'s entries are live (not expired) at each of `times`."""
        aom = self.aom[table]
        aom.sync()
        expiry = np.sort(np.array(aom.expire_at, dtype=np.int64))
        return expiry.size - np.searchsorted(expiry, times, side="right")

    def profile_ns(self, profile: int) -> int:
        return self.profiles_ns.get(profile, profile * 1_000_000_000)

    def first_conflict(self) -> int | None:
        """The first row whose lookup of an add-on-miss table would have come out otherwise
        had the rows before it in the round changed the table first; None when none."""
        intents = self.intents or []
        cut = self.capacity_cut()
        if not intents:
            return cut
        touched: dict[str, set[tuple[int, ...]]] = {}
        for asked in intents:
            touched.setdefault(asked.table, set()).add(asked.key)
        events: list[tuple[int, int, str, Any]] = [(i.row, i.seq, "change", i) for i in intents]
        for table, rows, keys, index, stamps in self.lookups:
            keys_of = touched.get(table)
            if not keys_of:
                continue
            for row, key, found, stamp in zip(
                rows.tolist(),
                zip(*(k.tolist() for k in keys), strict=True),
                index.tolist(),
                stamps.tolist(),
                strict=True,
            ):
                if key in keys_of:
                    events.append((row, -1, "look", (table, key, found >= 0, int(stamp))))
        events.sort(key=lambda e: (e[0], e[1]))
        sim: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for row, _, kind, payload in events:
            if cut is not None and row >= cut:
                return cut
            if kind == "look":
                table, key, hit, stamp = payload
                entry = self.sim_entry(sim, table, key)
                if (entry[0] > stamp) != hit:
                    return int(row)
                continue
            intent: _Intent = payload
            entry = self.sim_entry(sim, intent.table, intent.key)
            added = intent.kind == "add" and entry[0] <= intent.time_ns
            if added or intent.kind == "expire":
                entry[0], entry[1] = intent.time_ns + self.profile_ns(intent.profile), intent.profile
            elif intent.kind == "restart":
                entry[0] = intent.time_ns + self.profile_ns(entry[1])
        return cut

    def capacity_cut(self) -> int | None:
        """Where a round must end so that add_entry's `table full` answers are exact: at a
        table's second add_entry of the round when the program adds from two places (the rows
        of one call come before those of the next) or when timers moved in the round could
        free or take a place of a table that is nearly full."""
        cut = None
        for table, tried in self.add_rows.items():
            rows = [row for row, _ in tried]
            if len(rows) < 2:
                continue
            second = sorted(rows)[1]
            if rows != sorted(rows):  # two add_entry calls in the program: rows out of order
                cut = second if cut is None else min(cut, second)
                continue
            timers = [i for i in self.intents or [] if i.table == table and i.kind != "add"]
            if not timers:
                continue
            earliest = min(i.time_ns for i in self.intents or [] if i.table == table)
            live = int(self.live_entries(table, np.array([earliest], dtype=np.int64))[0])
            if live + len(rows) + len(timers) >= self.aom[table].state.table.size:
                cut = second if cut is None else min(cut, second)
        return cut

    def sim_entry(
        self, sim: dict[tuple[str, tuple[int, ...]], list[int]], table: str, key: tuple[int, ...]
    ) -> list[int]:
        entry = sim.get((table, key))
        if entry is None:
            aom = self.aom[table]
            aom.sync()
            at = aom.index.get(key)
            entry = [aom.expire_at[at], aom.profile[at]] if at is not None else [-1, 0]
            sim[(table, key)] = entry
        return entry

    def commit(self) -> None:
        """The round's table changes, in packet order."""
        intents = sorted(self.intents or [], key=lambda i: (i.row, i.seq))
        self.intents, self.lookups = None, []
        changed: set[str] = set()
        for intent in intents:
            aom = self.aom[intent.table]
            aom.sync()
            at = aom.index.get(intent.key)
            if intent.kind == "add":
                if at is not None and aom.expire_at[at] > intent.time_ns:
                    continue  # live already (a later row of the same round: replayed)
                entry = TableEntry(intent.key, intent.action, intent.params)
                if at is None:
                    aom.state.entries.append(entry)
                    aom.expire_at.append(0)
                    aom.profile.append(0)
                    at = aom.index[intent.key] = len(aom.state.entries) - 1
                else:
                    aom.state.entries[at] = entry
                aom.expire_at[at] = intent.time_ns + self.profile_ns(intent.profile)
                aom.profile[at] = intent.profile
                changed.add(intent.table)
            elif at is not None and intent.kind == "expire":
                aom.expire_at[at] = intent.time_ns + self.profile_ns(intent.profile)
                aom.profile[at] = intent.profile
            elif at is not None:
                aom.expire_at[at] = intent.time_ns + self.profile_ns(aom.profile[at])
        for table in changed:
            state = self.aom[table].state
            hits = state.hits
            state.invalidate()
            state.hits[: hits.size] = hits
            self.aom[table].synced = id(state.entries)
            if len(state.entries) >= 2 * state.table.size:
                self.compact(table, max(i.time_ns for i in intents))

    def compact(self, table: str, now_ns: int) -> None:
        """Drop the entries of `table` expired at `now_ns` (AUTO_DELETE), so that a table whose
        entries come and go holds at most its size of live ones and as many expired."""
        aom = self.aom[table]
        state = aom.state
        keep = [i for i, t in enumerate(aom.expire_at) if t > now_ns]
        hits = state.hits
        state.entries[:] = [state.entries[i] for i in keep]
        aom.expire_at = [aom.expire_at[i] for i in keep]
        aom.profile = [aom.profile[i] for i in keep]
        aom.index = {tuple(int(m) for m in state.entries[j].match): j for j in range(len(keep))}  # type: ignore[arg-type]
        state.invalidate()
        state.hits[:] = hits[keep] if keep else hits[:0]
        moved = {old: new for new, old in enumerate(keep)}
        for counter, owner in self.direct.items():
            if owner == table and counter in self.direct_counts:
                cells = self.direct_counts[counter]
                kept = {
                    moved.get(e, e) if e < 0 else moved[e]: v for e, v in cells.items() if e < 0 or e in moved
                }
                cells.clear()
                cells.update(kept)

    def snapshot(self) -> Any:
        dp = self.dp
        return copy.deepcopy(
            (
                dp.counters,
                {n: s.hits for n, s in dp.tables.items()},
                dp.action_runs,
                dp.state_visits,
                {n: m.tokens for n, m in (*dp.meters.items(), *self.direct_meters.items())},
                self.direct_counts,
                self.mirror_copies,
                len(self.emitted),
            )
        )

    def restore(self, saved: Any) -> None:
        """Counters and states as `snapshot` saw them (in place: compiled code holds them)."""
        counters, hits, runs, visits, tokens, direct, mirrors, emitted = saved
        del self.emitted[emitted:]
        for name, (packets, octets) in self.dp.counters.items():
            for now, before in zip((packets, octets), counters[name], strict=True):
                if isinstance(now, SparseCells):
                    now.totals = before.totals
                else:
                    now[...] = before
        for name, state in self.dp.tables.items():
            state.hits = hits[name]
        for live, old in ((self.dp.action_runs, runs), (self.dp.state_visits, visits)):
            live.clear()
            live.update(old)
        for name, meter in (*self.dp.meters.items(), *self.direct_meters.items()):
            meter.tokens.clear()
            meter.tokens.update(tokens[name])
        for name, cells in self.direct_counts.items():
            cells.clear()
            cells.update(direct[name])
        self.mirror_copies.clear()
        self.mirror_copies.update(mirrors)


def _rows(batch: PacketBatch, start: int, stop: int) -> PacketBatch:
    part = slice(start, stop)
    return PacketBatch(
        batch.data[part],
        batch.length[part],
        batch.direction[part],
        batch.input_port[part],
        batch.timestamp_ns[part],
    )


def _concat(parts: list[BatchResult]) -> BatchResult:
    if len(parts) == 1:
        return parts[0]
    width = max(p.data.shape[1] for p in parts)
    data = np.concatenate([np.pad(p.data, ((0, 0), (0, width - p.data.shape[1]))) for p in parts])
    return BatchResult(
        data,
        np.concatenate([p.length for p in parts]),
        np.concatenate([p.out_port for p in parts]),
        np.concatenate([p.dropped for p in parts]),
        np.concatenate([p.parser_error for p in parts]),
    )


def _gather(n: int, outputs: list[tuple[np.ndarray, BatchResult, np.ndarray]]) -> BatchResult:
    """Each original packet's final pass, back in its row."""
    if len(outputs) == 1:
        return outputs[0][1]
    width = max(r.data.shape[1] for _, r, _ in outputs)
    data = np.zeros((n, width), dtype=np.uint8)
    length = np.zeros(n, dtype=np.int64)
    port = np.full(n, -1, dtype=np.int64)
    dropped = np.ones(n, dtype=bool)
    error = np.zeros(n, dtype=bool)
    for rows, result, kept in outputs:
        data[rows, : result.data.shape[1]] = result.data[kept]
        length[rows] = result.length[kept]
        port[rows] = result.out_port[kept]
        dropped[rows] = result.dropped[kept]
        error[rows] = result.parser_error[kept]
    return BatchResult(data, length, port, dropped, error)


def run_entries(
    datapath: Datapath, entries: Any, packets: list[tuple[int, bytes, int]]
) -> list[tuple[int, bytes] | None]:
    """Install an entries document as `nic run --entries` does, then run `packets` (input
    port, bytes, timestamp in ns) as one batch: each packet's (port, bytes), None when dropped."""
    from cloudtwin.p4.run import install

    install(datapath, entries)
    if not packets:
        return []
    ports = np.array([p for p, _, _ in packets], dtype=np.uint64)
    times = np.array([t for _, _, t in packets], dtype=np.uint64)
    batch = PacketBatch.from_packets(
        [b for _, b, _ in packets], (ports != NET_PORT).astype(np.uint64), ports, times
    )
    result = datapath.process(batch)
    return [
        None if result.dropped[i] else (int(result.out_port[i]), result.packet(i) or b"")
        for i in range(len(batch))
    ]
