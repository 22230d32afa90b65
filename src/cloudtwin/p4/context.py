"""What compiled code runs on: one batch's run state (`Context`), compiled expressions (`Expr`)
and the closures statements and actions compile to. Control flow is a row mask: each
closure acts on the rows of its mask."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cloudtwin.p4.values import Value, as_column, fit

__all__ = [
    "ActionFn",
    "Context",
    "Expr",
    "ExprFn",
    "StmtFn",
    "as_bool",
    "copy_in",
    "copy_out",
    "literal",
    "sequence_of",
]


ExprFn = Callable[["Context", np.ndarray], Value]


StmtFn = Callable[["Context", np.ndarray], None]


ActionFn = Callable[["Context", np.ndarray, list[np.ndarray]], None]


@dataclass
class Context:
    """The state of one batch while it runs through the pipeline."""

    n: int
    data: np.ndarray
    length: np.ndarray
    values: dict[str, np.ndarray]
    valid: dict[str, np.ndarray]
    widths: dict[str, int]
    cursor: np.ndarray
    parser_error: np.ndarray
    drop: np.ndarray
    port: np.ndarray
    exited: np.ndarray
    any_exit: bool = False  # has any row run `exit` (until then no mask needs narrowing)
    error: np.ndarray | None = None  # each row's parser error code (0: none), once one is set
    returned: np.ndarray | None = None  # rows that ran `return` in the running action/function
    loop_stop: np.ndarray | None = None  # rows that ran `break` or `continue` in this iteration
    broken: np.ndarray | None = None  # rows that ran `break` in the running loop

    def stopped(self, mask: np.ndarray) -> np.ndarray:
        """`mask` without the rows that ran `exit`, or `return` in what is running."""
        if self.any_exit:
            mask = mask & ~self.exited
        if self.returned is not None:
            mask = mask & ~self.returned
        if self.loop_stop is not None:
            mask = mask & ~self.loop_stop
        return mask

    def take(self, rows: np.ndarray) -> Context:
        """A new run state holding copies of rows `rows` (repeats allowed: packet copies)."""
        return Context(
            n=int(rows.size),
            data=self.data[rows],
            length=self.length[rows],
            values={k: v[rows] for k, v in self.values.items()},
            valid={k: v[rows] for k, v in self.valid.items()},
            widths=self.widths,
            cursor=self.cursor[rows],
            parser_error=self.parser_error[rows],
            drop=self.drop[rows],
            port=self.port[rows],
            exited=self.exited[rows],
            error=None if self.error is None else self.error[rows],
        )

    def fail_rows(self, rows: np.ndarray, code: int) -> None:
        """Rows `rows` leave the parser with error `code` (the first error a row meets stays)."""
        fresh = rows & ~self.parser_error
        if not fresh.any():
            return
        if self.error is None:
            self.error = np.zeros(self.n, dtype=np.uint64)
        self.error = np.where(fresh, np.uint64(code), self.error)
        self.parser_error = self.parser_error | fresh

    def get(self, key: str) -> np.ndarray:
        column = self.values.get(key)
        if column is None:
            column = as_column(0, self.n, self.widths[key])
            self.values[key] = column
        return column

    def put(self, key: str, value: Value, mask: np.ndarray) -> None:
        width = self.widths[key]
        value = fit(value, width)
        if mask.all():
            self.values[key] = as_column(value, self.n, width)
            return
        old = self.get(key)
        if isinstance(value, int) and old.dtype != object:  # a constant: no column to build
            self.values[key] = np.where(mask, np.uint64(value), old)
            return
        new = as_column(value, self.n, width)
        self.values[key] = np.where(mask, new, old)

    def header_valid(self, header: str) -> np.ndarray:
        valid = self.valid.get(header)
        if valid is None:
            valid = np.zeros(self.n, dtype=bool)
            self.valid[header] = valid
        return valid


@dataclass(frozen=True)
class Expr:
    fn: ExprFn
    width: int | None  # None: an unsized integer literal
    is_bool: bool = False
    constant: bool = False  # known when the program is compiled (fn ignores its arguments)
    signed: bool = False  # an int<N>: its bits (held as bit<N>) read in two's complement


def literal(value: int, width: int | None = None) -> Expr:
    return Expr(lambda ctx, mask: value, width, constant=True)


def sequence_of(steps: list[StmtFn]) -> StmtFn:
    def run(ctx: Context, mask: np.ndarray) -> None:
        for step in steps:
            step(ctx, mask)

    return run


def copy_in(key: str, value: Expr) -> StmtFn:
    return lambda ctx, mask: ctx.put(key, value.fn(ctx, mask), mask)


def copy_out(key: str, target: str) -> StmtFn:
    return lambda ctx, mask: ctx.put(target, ctx.get(key), mask)


def as_bool(value: Value, ctx: Context) -> np.ndarray:
    if isinstance(value, (int, np.integer)):
        return np.full(ctx.n, bool(value))
    return value.astype(bool) if value.dtype != bool else value
