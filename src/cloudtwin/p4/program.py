"""A checked P4 program: header layouts, the parser's states, the control's tables and actions.

Bodies stay as lark trees (with their source positions); `datapath` compiles them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from lark import Tree

__all__ = [
    "Action",
    "Control",
    "Extern",
    "Function",
    "HeaderType",
    "MatchKind",
    "ParserBlock",
    "Program",
    "Table",
    "TableKey",
]


class MatchKind(StrEnum):
    """How a table key field matches."""

    EXACT = "exact"
    LPM = "lpm"
    TERNARY = "ternary"
    OPTIONAL = "optional"  # a value or `_`: a ternary match with a full mask or none
    RANGE = "range"  # lo .. hi, inclusive


@dataclass(frozen=True)
class HeaderType:
    """A header: named fields of fixed bit widths, most significant first on the wire."""

    name: str
    fields: tuple[tuple[str, int], ...]
    signed: frozenset[str] = frozenset()  # the fields of type int<N>
    varbit: tuple[str, int] | None = None  # its varbit<N> field after the others: (name, N)

    def storage(self) -> tuple[tuple[str, int], ...]:
        """Every field's storage (name, bits): the fixed ones, then a varbit field's value
        (N bits) and its length in bits (`name$len`)."""
        if self.varbit is None:
            return self.fields
        name, width = self.varbit
        return (*self.fields, (name, width), (f"{name}$len", 32))

    @property
    def width_bits(self) -> int:
        return sum(width for _, width in self.fields)

    @property
    def size_bytes(self) -> int:
        return self.width_bits // 8

    def offsets(self) -> dict[str, tuple[int, int]]:
        """field -> (bit offset from the header's start, width)."""
        out, offset = {}, 0
        for name, width in self.fields:
            out[name] = (offset, width)
            offset += width
        return out


@dataclass(frozen=True)
class TableKey:
    """One key field: its expression, its match kind and its name (the expression's text)."""

    name: str
    expr: Tree
    kind: MatchKind
    width: int
    control_name: str = ""  # its @name, or its text: what a control plane calls it


@dataclass(frozen=True)
class Action:
    """An action: parameters (name, width) bound by a table entry or a call, and a body."""

    name: str
    params: tuple[tuple[str, int], ...]
    body: Tree
    directions: tuple[str, ...] = ()  # per parameter: "in", "out", "inout" or "" (control plane)
    types: tuple[str, ...] = ()  # per parameter: its header or struct type, "" for bit<N>

    @property
    def plane_params(self) -> tuple[tuple[str, int], ...]:
        """The parameters a table entry binds (the directionless ones)."""
        if not self.directions:
            return self.params
        return tuple(p for p, d in zip(self.params, self.directions, strict=True) if not d)


@dataclass(frozen=True)
class Function:
    """A function: parameters (name, width, direction), its return width (None: void), a body."""

    name: str
    params: tuple[tuple[str, int, str], ...]
    returns: int | None
    body: Tree
    types: tuple[str, ...] = ()  # per parameter: its header or struct type, "" for bit<N>
    returns_type: str = ""  # a header or struct it returns (then `returns` is None)


@dataclass(frozen=True)
class Table:
    """A match-action table with its keys, allowed actions, default action and size."""

    name: str
    keys: tuple[TableKey, ...]
    actions: tuple[str, ...]
    default_action: str
    default_args: tuple[Tree, ...]
    default_is_const: bool
    size: int
    entries: tuple[Tree, ...] = ()  # `entries = { ... }`: installed when the datapath is made
    bound: dict[str, tuple[Tree, ...]] = field(default_factory=dict)  # action -> its directional args
    priorities: tuple[int, ...] = ()  # per const entry: its priority number (the smallest wins)
    properties: dict[str, Tree] = field(default_factory=dict)  # PNA's (add_on_miss, pna_direct_counter...)


@dataclass(frozen=True)
class Extern:
    """A counter, meter or register instance: `kind` (`Counter`/`Meter`/`register`), how
    many cells, what it counts (a register: the width of its cells)."""

    name: str
    kind: str
    size: int
    unit: str
    width: int = 0


@dataclass
class Control:
    """A control block: local actions, tables, externs, variables and the apply block."""

    name: str
    actions: dict[str, Action] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    externs: dict[str, Extern] = field(default_factory=dict)
    variables: dict[str, tuple[int, Tree | None]] = field(default_factory=dict)
    apply: Tree | None = None
    roles: dict[str, str] = field(default_factory=dict)
    prelude: list[Tree] = field(default_factory=list)  # header- and struct-typed variables
    params: list[tuple[str, str, Tree]] = field(default_factory=list)  # (name, direction, type)
    instances: dict[str, str] = field(default_factory=dict)  # local name -> control or parser


@dataclass
class ParserBlock:
    """The parser: its states (statements and transition), entered at `start`."""

    name: str
    states: dict[str, Tree] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    variables: dict[str, tuple[int, Tree | None]] = field(default_factory=dict)
    prelude: list[Tree] = field(default_factory=list)  # header- and struct-typed variables
    params: list[tuple[str, str, Tree]] = field(default_factory=list)  # (name, direction, type)
    instances: dict[str, str] = field(default_factory=dict)  # local name -> parser


@dataclass
class Program:
    """A whole P4 program: parser, the architecture's controls and deparser, and its types."""

    source: str
    text: str
    headers: dict[str, HeaderType]
    header_instances: dict[str, HeaderType]
    metadata_fields: dict[str, int]
    constants: dict[str, int]
    parser: ParserBlock
    control: Control
    deparser: Control
    global_actions: dict[str, Action]
    emit_order: tuple[str, ...] = ()
    architecture: str = "pna"  # or "v1model" or "psa"
    controls: tuple[Control, ...] = ()  # the pipeline's controls in order (PNA: the main control)
    errors: tuple[str, ...] = ()  # the declared errors; a code is a position here
    type_widths: dict[str, int] = field(default_factory=dict)  # typedefs and enums -> bits
    functions: dict[str, Function] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # a table's or action's @name -> its name
    constant_widths: dict[str, int] = field(default_factory=dict)  # `const bit<N> c`: c -> N
    structs: dict[str, list[tuple[str, Tree]]] = field(default_factory=dict)  # struct -> its fields
    stacks: dict[str, tuple[HeaderType, int]] = field(default_factory=dict)  # `hdr.s` -> (type, size)
    unions: dict[str, list[str]] = field(default_factory=dict)  # `hdr.u` -> its member instances
    union_stacks: dict[str, int] = field(default_factory=dict)  # a stack of unions -> its size
    blocks: dict[str, Control | ParserBlock] = field(default_factory=dict)  # every parser and control
    arch_instances: dict[str, Tree] = field(default_factory=dict)  # top-level extern instances
    global_externs: dict[str, Extern] = field(default_factory=dict)  # v1model: top-level registers
    pna_file: bool = False  # declarations read from pna.p4 itself (arch/pna.py runs it)
    signed: set[str] = field(default_factory=set)  # storage keys of int<N> metadata and variables
    signed_types: set[str] = field(default_factory=set)  # typedefs of int<N>
    origins: list[tuple[str, int]] = field(default_factory=list)  # preprocessed line -> (file, line)
    egress_parser: ParserBlock | None = None  # PSA: the egress parser (`parser` is ingress's)
    egress_emit_order: tuple[str, ...] = ()  # PSA: what the egress deparser emits
    egress_deparser: Control | None = None  # PSA's

    def deparsers(self) -> tuple[Control, ...]:
        """The deparser controls (v1model, PSA: their statements besides the emits run)."""
        if self.architecture == "pna":
            return ()
        return (self.deparser,) + ((self.egress_deparser,) if self.egress_deparser is not None else ())

    def packet_controls(self) -> tuple[Control, ...]:
        """The controls that run per packet (PNA: its main control)."""
        return self.controls or (self.control,)

    def applied_controls(self) -> tuple[Control, ...]:
        """The controls instantiated exactly once inside others (their tables are the
        program's, under their own names); a control instantiated twice would need a table
        per instance, which is outside the subset."""
        names = [n for block in self.blocks.values() for n in block.instances.values()]
        once = [n for n in dict.fromkeys(names) if names.count(n) == 1]
        return tuple(b for n in once if isinstance(b := self.blocks.get(n), Control))

    def where(self, node: Tree) -> str:
        """`file:line:column` of `node` in the file it came from (through includes)."""
        line, column = (node.meta.line, node.meta.column) if not node.meta.empty else (0, 0)
        if 1 <= line <= len(self.origins):
            origin, at = self.origins[line - 1]
            return f"{origin}:{at}:{column}"
        return f"{self.source}:{line}:{column}"

    def table(self, name: str) -> Table:
        """A table by its name (optionally prefixed with the control's name)."""
        short = name.split(".")[-1]
        return self.control.tables[short]
