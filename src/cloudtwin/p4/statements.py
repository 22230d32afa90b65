"""Compiling statements: blocks, assignments, `if`, `switch`, `for`, `return`, local
declarations, externs called as statements and method calls; `Compiler` is the whole
compiler (every layer)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from lark import Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.arch.externs import arch_extern
from cloudtwin.p4.calls import CallCompiler
from cloudtwin.p4.context import Context, StmtFn, as_bool, literal, sequence_of
from cloudtwin.p4.names import ref_tree
from cloudtwin.p4.values import as_column, fit, mask_of

__all__ = ["Compiler", "MAX_LOOP_ITERATIONS"]


MAX_LOOP_ITERATIONS = 4096
"""The most rounds a `for` loop may run for a packet (more is refused, naming the loop)."""


class Compiler(CallCompiler):
    """Turns the program's trees into closures over a batch context (every layer)."""

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
                return sequence_of([clear, self.struct_from_list(key, type_name, init)])
            copy = self.copy_composite(key, init, node) if init is not None else None
            return clear if copy is None else sequence_of([clear, copy])
        width = self.type_width(type_, str(name))
        self.widths[key] = width
        if self.is_signed(type_):
            self.dp.signed.add(key)
        value = self.expr(init) if init is not None else literal(0, width)
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

    def struct_from_list(self, key: str, type_name: str, init: Tree) -> StmtFn:
        """`S s = {a, b, ...};`: the struct's bit fields, in declaration order."""
        items = [c for c in init.children if c is not None]
        fields = self.program.structs[type_name]
        if len(items) != len(fields) or any(f"{key}.{name}" not in self.widths for name, _ in fields):
            raise self.fail(init, f"a list initialises {type_name}'s bit fields, one value each, in order")
        exprs = [(f"{key}.{name}", self.expr(item)) for (name, _), item in zip(fields, items, strict=True)]

        def init_fields(ctx: Context, mask: np.ndarray) -> None:
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

            def init(ctx: Context, mask: np.ndarray) -> None:
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
                return sequence_of([run, self.copy_composite(target, ref_tree(value, source), node)])
        if source.data != "ref":
            raise self.fail(node, "a header or struct is assigned from another of its type")
        origin = self.key_of(source.children[0])
        if self.composite(origin) != shape:
            raise self.fail(node, f"{origin} and {target} are not of the same type")

        siblings = self.siblings(target)  # a union member made valid invalidates the others

        def copy(ctx: Context, mask: np.ndarray) -> None:
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

    # statements ----------------------------------------------------------------------
    def block(self, node: Tree) -> StmtFn:
        self.scopes.append({})
        try:
            stmts = [self.statement(s) for s in node.children]
        finally:
            self.scopes.pop()

        def run(ctx: Context, mask: np.ndarray) -> None:
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

            def exit_(ctx: Context, mask: np.ndarray) -> None:
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

            def leave(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
            total = as_column(words.fn(ctx, mask), ctx.n, 16)
            part = (~total & np.uint64(0xFFFF)) if add else total  # the words' sum, or its complement
            value = ctx.get(state) + part
            value = (value & np.uint64(0xFFFF)) + (value >> np.uint64(16))
            ctx.put(state, (value & np.uint64(0xFFFF)) + (value >> np.uint64(16)), mask)

        return run

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

        def run(ctx: Context, mask: np.ndarray) -> None:
            if first is not None:
                first(ctx, mask)
            saved = ctx.loop_stop, ctx.broken
            ctx.broken = np.zeros(ctx.n, dtype=bool)
            active = mask
            for _ in range(MAX_LOOP_ITERATIONS):
                ctx.loop_stop = None
                active = ctx.stopped(active)
                if test is not None and active.any():
                    active = active & as_bool(test.fn(ctx, active), ctx)
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

        def rows_and_cells(ctx: Context, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            at = as_column(index.fn(ctx, mask), ctx.n, index.width)
            if psa:  # PSA: a write past the register does nothing
                mask = mask & (at < np.uint64(cells.size))
            elif (mask & (at >= np.uint64(cells.size))).any():
                raise P4Error(f"{where}: register {name} index past its {cells.size} cells at run time")
            rows = np.flatnonzero(mask)
            return rows, at[rows].astype(np.int64)

        if method == "read":
            key, _ = self.lvalue_of(args[0])

            def read(ctx: Context, mask: np.ndarray) -> None:
                rows, at = rows_and_cells(ctx, mask)
                column = as_column(0, ctx.n, width)
                column[rows] = cells[at]
                ctx.put(key, column, mask)

            return read
        value = self.expr(args[1])

        def write(ctx: Context, mask: np.ndarray) -> None:
            rows, at = rows_and_cells(ctx, mask)
            cells[at] = as_column(fit(value.fn(ctx, mask), width), ctx.n, width)[rows]

        return write

    def assign_element(self, target: Tree, value_node: Tree) -> StmtFn:
        """`s[e].f = v` with a run-time index `e`; an index past the stack is refused when
        a packet reaches it (P4 leaves what it does undefined)."""
        stack, index, field_name, width = self.dynamic_element(target)
        size = self.program.stacks[stack][1]
        value = self.expr(value_node)
        where = self.program.where(target)

        def run(ctx: Context, mask: np.ndarray) -> None:
            at = as_column(index.fn(ctx, mask), ctx.n, index.width)
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
        kept = Tree("index", [stack_ref, ref_tree(key, index_node)], base.meta)
        element = Tree("member", [kept, field_name], target.meta)
        store = self.assign_element(element, Tree(str(operator), [element, value_node], node.meta))

        def run(ctx: Context, mask: np.ndarray) -> None:
            ctx.put(key, as_column(index.fn(ctx, mask), ctx.n, index.width), mask)
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

            def give(ctx: Context, mask: np.ndarray) -> None:
                copy(ctx, mask)
                ctx.returned = mask.copy() if ctx.returned is None else ctx.returned | mask

            return give
        expr = self.expr(value) if value is not None else None

        def run(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
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
    ) -> Callable[[Context, np.ndarray], list[np.ndarray]]:
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

            def by_action(ctx: Context, mask: np.ndarray) -> list[np.ndarray]:
                _, ran = apply(ctx, mask)
                none = np.zeros(ctx.n, dtype=bool)
                return [np.logical_or.reduce([ran.get(a, none) for a in acts] + [none]) for acts in wanted]

            return by_action
        value = self.expr(subject)
        constants = [[self.constant(label.children[0]) for label in labels] for labels in groups]

        def by_value(ctx: Context, mask: np.ndarray) -> list[np.ndarray]:
            column = as_column(value.fn(ctx, mask), ctx.n, value.width)
            none = np.zeros(ctx.n, dtype=bool)
            out = []
            for values in constants:
                rows = none.copy()
                for v in values:
                    rows |= column == (v & mask_of(value.width or 64))
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
        part = mask_of(hi - lo + 1) << lo
        keep = mask_of(width) ^ part

        def run(ctx: Context, mask: np.ndarray) -> None:
            old = ctx.get(key)
            new = as_column(fit(value.fn(ctx, mask), hi - lo + 1), ctx.n, width)
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

        def run(ctx: Context, mask: np.ndarray) -> None:
            taken = as_bool(cond.fn(ctx, mask), ctx) & mask
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

            def evaluate(ctx: Context, mask: np.ndarray) -> None:
                expr.fn(ctx, mask)

            return evaluate
        path, *args = call.children
        args = [a for a in args if a is not None]
        names = self.path(path)
        if len(names) == 1 and names[0] in self.program.functions:
            expr = self.function_call(names[0], args, call)

            def call_function(ctx: Context, mask: np.ndarray) -> None:
                expr.fn(ctx, mask)

            return call_function
        method = names[-1]
        target = names[:-1]
        if method in ("setValid", "setInvalid"):
            header = self.header(Tree("path", path.children[:-1], path.meta))
            flag = method == "setValid"

            siblings = self.siblings(header) if flag else []

            def set_valid(ctx: Context, mask: np.ndarray) -> None:
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

            def apply_table(ctx: Context, mask: np.ndarray) -> None:
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

            def send(ctx: Context, mask: np.ndarray) -> None:
                value = as_column(port.fn(ctx, mask), ctx.n, 32).astype(np.int64)
                ctx.port = np.where(mask, value, ctx.port)
                ctx.drop = ctx.drop & ~mask

            return send
        if names == ["drop_packet"] and not args:

            def drop(ctx: Context, mask: np.ndarray) -> None:
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

        def run(ctx: Context, mask: np.ndarray) -> None:
            failed = mask & ~as_bool(check.fn(ctx, mask), ctx)
            if failed.any():
                ctx.fail_rows(failed, code)

        return run
