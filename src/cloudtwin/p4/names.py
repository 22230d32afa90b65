"""The compiler's core: what a name in the program refers to (a storage key, a local, a
constant, a header stack's element), and the types and widths of what it names.

The compiler that turns a program's trees into closures over a batch is built in layers,
one module each, each extending the one before: names (here), `expressions`, `parsing`
(the parser's operations), `calls` (tables, actions, inlined controls and functions) and
`statements` (whose `Compiler` is the whole). The few methods an earlier layer calls of a
later one are declared here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.context import ActionFn, Context, Expr, ExprFn, StmtFn, literal
from cloudtwin.p4.declarations import parse_number
from cloudtwin.p4.program import Action, Control
from cloudtwin.p4.values import Value, as_column, fit

if TYPE_CHECKING:
    from cloudtwin.p4.datapath import Datapath

__all__ = ["NameCompiler", "element_of", "ref_tree"]


def _pick(ctx: Context, at: np.ndarray, cells: list[str], width: int) -> np.ndarray:
    """Each row's value of `cells[at]` (0 where `at` names no cell)."""
    out = as_column(0, ctx.n, width)
    for i, cell in enumerate(cells):
        out = np.where(at == i, ctx.get(cell), out)
    return out


def _last_of(cells: list[str], following: str, width: int) -> ExprFn:
    """A stack's `last.<field>`: each row's field of the element before its nextIndex."""
    return lambda ctx, mask: _pick(ctx, ctx.get(following).astype(np.int64) - 1, cells, width)


def element_of(cells: list[str], index: Expr, width: int, where: str) -> ExprFn:
    """`s[e].f` read with a run-time index; past the stack it is refused (P4: undefined)."""

    def element(ctx: Context, mask: np.ndarray) -> Value:
        at = as_column(index.fn(ctx, mask), ctx.n, index.width)
        if (mask & (at >= np.uint64(len(cells)))).any():
            raise P4Error(f"{where}: header stack index past {len(cells)} elements at run time")
        return _pick(ctx, at.astype(np.int64), cells, width)

    return element


def _last_index(following: str) -> ExprFn:
    return lambda ctx, mask: fit(ctx.get(following) - np.uint64(1), 32)


def ref_tree(key: str, node: Tree) -> Tree:
    """A `ref` tree naming storage key `key` (the path that a compiled copy reads)."""
    return Tree("ref", [Tree("path", [Token("NAME", part) for part in key.split(".")], node.meta)], node.meta)


class NameCompiler:
    """Turns the program's trees into closures over a batch context: names and types."""

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

    def resolve(self, node: Tree) -> Expr:
        names = self.path(node)
        key = ".".join(names)
        raw = ".".join(str(t) for t in node.children)
        if len(names) == 1 and names[0] in self.params:
            store = self.params[names[0]]
            return self.load(store)
        local = self.local(names)
        if isinstance(local, int) and len(names) == 1:
            return literal(local)
        if isinstance(local, str):
            key = ".".join([local, *names[1:]])
            if key in self.widths:
                return self.load(key)
            raise self.fail(
                node, f"{raw!r} is not a bit field (a header or struct as a value is outside the subset)"
            )
        if raw in self.program.constants:
            return literal(self.program.constants[raw], self.program.constant_widths.get(raw))
        if f"{key}$len" in self.widths:
            raise self.fail(node, f"{raw}: a varbit field is only extracted, emitted, copied or checksummed")
        if key in self.widths:
            return self.load(key)
        stacked = self.stack_member(key, node)
        if stacked is not None:
            return stacked
        raise self.fail(node, f"unknown name {raw!r}")

    def stack_member(self, key: str, node: Tree) -> Expr | None:
        """`s.size`, `s.lastIndex` and `s.last.f` of header stack `s` (the element before
        `next`), or None when `key` names none of them."""
        for stack, (htype, size) in self.program.stacks.items():
            if not key.startswith(stack + "."):
                continue
            rest = key[len(stack) + 1 :]
            following = f"{stack}.$next"
            if rest == "size":
                return literal(size, 32)
            if rest == "lastIndex":
                return Expr(_last_index(following), 32)
            field_name = rest.removeprefix("last.")
            width = dict(htype.fields).get(field_name)
            if rest.startswith("last.") and width is not None:
                cells = [f"{stack}[{i}].{field_name}" for i in range(size)]
                return Expr(_last_of(cells, following, width), width)
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

    def load(self, key: str) -> Expr:
        width = self.widths[key]
        return Expr(lambda ctx, mask: ctx.get(key), width, signed=key in self.dp.signed)

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

    def composite_ref(self, node: Tree) -> str | None:
        """The storage key of a header or struct `node` names, or None."""
        if node.data != "ref":
            return None
        key = self.key_of(node.children[0])
        return key if self.composite(key) is not None else None

    def varbit_key(self, node: Tree) -> str | None:
        """The storage key of the varbit field `node` names, or None."""
        if node.data != "ref":
            return None
        key = self.key_of(node.children[0])
        return key if f"{key}$len" in self.widths else None

    def param_scope(self, action: Action) -> str:
        """Where `action`'s parameters are stored: under its control unless it is global."""
        assert self.control is not None
        local = self.control.actions.get(action.name) is action
        return f"{self.control.name}." if local else ""

    def find_action(self, name: str, node: Tree) -> Action | None:
        if name == "NoAction":
            return None
        assert self.control is not None
        action = self.control.actions.get(name) or self.program.global_actions.get(name)
        if action is None:
            raise self.fail(node, f"unknown action {name!r}")
        return action

    def clear_composite(self, key: str) -> StmtFn:
        """A header or struct made fresh: fields 0, headers invalid."""
        fields, headers = self.composite(key) or ([], [])

        def fresh(ctx: Context, mask: np.ndarray) -> None:
            for suffix in fields:
                ctx.put(key + suffix, 0, mask)
            for suffix in headers:
                ctx.valid[key + suffix] = ctx.header_valid(key + suffix) & ~mask

        return fresh

    def lvalue_of(self, node: Tree) -> tuple[str, int]:
        """The storage an `out`/`inout` argument names (a field or variable, no slices)."""
        if node.data != "ref":
            raise self.fail(node, "an out or inout argument must be a field or variable")
        return self.lvalue(node.children[0])

    def siblings(self, header: str) -> list[str]:
        """The other members of the header union `header` belongs to (none if it is in none)."""
        for members in self.program.unions.values():
            if header in members:
                return [m for m in members if m != header]
        return []

    def type_bits(self, node: Tree, depth: int = 0) -> int:
        """The bits of a bit<N>, header or struct-of-fields type."""
        name = str(node.children[0]) if node.data == "named_type" else ""
        if name in self.program.headers:
            return self.program.headers[name].width_bits
        if name in self.program.structs and depth < 32:
            return sum(self.type_bits(t, depth + 1) for _, t in self.program.structs[name])
        return self.type_width(node, "lookahead")

    # what later layers compile (declared here, where an earlier layer calls them) ------
    def expr(self, node: Tree) -> Expr:
        """An expression (`expressions`)."""
        raise NotImplementedError

    def table_apply(self, names: list[str], node: Tree) -> Callable[[Context, np.ndarray], np.ndarray]:
        """`t.apply()`: the hit rows (`calls`)."""
        raise NotImplementedError

    def function_call(self, name: str, args: list[Tree], node: Tree) -> Expr:
        """A function called for its value (`calls`)."""
        raise NotImplementedError

    def block(self, node: Tree) -> StmtFn:
        """A block of statements (`statements`)."""
        raise NotImplementedError

    def statement(self, node: Tree) -> StmtFn:
        """One statement (`statements`)."""
        raise NotImplementedError

    def declare_local(self, node: Tree) -> StmtFn:
        """A local variable's declaration (`statements`)."""
        raise NotImplementedError

    def assign(self, node: Tree) -> StmtFn:
        """An assignment (`statements`)."""
        raise NotImplementedError

    def copy_composite(self, target: str, source: Tree, node: Tree) -> StmtFn:
        """A header or struct copied whole (`statements`)."""
        raise NotImplementedError
