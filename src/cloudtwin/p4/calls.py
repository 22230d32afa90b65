"""Compiling calls: tables applied (the entry each row hits and the action it runs), actions
and their directional parameters, and controls, parsers and functions inlined where they
are called."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from lark import Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.cells import add_at, in_array
from cloudtwin.p4.context import ActionFn, Context, Expr, StmtFn, copy_in, copy_out, literal
from cloudtwin.p4.names import ref_tree
from cloudtwin.p4.parsing import ParserCompiler, parser_machine
from cloudtwin.p4.program import Action, Control, ParserBlock, Table
from cloudtwin.p4.values import Value, as_column, fit

__all__ = ["CallCompiler", "MAX_ACTION_CALLS"]


MAX_ACTION_CALLS = 10_000
"""The most action runs one action may make through the actions it calls (and they call)."""


class CallCompiler(ParserCompiler):
    """The compiler's tables, actions and inlined calls."""

    # tables, externs, actions --------------------------------------------------------
    def table_apply(self, names: list[str], node: Tree) -> Callable[[Context, np.ndarray], np.ndarray]:
        apply = self.table_apply_runs(names, node)
        return lambda ctx, mask: apply(ctx, mask)[0]

    def table_apply_runs(
        self, names: list[str], node: Tree
    ) -> Callable[[Context, np.ndarray], tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Applying a table: each row's hit, and the rows that ran each action."""
        assert self.control is not None
        if len(names) != 1 or names[0] not in self.control.tables:
            raise self.fail(node, f"{'.'.join(names)!r} is not a table of {self.control.name}")
        state = self.dp.tables[names[0]]
        keys = [self.expr(k.expr) for k in state.table.keys]
        if len(state.widths) != len(keys):  # a table of a control applied from another
            if any(k.width is None for k in keys):
                raise self.fail(node, f"table {state.table.name}: a key needs a known width")
            state.widths = tuple(k.width for k in keys if k.width is not None)
            self.dp.initialise(state)
        actions = {a: self.action_runner(a, node) for a in state.table.actions}
        actions.setdefault(state.table.default_action, self.action_runner(state.table.default_action, node))

        for action_name in list(actions):
            action = self.find_action(action_name, node)
            if action is not None and any(action.types):
                what = f"action {action_name} has header or struct parameters"
                raise self.fail(node, f"table {state.table.name}: {what}")
            if action is not None and any(action.directions):
                actions[action_name] = self.bind_directional(action, state.table, actions[action_name], node)

        def apply(ctx: Context, mask: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            values = [k.fn(ctx, mask) for k in keys]
            columns = [as_column(v, ctx.n, w) for v, w in zip(values, state.widths, strict=True)]
            index = self.dp.lookup(state, columns, ctx.n)
            if state.hook is not None:  # PNA: entries that expired, keys for add_entry
                index = state.hook(ctx, mask, columns, index)
            hit = (index >= 0) & mask
            if hit.any():
                add_at(state.hits, index[hit], 1)
            chosen = np.where(hit, index, -1)
            codes = state.action_codes()
            # each row's action, as its position in the table's action list (-1: a miss)
            taken = np.where(hit, codes[np.maximum(chosen, 0)], -1) if codes.size else chosen
            ran: dict[str, np.ndarray] = {}
            for name, run in actions.items():
                rows = self.dp.rows_for(state, chosen, taken, name, mask)
                if rows is not None:
                    ran[name] = rows[0]
                    run(ctx, rows[0], rows[1])
            return hit, ran

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
        saved, saved_writable, saved_returns = self.params, self.writable, self.returns
        scope = self.param_scope(action)
        self.params = {p: f"param.{scope}{action.name}.{p}" for p, _ in action.params}
        self.writable = {p for (p, _), d in zip(action.params, action.directions, strict=False) if d}
        self.returns = [None]
        self.compiling.append(name)
        self.calls[name] = 1
        try:
            body = self.block(action.body)
        finally:
            self.compiling.pop()
            self.params, self.writable, self.returns = saved, saved_writable, saved_returns
        keys = [f"param.{scope}{action.name}.{p}" for p, _ in action.params]

        runs = self.dp.action_runs

        def run(ctx: Context, mask: np.ndarray, params: list[np.ndarray]) -> None:
            runs[action.name] = runs.get(action.name, 0) + int(mask.sum())
            for key, value in zip(keys, params, strict=True):
                ctx.values[key] = as_column(fit(value, ctx.widths[key]), ctx.n, ctx.widths[key])
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned

        self.runners[name] = run
        self.count_calls(name, node)
        return run

    def count_calls(self, name: str, node: Tree) -> None:
        """Add the runs of action `name` to the action being compiled, if any."""
        if not self.compiling:
            return
        caller = self.compiling[-1]
        if caller not in self.calls:  # a function, parser or control being inlined
            return
        self.calls[caller] += self.calls[name]
        if self.calls[caller] > MAX_ACTION_CALLS:
            raise self.fail(
                node,
                f"action {caller} runs more than {MAX_ACTION_CALLS:,} actions each time it runs "
                "(actions calling actions several times, nested)",
            )

    def direct_action(self, name: str, args: list[Tree], node: Tree) -> StmtFn:
        action = self.find_action(name, node)
        if action is None:
            return lambda ctx, mask: None
        if len(args) != len(action.params):
            raise self.fail(node, f"action {name} takes {len(action.params)} arguments, got {len(args)}")
        if any(action.types):
            return self.inline_action(action, args, node)
        directions = action.directions or ("",) * len(args)
        exprs = [self.expr(a) if d != "out" else literal(0) for a, d in zip(args, directions, strict=True)]
        outs = [
            (self.lvalue_of(a), f"param.{self.param_scope(action)}{action.name}.{p}")
            for a, d, (p, _) in zip(args, directions, action.params, strict=True)
            if d in ("out", "inout")
        ]
        run = self.action_runner(name, node)

        def call(ctx: Context, mask: np.ndarray) -> None:
            pairs = zip(exprs, action.params, strict=True)
            values = [as_column(e.fn(ctx, mask), ctx.n, w) for e, (_, w) in pairs]
            run(ctx, mask, values)
            for (key, _), param in outs:
                ctx.put(key, ctx.get(param), mask)

        return call

    def bind_directional(self, action: Action, table: Table, run: ActionFn, node: Tree) -> ActionFn:
        """A table's action whose directional parameters its `actions` list binds
        (`a(hdr.x)`): copied in before it runs, `out`/`inout` ones copied back after."""
        args = table.bound.get(action.name, ())
        count = sum(1 for d in action.directions if d)
        if len(args) != count or any(not d for d in action.directions[:count]):
            what = f"action {action.name} needs its {count} directional arguments"
            raise self.fail(node, f"table {table.name}: {what}")
        directions = zip(args, action.directions, strict=False)
        exprs = [self.expr(a) if d != "out" else literal(0) for a, d in directions]
        scope = self.param_scope(action)
        outs = [
            (self.lvalue_of(a)[0], f"param.{scope}{action.name}.{p}")
            for a, d, (p, _) in zip(args, action.directions, action.params, strict=False)
            if d in ("out", "inout")
        ]
        widths = [w for _, w in action.params[:count]]

        def bound(ctx: Context, mask: np.ndarray, params: list[np.ndarray]) -> None:
            given = [as_column(e.fn(ctx, mask), ctx.n, w) for e, w in zip(exprs, widths, strict=True)]
            run(ctx, mask, [*given, *params])
            for key, param in outs:
                ctx.put(key, ctx.get(param), mask)

        return bound

    def inline_block(self, block: Control | ParserBlock, args: list[Tree], node: Tree) -> StmtFn:
        """`instance.apply(args)` of a parser or control: its body inlined here, arguments
        copied in and `out`/`inout` ones copied back (as P4 calls are)."""
        if len(args) != len(block.params):
            raise self.fail(node, f"{block.name} takes {len(block.params)} arguments, got {len(args)}")
        if block.name in self.compiling:
            raise self.fail(node, f"{block.name} applies itself")
        busy = isinstance(block, Control) and (block.externs or block.variables or block.instances)
        applied = self.program.applied_controls()
        if busy or (isinstance(block, Control) and block.tables and block not in applied):
            what = "a control with externs, variables or tables and more than one instance,"
            raise self.fail(node, f"applying {block.name}, {what} is outside the subset")
        if block in self.inlined:
            raise self.fail(node, f"{block.name} is applied twice; one application per instance is supported")
        if isinstance(block, Control) and block.tables:
            self.inlined.append(block)
        self.dp.sites += 1
        prefix = f"inl.{block.name}#{self.dp.sites}"
        roles: dict[str, str] = {}
        params, bound = [], []
        for (name, direction, type_), arg in zip(block.params, args, strict=True):
            type_name = str(type_.children[0]) if type_.data == "named_type" else ""
            if type_name in ("packet_in", "packet_out"):
                roles[name] = "pkt"
                continue
            if type_name.startswith("pna_main_") and type_name.endswith("_metadata_t"):  # the architecture's
                roles[name] = "ostd" if "output" in type_name else "istd"
                continue
            composite = type_name in self.program.headers or type_name in self.program.structs
            if composite and direction == "inout" and arg.data == "ref":
                caller = self.key_of(arg.children[0])
                if any(stack.startswith(caller + ".") for stack in self.program.stacks):
                    # a struct holding header stacks: the parameter names the caller's own
                    # storage (what copy-in/copy-out gives, as no other path reaches it here)
                    roles[name] = caller
                    continue
            width = 0 if composite else self.type_width(type_, f"{block.name} parameter {name}")
            params.append((name, direction, type_name if composite else "", width))
            bound.append(arg)
        scope, enter, leave = self.bind(prefix, params, bound, node)
        saved = (self.scopes, self.params, self.roles, self.returns, self.writable, self.control)
        self.scopes, self.params, self.roles, self.returns, self.writable = [scope], {}, roles, [None], set()
        self.compiling.append(block.name)
        try:
            if isinstance(block, ParserBlock):
                self.control = None
                body = parser_machine(self, block, f"{block.name}.")
            else:
                self.control = block
                assert block.apply is not None
                body = self.block(Tree("block", [*block.prelude, *block.apply.children], block.apply.meta))
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.roles, self.returns, self.writable, self.control = saved

        return _framed(enter, body, leave)

    def bind(
        self, prefix: str, params: list[tuple[str, str, str, int]], args: list[Tree], node: Tree
    ) -> tuple[dict[str, str | int], list[StmtFn], list[StmtFn]]:
        """Storage for the parameters (name, direction, header/struct type or "", width) of
        an inlined call under `prefix`: the scope naming them, the copy-in steps and the
        copy-out steps (`out` parameters start as 0 or invalid headers)."""
        scope: dict[str, str | int] = {}
        enter: list[StmtFn] = []
        leave: list[StmtFn] = []
        for (name, direction, type_name, width), arg in zip(params, args, strict=True):
            key = f"{prefix}.{name}"
            scope[name] = key
            if type_name:
                self.declare_composite(key, type_name, node)
                out = direction == "out"
                enter.append(self.clear_composite(key) if out else self.copy_composite(key, arg, node))
            else:
                self.widths[key] = width
                enter.append(copy_in(key, self.expr(arg) if direction != "out" else literal(0)))
            if direction not in ("out", "inout"):
                continue
            dynamic = arg.data == "member" and arg.children[0].data == "index"
            if dynamic and not type_name:  # s[e].f: copied back to the element e named on entry
                enter_at, back = self.element_out(arg, key)
                enter.append(enter_at)
                leave.append(back)
                continue
            if arg.data == "slice_expr" and arg.children[0].data == "ref" and not type_name:
                lvalue = Tree("lvalue", [arg.children[0].children[0], Tree("slice", arg.children[1:])])
                leave.append(self.assign(Tree("assign", [lvalue, ref_tree(key, arg)], arg.meta)))  # f[hi:lo]
                continue
            if arg.data != "ref":
                raise self.fail(arg, "an out or inout argument must be a header, struct or field")
            if type_name:
                leave.append(self.copy_composite(self.key_of(arg.children[0]), ref_tree(key, arg), node))
            else:
                leave.append(copy_out(key, self.lvalue_of(arg)[0]))
        return scope, enter, leave

    def element_out(self, target: Tree, key: str) -> tuple[StmtFn, StmtFn]:
        """For `s[e].f` passed as an out or inout argument held at `key`: the step that
        notes which element `e` names when the call starts, and the copy back into it."""
        stack, index, field_name, _ = self.dynamic_element(target)
        size = self.program.stacks[stack][1]
        at_key = f"{key}$at"
        self.widths[at_key] = 32
        where = self.program.where(target)

        def note(ctx: Context, mask: np.ndarray) -> None:
            at = as_column(index.fn(ctx, mask), ctx.n, index.width)
            if (mask & (at >= np.uint64(size))).any():
                raise P4Error(f"{where}: header stack index past {stack}'s {size} elements at run time")
            ctx.put(at_key, at, mask)

        def back(ctx: Context, mask: np.ndarray) -> None:
            at = ctx.get(at_key)
            for i in range(size):
                rows = mask & (at == np.uint64(i))
                if rows.any():
                    ctx.put(f"{stack}[{i}].{field_name}", ctx.get(key), rows)

        return note, back

    def inline_action(self, action: Action, args: list[Tree], node: Tree) -> StmtFn:
        """A direct call of an action with header or struct parameters: inlined here, its
        arguments copied in and `out`/`inout` ones back."""
        if action.name in self.compiling:
            raise self.fail(node, f"action {action.name} calls itself; P4 actions cannot recurse")
        self.dp.sites += 1
        prefix = f"act.{action.name}#{self.dp.sites}"
        params = [
            (p, d or "in", t, w)
            for (p, w), d, t in zip(action.params, action.directions, action.types, strict=True)
        ]
        scope, enter, leave = self.bind(prefix, params, args, node)
        saved = (self.scopes, self.params, self.returns, self.writable)
        self.scopes, self.params, self.returns, self.writable = [scope], {}, [None], set()
        self.compiling.append(action.name)
        try:
            body = self.block(action.body)
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.returns, self.writable = saved

        return _framed(enter, body, leave)

    def function_call(self, name: str, args: list[Tree], node: Tree) -> Expr:
        """A call of a function, inlined here: copy in, run the body, copy out, its value."""
        if self.program.functions[name].returns_type:
            run, _ = self.composite_call(name, args, node)
            return Expr(lambda ctx, mask: (run(ctx, mask), 0)[1], None)
        return self._function_call(name, args, node)[0]

    def composite_call(self, name: str, args: list[Tree], node: Tree) -> tuple[StmtFn, str]:
        """A call of a function that returns a header or struct: the call, and where its
        value is (a header it leaves invalid unless a `return` gives it one)."""
        expr, target = self._function_call(name, args, node)

        def run(ctx: Context, mask: np.ndarray) -> None:
            expr.fn(ctx, mask)

        return run, target

    def _function_call(self, name: str, args: list[Tree], node: Tree) -> tuple[Expr, str]:
        function = self.program.functions[name]
        if len(args) != len(function.params):
            raise self.fail(node, f"function {name} takes {len(function.params)} arguments, got {len(args)}")
        if name in self.compiling:
            raise self.fail(node, f"function {name} calls itself; P4 functions cannot recurse")
        self.dp.sites += 1
        prefix = f"fn.{name}#{self.dp.sites}"
        types = function.types or ("",) * len(args)
        params = [(p, d, t, w) for (p, w, d), t in zip(function.params, types, strict=True)]
        scope, enter, leave = self.bind(prefix, params, args, node)
        target = None
        fresh: StmtFn | None = None
        if function.returns is not None:
            target = f"{prefix}.$return"
            self.widths[target] = function.returns
        elif function.returns_type:
            target = f"{prefix}.$return"
            self.declare_composite(target, function.returns_type, node)
            fresh = self.clear_composite(target)
        saved = (self.scopes, self.params, self.roles, self.returns, self.writable)
        self.scopes, self.params, self.roles = [scope], {}, {}
        self.returns, self.writable = [target], set()
        self.compiling.append(name)
        try:
            body = self.block(function.body)
        finally:
            self.compiling.pop()
            self.scopes, self.params, self.roles, self.returns, self.writable = saved

        def run(ctx: Context, mask: np.ndarray) -> Value:
            for step in enter:
                step(ctx, mask)
            if fresh is not None:
                fresh(ctx, mask)
            elif target is not None:
                ctx.put(target, 0, mask)
            returned, ctx.returned = ctx.returned, None
            body(ctx, mask)
            ctx.returned = returned
            for step in leave:
                step(ctx, mask)
            return ctx.get(target) if target is not None and fresh is None else 0

        return Expr(run, function.returns), target or ""

    def count(self, name: str, args: list[Tree], node: Tree) -> StmtFn:
        assert self.control is not None
        extern = self.control.externs.get(name)
        if extern is None or extern.kind != "Counter" or len(args) != 1:
            raise self.fail(node, f"{name}.count(index): {name!r} is not a Counter")
        index = self.expr(args[0])
        packets, octets = self.dp.counters[name]

        def run(ctx: Context, mask: np.ndarray) -> None:
            rows, where = in_array(index.fn(ctx, mask), index.width, ctx.n, packets.size, mask)
            add_at(packets, where, 1)
            add_at(octets, where, ctx.length[rows])

        return run


def _framed(enter: list[StmtFn], body: StmtFn, leave: list[StmtFn]) -> StmtFn:
    """A control's or an action's body as it runs: its parameters copied in, the body run
    with a `return` of its own (the caller's restored after), its parameters copied out."""

    def run(ctx: Context, mask: np.ndarray) -> None:
        for step in enter:
            step(ctx, mask)
        returned, ctx.returned = ctx.returned, None
        body(ctx, mask)
        ctx.returned = returned
        for step in leave:
            step(ctx, mask)

    return run
