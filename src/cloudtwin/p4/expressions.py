"""Compiling expressions: operators with P4's width and sign semantics, casts, slices,
saturating arithmetic, `?:`, checksums, meter and register reads, `lookahead` and the calls
that give a value."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.bits import gather, read_bits, word_sum
from cloudtwin.p4.cells import COLOUR_NAMES
from cloudtwin.p4.context import Context, Expr, ExprFn, as_bool, literal
from cloudtwin.p4.declarations import parse_number
from cloudtwin.p4.names import NameCompiler, element_of
from cloudtwin.p4.values import (
    BINARY_OPS,
    COMPARISONS,
    Value,
    arith,
    as_column,
    bits_of,
    compare_values,
    concat_bits,
    fit,
    invert,
    mask_of,
    operands,
    resize,
    signed_of,
    wrapping_sub,
)

__all__ = ["ExpressionCompiler"]


def _short_circuit(left: Expr, right: Expr, both: bool) -> ExprFn:
    """`a && b` (`both`) or `a || b`: `b` is evaluated only on the rows `a` leaves undecided,
    so a table applied or a function called in `b` runs on those rows alone."""

    def fn(ctx: Context, mask: np.ndarray) -> Value:
        first = as_bool(left.fn(ctx, mask), ctx)
        undecided = mask & (first if both else ~first)
        if not undecided.any():
            return first.copy()
        second = as_bool(right.fn(ctx, undecided), ctx)
        return (first & second) if both else (first | second)

    return fn


def _sized(expr: Expr, width: int, signed: bool = False) -> Expr:
    """An unsized literal taken at `width` bits (P4: `8w255 == -1` holds), as an int<N>
    when it meets one."""
    value = fit(expr.fn(None, None), width)  # type: ignore[arg-type]
    return Expr(lambda ctx, mask: int(value), width, constant=True, signed=signed)


def _signed_compare(
    op: Callable[[Value, Value], Value], left: Expr, right: Expr, width: int
) -> ExprFn:
    """A comparison of int<N> values, in two's complement."""

    def fn(ctx: Context, mask: np.ndarray) -> Value:
        a = signed_of(left.fn(ctx, mask), width)
        b = signed_of(right.fn(ctx, mask), width)
        result = op(a, b)
        return result.astype(bool) if isinstance(result, np.ndarray) else np.asarray(bool(result))

    return fn


def _arithmetic_shift(left: Expr, right: Expr, width: int) -> ExprFn:
    """`a >> b` on an int<N>: the sign bit fills the bits shifted in."""
    source = left.width or width

    def fn(ctx: Context, mask: np.ndarray) -> Value:
        a = signed_of(left.fn(ctx, mask), source)
        b = right.fn(ctx, mask)
        if isinstance(a, np.ndarray) and a.dtype == np.int64:
            amount = np.minimum(np.asarray(b, dtype=np.uint64), np.uint64(63)).astype(np.int64)
            return bits_of(a >> amount, width)
        if isinstance(a, np.ndarray):
            amounts = as_column(b, ctx.n, None).tolist()
            shifted = [int(x) >> int(s) for x, s in zip(a.tolist(), amounts, strict=True)]
            return bits_of(np.array(shifted, dtype=object), width)
        return bits_of(int(a) >> int(b), width)

    return fn


def _divide(kind: str, left: Expr, right: Expr, width: int, where: str) -> ExprFn:
    """`a / b`, `a % b` on bit<N> (unsigned, rounding down); a row dividing by 0 is refused
    when a packet reaches it (P4 leaves it undefined)."""

    def fn(ctx: Context, mask: np.ndarray) -> Value:
        a, b = operands(left.fn(ctx, mask), right.fn(ctx, mask), width)
        zero = as_column(b, ctx.n, width) == 0
        if (mask & zero).any():
            raise P4Error(f"{where}: division by 0 at run time")
        safe = np.where(zero, 1, b) if isinstance(b, np.ndarray) else b
        return fit(a // safe if kind == "div" else a % safe, width)

    return fn


class ExpressionCompiler(NameCompiler):
    """The compiler's expressions."""

    # expressions -------------------------------------------------------------------
    def expr(self, node: Tree) -> Expr:
        kind = node.data
        if kind == "number":
            value, width = parse_number(str(node.children[0]))
            signed = re.match(r"[0-9]+s", str(node.children[0])) is not None  # `4s7`: an int<4>
            value = value if width is None else value & mask_of(width)
            return Expr(lambda ctx, mask: value, width, constant=True, signed=signed)
        if kind in ("true", "false"):
            flag = kind == "true"
            return Expr(lambda ctx, mask: np.full(ctx.n, flag), 1, True)
        if kind == "ref":
            return self.resolve(node.children[0])
        if kind == "call_expr":
            return self.call_expr(node.children[0])
        if kind in BINARY_OPS:
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
            return Expr(element_of(cells, index, width, self.program.where(node)), width)
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
            return literal(self.program.constants[name], self.program.type_widths.get("error"))
        if kind in ("cast", "name_cast"):
            return self.cast(node)
        raise self.fail(node, f"expression {kind} is outside the supported subset")

    def cast(self, node: Tree) -> Expr:
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
            return Expr(lambda ctx, mask: as_bool(inner.fn(ctx, mask), ctx), 1, True)
        elif target.data == "bits":
            width = parse_number(str(target.children[0]))[0]
        else:
            what = target.data.removesuffix("_type")
            raise self.fail(node, f"a cast to {what} is outside the supported subset")
        if inner.signed and inner.width is not None:  # int<M> to N bits: sign-extended
            source = inner.width
            return Expr(
                lambda ctx, mask: resize(inner.fn(ctx, mask), source, width, True), width, signed=signed
            )
        return Expr(lambda ctx, mask: fit(inner.fn(ctx, mask), width), width, signed=signed)

    def dynamic_element(self, node: Tree) -> tuple[str, Expr, str, int]:
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

    def saturating(self, node: Tree, kind: str) -> Expr:
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
        low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, mask_of(width))

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            a = as_column(left.fn(ctx, mask), ctx.n, width).astype(object)
            b = as_column(right.fn(ctx, mask), ctx.n, width).astype(object)
            if signed:
                a, b = signed_of(a, width), signed_of(b, width)
            out = np.clip(a + b if kind == "sat_add" else a - b, low, high)
            return bits_of(out.astype(object), width)

        return Expr(fn, width, signed=signed)

    def mux(self, node: Tree) -> Expr:
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

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            chosen = as_bool(cond.fn(ctx, mask), ctx)
            a = as_column(fit(left.fn(ctx, mask & chosen), width), ctx.n, width)
            b = as_column(fit(right.fn(ctx, mask & ~chosen), width), ctx.n, width)
            out = np.where(chosen, a, b)
            return out.astype(bool) if is_bool else out

        return Expr(fn, width, is_bool)

    def constant(self, node: Tree) -> int:
        if node.data in ("true", "false"):
            return int(node.data == "true")
        expr = self.expr(node)
        if not expr.constant:
            raise self.fail(node, "a compile-time constant is needed here")
        return int(expr.fn(None, None))  # type: ignore[arg-type]

    def slice(self, base: Expr, hi: int, lo: int, node: Tree) -> Expr:
        if hi < lo or (base.width is not None and hi >= base.width):
            raise self.fail(node, f"slice [{hi}:{lo}] is outside bit<{base.width}>")
        width = hi - lo + 1

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            value = base.fn(ctx, mask)
            if isinstance(value, int):
                return (value >> lo) & mask_of(width)
            shifted = value >> (lo if value.dtype == object else np.uint64(lo))
            return fit(shifted, width)

        return Expr(fn, width)

    def unary(self, node: Tree, kind: str) -> Expr:
        inner = self.expr(node.children[0])
        if kind == "lnot":
            return Expr(lambda ctx, mask: ~as_bool(inner.fn(ctx, mask), ctx), 1, True)
        if inner.width is None:  # an unsized literal: exact, fitted where it meets a width
            value = int(inner.fn(None, None))  # type: ignore[arg-type]
            return literal(-value if kind == "neg" else ~value)
        width = inner.width or 64
        signed = inner.signed
        if kind == "bnot":
            return Expr(
                lambda ctx, mask: fit(invert(inner.fn(ctx, mask), width), width), width, signed=signed
            )
        return Expr(
            lambda ctx, mask: fit(wrapping_sub(0, inner.fn(ctx, mask), width), width), width, signed=signed
        )

    def binary(self, node: Tree, kind: str) -> Expr:
        if kind in ("eq", "ne") and any(self.composite_ref(c) for c in node.children):
            return self.composite_equal(node, kind == "ne")
        left, right = (self.expr(c) for c in node.children)
        if kind in ("land", "lor"):
            return Expr(_short_circuit(left, right, kind == "land"), 1, True)
        if kind == "concat":
            if left.width is None or right.width is None:
                raise self.fail(node, "++ needs operands of known width (cast the literal)")
            total, shift = left.width + right.width, right.width
            return Expr(
                lambda ctx, mask: concat_bits(left.fn(ctx, mask), right.fn(ctx, mask), shift, total), total
            )
        if left.width is None and right.width is None and kind not in COMPARISONS:
            a, b = int(left.fn(None, None)), int(right.fn(None, None))  # type: ignore[arg-type]
            if kind in ("div", "mod") and b <= 0:
                raise self.fail(node, "division by a constant that is not positive")
            return literal(int(BINARY_OPS[kind](a, b)))
        shift = kind in ("shl", "shr")
        signed = left.signed or (right.signed and not shift)
        if left.width is None and right.width is not None and not left.is_bool:
            left = _sized(left, right.width, signed)
        elif right.width is None and left.width is not None and not shift:
            right = _sized(right, left.width, signed)
        width = left.width if left.width is not None else right.width
        if left.width is not None and right.width is not None and not shift:
            width = max(left.width, right.width)
        compute = BINARY_OPS[kind]
        if kind in COMPARISONS and signed and width is not None:
            return Expr(_signed_compare(compute, left, right, width), 1, True)
        if kind in COMPARISONS:
            return Expr(
                lambda ctx, mask: compare_values(compute, left.fn(ctx, mask), right.fn(ctx, mask), width),
                1,
                True,
            )
        w = width or 64
        if kind in ("div", "mod"):
            if signed:
                raise self.fail(node, "/ and % on int<N> are outside the supported subset")
            return Expr(_divide(kind, left, right, w, self.program.where(node)), width)
        if kind == "shr" and signed:
            return Expr(_arithmetic_shift(left, right, w), width, signed=True)
        return Expr(
            lambda ctx, mask: fit(arith(kind, left.fn(ctx, mask), right.fn(ctx, mask), w), w),
            width,
            signed=signed,
        )

    def composite_equal(self, node: Tree, negate: bool) -> Expr:
        """`a == b` on headers or structs of one type: every header both invalid, or both
        valid with equal fields; every other field equal."""
        left, right = (self.composite_ref(c) for c in node.children)
        if left is None or right is None or self.composite(left) != self.composite(right):
            raise self.fail(node, "== and != compare headers or structs of one type only")
        fields, headers = self.composite(left)  # type: ignore[misc]
        owner = {f: max((h for h in headers if f.startswith(h + ".")), key=len, default=None) for f in fields}

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            same = np.ones(ctx.n, dtype=bool)
            valid = {h: (ctx.header_valid(left + h), ctx.header_valid(right + h)) for h in headers}
            for a, b in valid.values():
                same &= a == b
            for f in fields:
                equal = ctx.get(left + f) == ctx.get(right + f)
                h = owner[f]
                same &= equal if h is None else (equal | ~(valid[h][0] | valid[h][1]))
            return ~same if negate else same

        return Expr(fn, 1, True)

    def call_expr(self, call: Tree) -> Expr:
        if call.data == "call_member":
            path, *rest = call.children
            member = str(rest[-1])
            names = self.path(path)
            if names[-1] != "apply" or member not in ("hit", "miss"):
                raise self.fail(call, f"only table.apply().hit/.miss, not .{member}")
            apply = self.table_apply(names[:-1], call)
            want_hit = member == "hit"
            return Expr(lambda ctx, mask: apply(ctx, mask) == want_hit, 1, True)
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
            return Expr(
                lambda ctx, mask: np.logical_or.reduce([ctx.header_valid(m) for m in members]), 1, True
            )
        if names[-1] == "isValid":
            header = self.header(Tree("path", path.children[:-1], path.meta))
            return Expr(lambda ctx, mask: ctx.header_valid(header).copy(), 1, True)
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
                return Expr(lambda ctx, mask: ~ctx.get(state) & np.uint64(0xFFFF), 16)
            if names[1] == "get_state":
                return Expr(lambda ctx, mask: ctx.get(state), 16)
        if len(names) == 2 and names[1] == "read" and names[0] in self.dp.registers and len(args) == 1:
            return self.register_read(names[0], args[0], call)  # PSA's `r.read(index)`
        raise self.fail(call, f"call {'.'.join(names)}(...) is not an expression in the supported subset")

    def checksum_rows(self, args: list[Tree], node: Tree, payload: bool = False) -> Expr:
        """The ones' complement checksum of fields that include varbit ones (each as long
        as its row's length), and then the payload (the bytes after the parsed headers) when
        `payload`; computed row by row; an odd byte at the end is padded with 0."""
        parts: list[tuple[str | None, Expr | None]] = []
        for arg in args:
            key = self.varbit_key(arg)
            expr = None if key is not None else self.expr(arg)
            if expr is not None and expr.width is None:
                raise self.fail(arg, "checksum16 takes fields of known width")
            parts.append((key, expr))

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            columns = []
            for key, expr in parts:
                if key is not None:
                    columns.append((ctx.get(key).tolist(), ctx.get(f"{key}$len").tolist()))
                else:
                    assert expr is not None and expr.width is not None
                    column = as_column(expr.fn(ctx, mask), ctx.n, expr.width).tolist()
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

        return Expr(fn, 16)

    def checksum(self, args: list[Tree], node: Tree, payload: bool = False) -> Expr:
        if payload or any(self.varbit_key(a) is not None for a in args):
            return self.checksum_rows(args, node, payload)
        exprs = [self.expr(a) for a in args]
        if any(e.width is None or e.width > 64 for e in exprs):
            raise self.fail(node, "checksum16 takes fields of known width up to 64 bits")
        if sum(e.width for e in exprs) % 16:  # type: ignore[misc]
            raise self.fail(node, "checksum16: the fields must add up to whole 16-bit words")

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            total = np.zeros(ctx.n, dtype=np.uint64)
            offset = 0
            for e in exprs:
                value = as_column(e.fn(ctx, mask), ctx.n, e.width)
                total += word_sum(value, offset, e.width or 0)
                offset += e.width or 0
            while True:
                carry = total >> np.uint64(16)
                if not carry.any():
                    break
                total = (total & np.uint64(0xFFFF)) + carry
            return (~total) & np.uint64(0xFFFF)

        return Expr(fn, 16)

    def meter_execute(self, name: str, args: list[Tree], node: Tree) -> Expr:
        assert self.control is not None
        extern = self.control.externs.get(name)
        if extern is None or extern.kind != "Meter" or len(args) != 1:
            raise self.fail(node, f"{name}.execute(index): {name!r} is not a Meter")
        index = self.expr(args[0])
        meter = self.dp.meters[name]
        if self.program.pna_file:  # pna.p4's own PNA_MeterColor_t { RED, GREEN, YELLOW }
            named = [self.program.constants[f"PNA_MeterColor_t.{c}"] for c in COLOUR_NAMES]
            codes = np.array(named, dtype=np.uint64)

            def pna_colour(ctx: Context, mask: np.ndarray) -> Value:
                return codes[meter.execute(ctx, mask, index.fn(ctx, mask), index.width)]

            return Expr(pna_colour, 32)
        if self.program.architecture == "psa":  # PSA_MeterColor_t { RED, GREEN, YELLOW }
            names = (f"PSA_MeterColor_t.{c}" for c in ("GREEN", "YELLOW", "RED"))
            colour = np.array([self.program.constants[n] for n in names], dtype=np.uint64)

            def psa_colour(ctx: Context, mask: np.ndarray) -> Value:
                return colour[meter.execute(ctx, mask, index.fn(ctx, mask), index.width)]

            return Expr(psa_colour, 32)
        return Expr(lambda ctx, mask: meter.execute(ctx, mask, index.fn(ctx, mask), index.width), 2)

    def register_read(self, name: str, index_node: Tree, node: Tree) -> Expr:
        """`r.read(index)`: the cell's value. An index past the register reads as 0 under
        PSA (a value it leaves unspecified) and is an error at run time otherwise."""
        cells, width = self.dp.registers[name]
        psa = self.program.architecture == "psa"
        where = self.program.where(node)
        index = self.expr(index_node)

        def read(ctx: Context, mask: np.ndarray) -> Value:
            at = as_column(index.fn(ctx, mask), ctx.n, index.width)
            outside = at >= np.uint64(cells.size)
            if psa:  # PSA: a read past the register gives an unspecified value, here 0
                mask = mask & ~outside
            elif (mask & outside).any():
                raise P4Error(f"{where}: register {name} index past its {cells.size} cells at run time")
            column = as_column(0, ctx.n, width)
            rows = np.flatnonzero(mask)
            column[rows] = cells[at[rows].astype(np.int64)]
            return column

        return Expr(read, width)

    def lookahead(self, node: Tree, member: str | None = None) -> Expr:
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

        def fn(ctx: Context, mask: np.ndarray) -> Value:
            short = mask & (ctx.cursor + size > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)
            out = np.zeros(ctx.n, dtype=np.uint64)
            rows = np.flatnonzero(mask & ~short)
            if rows.size:
                raw = gather(ctx.data, rows, ctx.cursor[rows], size, ctx.n)
                out[rows] = read_bits(raw, offset, width)
            return out

        return Expr(fn, width)
