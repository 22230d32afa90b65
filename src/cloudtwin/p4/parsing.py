"""Compiling a parser: its state machine (select transitions, a bound on the steps, P4's
parser errors) and the packet operations (`extract`, `advance`, `lookahead`, header stacks)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from lark import Token, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.bits import gather, read_bits, to_words, word_field, words_at
from cloudtwin.p4.context import Context, Expr, StmtFn
from cloudtwin.p4.expressions import ExpressionCompiler
from cloudtwin.p4.program import ParserBlock
from cloudtwin.p4.values import as_column, mask_of

__all__ = ["MAX_PARSER_STEPS", "ParserCompiler", "compile_parser", "parser_machine"]


MAX_PARSER_STEPS = 64
"""A packet still in the parser after this many state visits is rejected (loops)."""


def _extract_masked(
    ctx: Context,
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
        value = read_bits(raw, offset, width) if words is None else word_field(words, offset, width)
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


def compile_parser(compiler: ParserCompiler, parser: ParserBlock | None = None) -> Callable[[Context], None]:
    parser = parser or compiler.program.parser
    compiler.roles = parser.roles
    machine = parser_machine(compiler, parser, "")
    return lambda ctx: machine(ctx, np.ones(ctx.n, dtype=bool))


def parser_machine(compiler: ParserCompiler, parser: ParserBlock, label: str) -> StmtFn:
    """A parser's state machine run from `start` on the rows of a mask, until each row
    accepts, rejects or meets an error; `label` prefixes its state names in the counts."""
    states: dict[str, tuple[StmtFn, Callable[[Context, np.ndarray], list[tuple[str, np.ndarray]]]]] = {}
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

    def run(ctx: Context, everyone: np.ndarray) -> None:
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
    def run(ctx: Context, mask: np.ndarray) -> None:
        for stmt in body:
            stmt(ctx, mask & ~ctx.parser_error)

    return run


def _transition(
    compiler: ParserCompiler, node: Tree, states: dict[str, Tree]
) -> Callable[[Context, np.ndarray], list[tuple[str, np.ndarray]]]:
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

    def run(ctx: Context, mask: np.ndarray) -> list[tuple[str, np.ndarray]]:
        values = [as_column(k.fn(ctx, mask), ctx.n, k.width) for k in keys]
        left = mask.copy()
        out = []
        for matchers, state in cases:
            rows = left.copy()
            for value, matcher, key in zip(values, matchers, keys, strict=False):
                if matcher is None:
                    continue
                form, want, other = matcher
                full = mask_of(key.width or 64)
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


class ParserCompiler(ExpressionCompiler):
    """The compiler's parser operations."""

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

        def run(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
            count = as_column(bits.fn(ctx, mask), ctx.n, bits.width).astype(np.int64)
            if (mask & (count % 8 != 0)).any():
                where = self.program.where(node)
                raise P4Error(f"{where}: advance by bits that are not whole bytes")
            step = count // 8
            short = mask & (ctx.cursor + step > ctx.length)
            if short.any():
                ctx.fail_rows(short, too_short)
            ctx.cursor = np.where(mask & ~short, ctx.cursor + step, ctx.cursor)

        return run

    def lookahead_statement(self, node: Tree) -> StmtFn:
        """`pkt.lookahead<T>();` as a statement: rows without T's bytes left leave the parser
        with error.PacketTooShort; nothing else changes."""
        base, type_ = node.children[0], node.children[-1]
        if base.data != "ref" or self.path(base.children[0]) != ["pkt"]:
            raise self.fail(node, "lookahead of anything but the packet is outside the subset")
        size = -(-self.type_bits(type_) // 8)
        too_short = self.dp.error_codes["PacketTooShort"]

        def run(ctx: Context, mask: np.ndarray) -> None:
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

        def extract_member(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
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

    def extract_varbit(self, header: str, bits: Expr) -> StmtFn:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
            count = as_column(bits.fn(ctx, mask), ctx.n, bits.width).astype(object)
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
            value = as_column(0, ctx.n, most).astype(object)
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

        def run(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
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
                    ctx, header, plan, raw, ok, words_at(ctx.data, self_start, size) if narrow else None
                )
                ctx.cursor = ctx.cursor + np.where(ok, size, 0)
                return
            rows = np.flatnonzero(ok)
            raw = gather(ctx.data, rows, ctx.cursor[rows], size, ctx.n)
            words = to_words(raw) if narrow else None
            whole = rows.size == ctx.n
            for key, offset, width in plan:
                value = read_bits(raw, offset, width) if words is None else word_field(words, offset, width)
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
