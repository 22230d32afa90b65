"""Checking a program's declarations, the front end's first half: the checker's state (names,
types, widths, constants, annotations) and what each declaration becomes (typedefs,
headers, structs, unions, enums, errors, constants, actions, functions, parsers, controls
and their tables and externs). The limits of the supported subset are named here."""

from __future__ import annotations

import re
from collections.abc import Callable

from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.arch.pna_decl import PNA_EXTERNS, PNA_TABLE_PROPERTIES, pna_extern
from cloudtwin.p4.normalise import IGNORED_ANNOTATIONS
from cloudtwin.p4.program import (
    Action,
    Control,
    Extern,
    Function,
    HeaderType,
    MatchKind,
    ParserBlock,
    Table,
    TableKey,
)

__all__ = [
    "ARCHITECTURES",
    "ARCHITECTURE_CONSTANTS",
    "ARCH_TYPES",
    "DENSE_REGISTER_CELLS",
    "DeclarationChecker",
    "ENUM_BITS",
    "ERROR_BITS",
    "ISTD_FIELDS",
    "MAX_EXTERN_CELLS",
    "MAX_STACK_SIZE",
    "MAX_STRUCT_FIELDS",
    "MAX_STRUCT_NESTING",
    "PSA_PIPELINES",
    "PSA_ROLES",
    "params_of",
    "parse_number",
    "position_of",
]


ISTD_FIELDS = {
    "direction": 8,
    "input_port": 32,
    "packet_length": 16,
    "timestamp_ns": 64,
    "recirculated": 1,  # pna.p4's own fields (istd.timestamp is timestamp_ns)
    "timestamp": 64,
}
"""What the PNA-like architecture tells the program about each packet (`istd.<field>`)."""


ARCHITECTURE_CONSTANTS = {
    "NET_TO_HOST": 0,
    "HOST_TO_NET": 1,
    "PNA_CounterType_t.PACKETS": 0,
    "PNA_CounterType_t.BYTES": 1,
    "PNA_CounterType_t.PACKETS_AND_BYTES": 2,
    "PNA_MeterType_t.PACKETS": 0,
    "PNA_MeterType_t.BYTES": 1,
    "PNA_MeterColor_t.GREEN": 0,
    "PNA_MeterColor_t.YELLOW": 1,
    "PNA_MeterColor_t.RED": 2,
}


MAX_EXTERN_CELLS = (1 << 32) - 1
"""The most cells a Counter or Meter may declare (PNA declares their size as a bit<32>)."""


MAX_STRUCT_NESTING = 32
"""The deepest structs may nest in the metadata struct."""


MAX_STRUCT_FIELDS = 65_536
"""The most bit fields the metadata struct may hold once its inner structs are flattened."""


_UNITS = {0: "packets", 1: "bytes", 2: "packets_and_bytes"}


ARCHITECTURES = {
    "PNA_NIC": ("parser", "control", "deparser"),
    "V1Switch": ("parser", "verifyChecksum", "ingress", "egress", "computeChecksum", "deparser"),
    "PSA_Switch": ("IngressPipeline", "PacketReplicationEngine", "EgressPipeline", "BufferingQueueingEngine"),
}
"""The packages a program may instantiate as `main`, and the blocks each takes."""


PSA_PIPELINES = {"IngressPipeline": "Ingress", "EgressPipeline": "Egress"}
"""PSA's pipeline packages: each instantiates (parser, control, deparser)."""


PSA_ROLES = {
    "parser": ("pkt", "hdr", "meta", "", "psa.in1", "psa.in2", "psa.in3"),
    "control": ("hdr", "meta", "", ""),
}
"""What each PSA block parameter is, by position ("": the architecture's struct of its type,
held under the type's name; psa.inN: the metadata a packet brings in, as none is bridged)."""


ERROR_BITS = 16
"""How wide an `error` value is held (its code: its position among the declared errors)."""


DENSE_REGISTER_CELLS = 1 << 20
"""The most cells a v1model register may declare (held as one array)."""


MAX_STACK_SIZE = 64
"""The most elements a header stack may have."""


ENUM_BITS = 32
"""How wide a member of a plain `enum` is held (its position in the enum)."""


ARCH_TYPES = {
    "standard_metadata_t",
    "packet_in",
    "packet_out",
    "pna_main_parser_input_metadata_t",
    "pna_main_input_metadata_t",
    "pna_main_output_metadata_t",
}


def parse_number(text: str) -> tuple[int, int | None]:
    """A P4 integer literal -> (value, width or None).

    >>> parse_number("16w0x0800")
    (2048, 16)
    """
    width: int | None = None
    body = text.replace("_", "")
    for sep in "ws":
        head, found, tail = body.partition(sep)
        if found and head.isascii() and head.isdigit():
            width, body = int(head), tail
            break
    return int(body, 0), width


_TYPE_RULES = {"bit_type", "bool_type", "named_type"}


_FOLD: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
}
"""Operators a compile-time constant may use (integers, exact)."""


def params_of(node: Tree) -> list[tuple[str, str, Tree]]:
    """A parameter list as (name, direction or "", type)."""
    params = [p for p in node.children if p is not None]
    return [(str(p.children[2]), str(p.children[0] or ""), p.children[1]) for p in params]


def position_of(node: Tree | Token) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 0, node.column or 0
    meta = node.meta
    return (getattr(meta, "line", 0), getattr(meta, "column", 0)) if not meta.empty else (0, 0)


class DeclarationChecker:
    """Walks the parse tree's declarations, raising at the first unsupported construct."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.text = text
        self.typedefs: dict[str, int] = {}
        self.headers: dict[str, HeaderType] = {}
        self.structs: dict[str, list[tuple[str, Tree]]] = {}
        self.constants: dict[str, int] = dict(ARCHITECTURE_CONSTANTS)
        self.parsers: list[ParserBlock] = []
        self.controls: list[tuple[Control, Tree]] = []
        self.global_actions: dict[str, Action] = {}
        self.main: Tree | None = None
        self.parser_nodes: list[Tree] = []
        self.names: dict[str, Tree] = {}  # every top-level name (and constant) -> its declaration
        self.locals: dict[str, dict[str, Tree]] = {}  # control -> its local names
        self.annotations: dict[int, tuple[str, str]] = {}  # offset -> (name, body)
        self.enums: dict[str, int] = {}  # enum type -> its width
        self.errors: list[str] = []  # error.X codes, in declaration order
        self.match_kinds: set[str] = set()
        self.extern_types: set[str] = set()  # extern objects, functions, parser/control/package types
        self.instances: list[Tree] = []  # top-level instantiations (main)
        self.control_nodes: dict[str, Tree] = {}  # control name -> its declaration
        self.packages: dict[str, Tree] = {}
        self.signed: set[str] = set()  # storage keys of signed metadata fields and variables
        self.signed_types: set[str] = set()  # typedefs of int<N>
        self.consumed: set[int] = set()  # annotations read where they mean something (@priority)
        self.functions: dict[str, Function] = {}
        self.registers: list[Tree] = []  # register declarations (v1model only)
        self.aliases: dict[str, str] = {}  # @name of a table or action -> its name
        self.meta_headers: dict[str, HeaderType] = {}  # headers inside the metadata struct
        self.constant_widths: dict[str, int] = {}  # a `const bit<N>`'s N
        self.stack_sizes: dict[str, dict[str, int]] = {}  # struct -> stack field -> size
        self.stacks: dict[str, tuple[HeaderType, int]] = {}  # stack instance -> (type, size)
        self.unions: dict[str, list[tuple[str, str]]] = {}  # union type -> (member, header type)
        self.union_groups: dict[str, list[str]] = {}  # union instance -> its member instances
        self.union_stacks: dict[str, int] = {}  # a stack of unions -> its size

    @property
    def pna_file(self) -> bool:
        """Whether the program has read pna.p4 itself (not the built-in PNA-like declarations)."""
        return "pna_main_input_metadata_t" in self.structs

    def declare(self, names: dict[str, Tree], kind: str, name: str, node: Tree) -> None:
        """Record `name`; P4Error at `node` when it is declared already (the first wins
        nowhere: a second declaration would silently replace the first)."""
        first = names.get(name)
        if first is not None:
            line, column = position_of(first)
            raise self.fail(node, f"{kind} {name} is declared twice (first at {line}:{column})")
        if kind == "constant" and name in ARCHITECTURE_CONSTANTS:
            raise self.fail(node, f"constant {name} is declared by the architecture")
        names[name] = node

    def distinct(self, node: Tree, kind: str, names: list[str]) -> None:
        """P4Error when `names` (fields, parameters, states, properties) repeat one."""
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise self.fail(node, f"{kind} {name} is declared twice")
            seen.add(name)

    def fail(self, node: Tree | Token, what: str) -> P4Error:
        line, column = position_of(node)
        return P4Error(f"{self.source}:{line}:{column}: {what}")

    def width(self, node: Tree, what: str, signed_ok: bool = False) -> int:
        """The bits of a type; a signed one (`int<N>`, or a typedef of one) only where the
        caller keeps its sign (`signed_ok`)."""
        if self.is_signed(node) and not signed_ok:
            raise self.fail(node, f"{what}: a signed int<N> is outside the supported subset here")
        if node.data == "int_type":
            value, _ = parse_number(str(node.children[0]))
            if not 1 <= value <= 2048:
                raise self.fail(node, f"{what}: int<{value}> is outside int<1>..int<2048>")
            return value
        if node.data == "bit_type" and node.children[0].data == "bit_expr":
            raise self.fail(node, f"{what}: a width must be a literal expression (+ - * << of numbers)")
        if node.data == "bit_type":
            value, _ = parse_number(str(node.children[0].children[0]))
            if not 1 <= value <= 2048:
                raise self.fail(node, f"{what}: bit<{value}> is outside bit<1>..bit<2048>")
            return value
        if node.data == "bool_type":
            return 1
        if node.data == "error_type":
            return ERROR_BITS
        if node.data != "named_type":
            kind = node.data.removesuffix("_type").replace("infint", "int")
            where = " (a varbit field is a header's last)" if kind == "varbit" else ""
            raise self.fail(node, f"{what}: type {kind} is outside the supported subset{where}")
        name = str(node.children[0])
        if name in self.typedefs:
            return self.typedefs[name]
        if name in self.enums:
            return self.enums[name]
        raise self.fail(node, f"{what}: type {name!r} is not a bit<N> type or typedef of one")

    def is_signed(self, type_: Tree) -> bool:
        """Whether `type_` is `int<N>` or a typedef of one."""
        named = type_.data == "named_type" and str(type_.children[0]) in self.signed_types
        return type_.data == "int_type" or named

    def is_composite(self, type_: Tree) -> bool:
        """Whether `type_` names a header or struct (held field by field, not as one value)."""
        name = str(type_.children[0]) if type_.data == "named_type" else ""
        return name in self.headers or name in self.structs

    def control_plane_name(self, node: Tree, declared: str) -> None:
        """Record a table's or action's `@name("...")` (written just before it): the name
        a control plane (an STF script) calls it by."""
        if node.meta.empty:
            return
        for at, (found, body) in self.annotations.items():
            before = at < node.meta.start_pos and not self.text[at : node.meta.start_pos].strip()
            if found == "name" and before:
                alias = body.strip().strip('"').lstrip(".")
                for key in (alias, alias.split(".")[-1]):
                    self.aliases.setdefault(key, declared)

    def annotation_in(self, node: Tree, name: str) -> str | None:
        """The body of annotation `name` written inside `node`'s source span, if any."""
        if node.meta.empty:
            return None
        for at, (found, body) in self.annotations.items():
            if found == name and node.meta.start_pos <= at < node.meta.end_pos:
                return body
        return None

    def refuse_annotations(self, node: Tree) -> None:
        """P4Error at the first annotation inside `node` that changes meaning here."""
        if node.meta.empty:
            return
        for at, (name, _) in sorted(self.annotations.items()):
            inside = node.meta.start_pos <= at < node.meta.end_pos and at not in self.consumed
            if inside and name not in IGNORED_ANNOTATIONS:
                line = self.text.count("\n", 0, at) + 1
                column = at - self.text.rfind("\n", 0, at)
                what = f"annotation @{name} is outside the supported subset"
                raise P4Error(f"{self.source}:{line}:{column}: {what}")

    def source_text(self, node: Tree) -> str:
        meta = node.meta
        return " ".join(self.text[meta.start_pos : meta.end_pos].split())

    def constant(self, node: Tree) -> int:
        if node.data == "number":
            return parse_number(str(node.children[0]))[0]
        if node.data == "ref":
            name = ".".join(str(t) for t in node.children[0].children)
            if name in self.constants:
                return self.constants[name]
        if node.data == "neg":
            return -self.constant(node.children[0])
        if node.data in ("cast", "name_cast"):  # (bit<N>) c, (T) c: c at the type's width
            target, operand = node.children
            if isinstance(target, Token):
                width = self.typedefs.get(str(target), self.enums.get(str(target)))
            else:
                width = parse_number(str(target.children[0]))[0] if target.data == "bits" else None
            if width is not None:
                return self.constant(operand) & ((1 << width) - 1)
        if node.data == "error_const":
            name = f"error.{node.children[0]}"
            if name in self.constants:
                return self.constants[name]
        if node.data in ("cast", "name_cast"):
            return self.cast_constant(node)
        fold = _FOLD.get(node.data)
        if fold is not None:
            left, right = (self.constant(c) for c in node.children)
            if node.data in ("div", "mod") and right <= 0:
                raise self.fail(node, "division by a constant that is not positive")
            if node.data in ("shl", "shr") and not 0 <= right <= 4096:
                raise self.fail(node, f"a shift by {right} is outside 0..4096")
            return fold(left, right)
        raise self.fail(node, "a compile-time constant is needed here")

    def cast_constant(self, node: Tree) -> int:
        """`(bit<N>) c` or `(T) c` of a constant: its value cut to the type's width."""
        target, operand = node.children
        value = self.constant(operand)
        if isinstance(target, Token):
            width = self.typedefs.get(str(target), self.enums.get(str(target)))
            if width is None:
                raise self.fail(node, f"a cast to {target} is outside the supported subset")
        elif target.data == "bits":
            width = parse_number(str(target.children[0]))[0]
        else:
            return value if target.data != "bool_type" else int(bool(value))
        return value & ((1 << width) - 1)

    def _error_decl(self, node: Tree) -> None:
        for name in node.children:
            if name is None:
                continue
            if f"error.{name}" in self.constants:
                raise self.fail(name, f"error.{name} is declared twice")
            self.constants[f"error.{name}"] = len(self.errors)
            self.errors.append(str(name))

    def _match_kind_decl(self, node: Tree) -> None:
        self.match_kinds.update(str(n) for n in node.children if n is not None)

    def _enum_decl(self, node: Tree) -> None:
        bits, name, *members = node.children
        self.declare(self.names, "type", str(name), node)
        width = ENUM_BITS if bits is None else parse_number(str(bits.children[0]))[0]
        self.enums[str(name)] = width
        for number, member in enumerate(m for m in members if m is not None):
            mname, value = member.children
            if value is not None and bits is None:
                raise self.fail(member, f"enum {name}: only an enum bit<N> gives its members values")
            if value is None and bits is not None:
                raise self.fail(member, f"enum {name}: {mname} needs a value (enum bit<N>)")
            code = number if value is None else self.constant(value) & ((1 << width) - 1)
            self.constants[f"{name}.{mname}"] = code

    def _extern_object(self, node: Tree) -> None:
        self.declare(self.names, "extern", str(node.children[0]), node)
        self.extern_types.add(str(node.children[0]))

    def _extern_function(self, node: Tree) -> None:
        self.extern_types.add(str(node.children[1]))

    def _parser_type(self, node: Tree) -> None:
        self.extern_types.add(str(node.children[0]))

    _control_type = _package_type = _parser_type

    def _empty_decl(self, node: Tree) -> None:
        return None

    def declaration(self, node: Tree) -> None:
        handler = getattr(self, f"_{node.data}", None)
        if handler is None:
            raise self.fail(node, f"{node.data.replace('_', ' ')} is outside the supported subset")
        handler(node)

    def _const_decl(self, node: Tree) -> None:
        type_, name, value = node.children
        self.declare(self.names, "constant", str(name), node)
        number = self.constant(value)
        if type_.data in ("bit_type", "named_type") and not self.is_composite(type_):
            width = self.width(type_, f"constant {name}")
            self.constant_widths[str(name)] = width
            number &= (1 << width) - 1
        self.constants[str(name)] = number

    def _typedef_decl(self, node: Tree) -> None:
        type_, name = node.children
        self.declare(self.names, "type", str(name), node)
        if type_.data == "tuple_type":  # declared; a use of it is refused where it is made
            return
        self.typedefs[str(name)] = self.width(type_, f"typedef {name}", signed_ok=True)
        if self.is_signed(type_):
            self.signed_types.add(str(name))

    def _header_decl(self, node: Tree) -> None:
        name = str(node.children[0])
        self.declare(self.names, "type", name, node)
        self.distinct(node, f"header {name}: field", [str(f.children[-1]) for f in node.children[1:]])
        for f in node.children[1:]:
            if f.children[1] is not None:
                raise self.fail(f, f"header {name}: a stack inside a header is outside the subset")
        declared = list(node.children[1:])
        varbit = None
        if declared and declared[-1].children[0].data == "varbit_type":  # varbit<N>, last
            last = declared.pop()
            bits, _ = parse_number(str(last.children[0].children[0]))
            if not 8 <= bits <= 65_536 or bits % 8:
                raise self.fail(last, f"header {name}: varbit<{bits}> is not whole bytes up to 64 KiB")
            varbit = (str(last.children[-1]), bits)
        laid = [
            item for f in declared for item in self.header_fields(name, str(f.children[-1]), f.children[0])
        ]
        fields = tuple((fname, width) for fname, width, _ in laid)
        signed = frozenset(fname for fname, _, is_signed in laid if is_signed)
        header = HeaderType(name, fields, signed, varbit)
        if header.width_bits % 8:
            raise self.fail(node, f"header {name}: {header.width_bits} bits is not a whole number of bytes")
        self.headers[name] = header

    def header_fields(
        self, header: str, name: str, type_: Tree, depth: int = 0
    ) -> list[tuple[str, int, bool]]:
        """A header field's bit fields: itself, or a struct's fields flattened in order
        (`row.e`, `row.t`, ...: a struct inside a header is laid out field by field)."""
        inner = str(type_.children[0]) if type_.data == "named_type" else ""
        if inner in self.structs and depth < MAX_STRUCT_NESTING:
            return [
                (f"{name}.{item}", width, is_signed)
                for fname, ftype in self.structs[inner]
                for item, width, is_signed in self.header_fields(header, fname, ftype, depth + 1)
            ]
        return [(name, self.width(type_, f"{header}.{name}", signed_ok=True), self.is_signed(type_))]

    def _struct_decl(self, node: Tree) -> None:
        name = str(node.children[0])
        self.declare(self.names, "type", name, node)
        self.distinct(node, f"struct {name}: field", [str(f.children[-1]) for f in node.children[1:]])
        for f in node.children[1:]:
            if f.children[1] is not None:
                size = self.constant(f.children[1])
                if not 1 <= size <= MAX_STACK_SIZE:
                    what = f"a header stack of {size} is outside 1..{MAX_STACK_SIZE}"
                    raise self.fail(f, f"struct {name}: {what}")
                self.stack_sizes.setdefault(name, {})[str(f.children[-1])] = size
        self.structs[name] = [(str(f.children[-1]), f.children[0]) for f in node.children[1:]]

    def _union_decl(self, node: Tree) -> None:
        name = str(node.children[0])
        self.declare(self.names, "type", name, node)
        self.distinct(node, f"header_union {name}: member", [str(f.children[-1]) for f in node.children[1:]])
        members = []
        for f in node.children[1:]:
            tname = str(f.children[0].children[0]) if f.children[0].data == "named_type" else ""
            if tname not in self.headers or f.children[1] is not None:
                raise self.fail(f, f"header_union {name}: members must be headers")
            members.append((str(f.children[-1]), tname))
        self.unions[name] = members

    def _action_decl(self, node: Tree) -> None:
        self.declare(self.names, "action", str(node.children[0]), node)
        action = self.action(node)
        self.global_actions[action.name] = action

    def _main_decl(self, node: Tree) -> None:
        if str(node.children[-1]) != "main" and str(node.children[0]) in PSA_PIPELINES:
            self.declare(self.names, "package instance", str(node.children[-1]), node)
            self.packages[str(node.children[-1])] = node  # PSA's IngressPipeline(...) ip;
            return
        if str(node.children[0]) in self.extern_types and str(node.children[0]) not in ARCHITECTURES:
            self.declare(self.names, "extern instance", str(node.children[-1]), node)
            self.instances.append(node)  # a top-level extern instance (PNA: arch/pna.py)
            return
        if str(node.children[0]) not in ARCHITECTURES:
            raise self.fail(
                node, f"package {node.children[0]}: only {' or '.join(ARCHITECTURES)} in this subset"
            )
        if str(node.children[-1]) != "main":
            raise self.fail(node, f"package instance {node.children[-1]}: only `main` in this subset")
        if self.main is not None:
            line, column = position_of(self.main)
            what = f"{node.children[0]} is instantiated twice as main"
            raise self.fail(node, f"{what} (first at {line}:{column})")
        self.main = node

    def _parser_decl(self, node: Tree) -> None:
        name = str(node.children[0])
        self.declare(self.names, "parser", name, node)
        block = ParserBlock(name)
        for child in node.children[2:]:
            if child.data == "parser_state":
                state = str(child.children[0])
                if state in ("accept", "reject"):
                    raise self.fail(child, f"state {state} is built in and cannot be declared")
                if state in block.states:
                    line, column = position_of(block.states[state])
                    raise self.fail(
                        child, f"parser {name}: state {state} is declared twice (first at {line}:{column})"
                    )
                block.states[state] = child
            elif child.data == "var_decl" and self.is_composite(child.children[0]):
                block.prelude.append(child)
            elif child.data == "instance_decl" and not [a for a in child.children[1:-1] if a is not None]:
                block.instances[str(child.children[-1])] = str(child.children[0])
            elif child.data == "const_decl":
                self._const_decl(child)
            elif child.data == "var_decl":
                block.variables[str(child.children[1])] = (
                    self.width(child.children[0], str(child.children[1]), signed_ok=True), child.children[2]
                )
                if self.is_signed(child.children[0]):
                    self.signed.add(f"var.{name}.{child.children[1]}")
            else:
                raise self.fail(child, f"parser-local {child.data.replace('_', ' ')} is outside the subset")
        if "start" not in block.states:
            raise self.fail(node, f"parser {name}: no start state")
        block.params = params_of(node.children[1])
        self.parsers.append(block)

    def _control_decl(self, node: Tree) -> None:
        control = Control(str(node.children[0]))
        self.declare(self.names, "control", control.name, node)
        self.locals[control.name] = {}
        for child in node.children[2:-1]:
            self.control_local(control, child)
        control.apply = node.children[-1]
        for call in control.apply.find_data("call"):  # `C.apply(...)` of a control type itself
            path = [str(t) for t in call.children[0].children]
            declared = self.names.get(path[0])
            is_control = declared is not None and declared.data == "control_decl"
            local = path[0] in self.locals[control.name]
            if len(path) == 2 and path[1] == "apply" and is_control and not local:
                control.instances.setdefault(path[0], path[0])
        control.params = params_of(node.children[1])
        self.control_nodes[control.name] = node
        self.controls.append((control, node.children[1]))

    def control_local(self, control: Control, node: Tree) -> None:
        if node.data != "const_decl":
            at = {"extern_decl": -1, "var_decl": 1, "instance_decl": -1}.get(node.data, 0)
            kind = node.data.removesuffix("_decl").replace("var", "variable")
            self.declare(self.locals[control.name], f"{control.name}: {kind}", str(node.children[at]), node)
        if node.data in ("action_decl", "table_decl"):
            self.control_plane_name(node, str(node.children[0]))
        if node.data == "action_decl":
            control.actions[str(node.children[0])] = self.action(node)
        elif node.data == "table_decl":
            control.tables[str(node.children[0])] = self.table(control, node)
        elif node.data == "extern_decl":
            extern = self.extern(node)
            control.externs[extern.name] = extern
        elif node.data == "var_decl" and self.is_composite(node.children[0]):
            control.prelude.append(node)
        elif node.data == "var_decl":
            type_, name, init = node.children
            control.variables[str(name)] = (self.width(type_, str(name), signed_ok=True), None)
            if init is not None:  # initialised in declaration order, after the locals before it
                target = Tree("lvalue", [Tree("path", [name], node.meta), None], node.meta)
                control.prelude.append(Tree("assign", [target, init], node.meta))
            if self.is_signed(type_):
                self.signed.add(f"var.{control.name}.{name}")
        elif node.data == "const_decl":
            self._const_decl(node)
        elif node.data == "instance_decl" and not [a for a in node.children[1:-1] if a is not None]:
            control.instances[str(node.children[-1])] = str(node.children[0])
        elif node.data == "instance_decl" and str(node.children[0]) in PNA_EXTERNS and self.pna_file:
            control.externs[str(node.children[-1])] = pna_extern(self, node)
        elif node.data == "instance_decl" and str(node.children[0]) == "counter":
            control.externs[str(node.children[-1])] = self.v1model_counter(node)
        else:
            raise self.fail(node, f"instantiating {node.children[0]} is outside the supported subset")

    def action(self, node: Tree) -> Action:
        name, params, body = node.children
        bound = []
        directions = []
        types = []
        names = [str(p.children[2]) for p in params.children if p is not None]
        self.distinct(node, f"action {name}: parameter", names)
        for param in params.children:
            if param is None:
                continue
            direction, type_, pname = param.children[:3]
            composite = self.is_composite(type_) and direction is not None
            width = 0 if composite else self.width(type_, f"action {name} parameter {pname}")
            bound.append((str(pname), width))
            directions.append(str(direction or ""))
            types.append(str(type_.children[0]) if composite else "")
        return Action(str(name), tuple(bound), body, tuple(directions), tuple(types))

    def _function_decl(self, node: Tree) -> None:
        type_, name, generic, params, body = node.children
        if generic is not None:  # a generic function: only the architecture's own are called
            self.extern_types.add(str(name))
            return
        self.declare(self.names, "function", str(name), node)
        gives = type_.data != "void_type" and self.is_composite(type_)  # a header or struct
        returns = None if type_.data == "void_type" or gives else self.width(type_, f"function {name} return")
        bound = []
        types = []
        for param in (p for p in params.children if p is not None):
            direction, ptype, pname = param.children[:3]
            composite = self.is_composite(ptype)
            width = 0 if composite else self.width(ptype, f"function {name} parameter {pname}")
            bound.append((str(pname), width, str(direction or "in")))
            types.append(str(ptype.children[0]) if composite else "")
        self.distinct(node, f"function {name}: parameter", [p for p, _, _ in bound])
        returns_type = str(type_.children[0]) if gives else ""
        function = Function(str(name), tuple(bound), returns, body, tuple(types), returns_type)
        self.functions[str(name)] = function

    def extern(self, node: Tree) -> Extern:
        kind = str(node.children[0])
        if kind == "register" or (kind == "Register" and self.architecture() == "PSA_Switch"):
            return self.register(node)
        if kind in PNA_EXTERNS and self.pna_file:
            return pna_extern(self, node)
        if kind not in ("Counter", "Meter"):
            raise self.fail(node, f"extern {kind}: only Counter and Meter are supported")
        args = [c for c in node.children[1:-1] if isinstance(c, Tree) and c.data not in _TYPE_RULES]
        args = [a for a in args if a is not None]
        if len(args) != 2:
            raise self.fail(node, f"{kind}: expected (size, type) arguments")
        size, unit = self.constant(args[0]), self.constant(args[1])
        if not 1 <= size <= MAX_EXTERN_CELLS:
            raise self.fail(
                node,
                f"{kind} {node.children[-1]}: size {size} is outside 1..{MAX_EXTERN_CELLS} "
                "(PNA's size is a bit<32>)",
            )
        return Extern(str(node.children[-1]), kind, size, _UNITS.get(unit, "packets"))

    def architecture(self) -> str:
        """The package the program instantiates as main (read ahead: main comes last)."""
        found = re.search(r"^\s*(\w+)\s*(<[^>]*>)?\s*\([^;]*\)\s*main\s*;", self.text, re.MULTILINE)
        return found.group(1) if found else ""

    def v1model_counter(self, node: Tree) -> Extern:
        """v1model's `counter(size, CounterType.x) c;` (its counts show in no packet)."""
        args = [a for a in node.children[1:-1] if a is not None]
        if len(args) != 2:
            raise self.fail(node, "counter(size, CounterType.packets|bytes|packets_and_bytes)")
        size = self.constant(args[0])
        if not 1 <= size <= MAX_EXTERN_CELLS:
            what = f"size {size} is outside 1..{MAX_EXTERN_CELLS}"
            raise self.fail(node, f"counter {node.children[-1]}: {what}")
        self.registers.append(node)  # v1model only, as a register
        return Extern(str(node.children[-1]), "Counter", size, _UNITS.get(self.constant(args[1]), "packets"))

    def register(self, node: Tree) -> Extern:
        """v1model's `register<T[, I]>(size) r;` and PSA's `Register<T, I>(size) r;`: `size`
        cells of T."""
        types = [c for c in node.children[1:-1] if isinstance(c, Tree) and c.data in _TYPE_RULES]
        args = [c for c in node.children[1:-1] if isinstance(c, Tree) and c.data not in _TYPE_RULES]
        if not types or len(args) != 1:
            raise self.fail(node, "register<T>(size): one cell type and a size")
        size = self.constant(args[0])
        if not 1 <= size <= DENSE_REGISTER_CELLS:
            what = f"size {size} is outside 1..{DENSE_REGISTER_CELLS}"
            raise self.fail(node, f"register {node.children[-1]}: {what}")
        self.registers.append(node)
        width = self.width(types[0], f"register {node.children[-1]}")
        return Extern(str(node.children[-1]), "register", size, "cells", width)

    def table(self, control: Control, node: Tree) -> Table:
        name = str(node.children[0])
        keys: list[TableKey] = []
        actions: list[str] = []
        default: Tree | None = None
        entries: tuple[Tree, ...] = ()
        bound: dict[str, tuple[Tree, ...]] = {}
        priorities: tuple[int, ...] = ()
        const_default = False
        size = 1024
        properties: dict[str, Tree] = {}
        props = node.children[1:]
        named = [str(p.children[0]) if p.data == "table_other" else p.data[6:] for p in props]
        self.distinct(node, f"table {name}: property", named)
        for prop in node.children[1:]:
            if prop.data == "table_key":
                for elem in prop.children:
                    kind = str(elem.children[1])
                    if kind not in MatchKind.__members__.values():
                        what = f"match kind {kind!r} is not exact, lpm, ternary, optional or range"
                        raise self.fail(elem, f"table {name}: {what}")
                    alias = (self.annotation_in(elem, "name") or "").strip().strip('"')
                    text = self.source_text(elem.children[0])
                    keys.append(TableKey(text, elem.children[0], MatchKind(kind), 0, alias or text))
            elif prop.data == "table_actions":
                actions = [str(ref.children[0]) for ref in prop.children]
                bound = {
                    str(ref.children[0]): tuple(a for a in ref.children[1:] if a is not None)
                    for ref in prop.children
                }
            elif prop.data == "table_default":
                const_default = prop.children[0] is not None
                default = prop.children[1]
            elif prop.data == "table_entries":
                entries = tuple(e for e in prop.children[1:] if e is not None)
                priorities = self.entry_priorities(entries)
            elif prop.data == "table_other" and str(prop.children[0]) in PNA_TABLE_PROPERTIES:
                properties[str(prop.children[0])] = prop.children[1]
            elif prop.data == "table_other":
                what = f"property {prop.children[0]} is outside the supported subset"
                raise self.fail(prop, f"table {name}: {what}")
            else:
                size = self.constant(prop.children[0])
        if sum(k.kind == MatchKind.LPM for k in keys) > 1:
            raise self.fail(node, f"table {name}: at most one lpm key")
        for action in actions:
            if action not in control.actions and action not in self.global_actions and action != "NoAction":
                raise self.fail(node, f"table {name}: unknown action {action!r}")
        default_name: str = "NoAction"
        default_args: tuple[Tree, ...] = ()
        if default is not None:
            default_name = str(default.children[0])
            default_args = tuple(a for a in default.children[1:] if a is not None)
            if default_name not in actions and default_name != "NoAction":
                raise self.fail(
                    default, f"table {name}: default action {default_name!r} is not in its actions"
                )
        return Table(
            name, tuple(keys), tuple(actions), default_name, default_args, const_default, size, entries,
            bound, priorities, properties,
        )

    def entry_priorities(self, entries: tuple[Tree, ...]) -> tuple[int, ...]:
        """Each const entry's priority number, the smallest winning as in bmv2: its
        `@priority(N)`, else one more than the entry before it's (the first: 1), so that
        without annotations the earliest entry wins."""
        out: list[int] = []
        for entry in entries:
            found = None
            if not entry.meta.empty:
                for at, (name, body) in self.annotations.items():
                    if name == "priority" and entry.meta.start_pos <= at < entry.meta.end_pos:
                        found = (at, body)
            if found is None:
                out.append(out[-1] + 1 if out else 1)
                continue
            self.consumed.add(found[0])
            try:
                out.append(int(found[1].strip().strip("()"), 0))
            except ValueError:
                raise self.fail(entry, f"@priority{found[1]}: not a number") from None
        return tuple(out)
