"""The extern functions each architecture offers a program, by architecture and name.

An extern compiles like a statement: `(compiler, argument trees, call node) -> StmtFn`.
The architecture modules register theirs here when imported; the core looks them up
by the program's architecture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["EXTERNS", "arch_extern", "register"]

ExternCompiler = Callable[[Any, list[Any], Any], Callable[[Any, Any], None]]

EXTERNS: dict[str, dict[str, ExternCompiler]] = {}


def register(architecture: str, name: str) -> Callable[[ExternCompiler], ExternCompiler]:
    """Decorator: `fn` compiles calls of extern `name` in programs of `architecture`."""

    def add(fn: ExternCompiler) -> ExternCompiler:
        EXTERNS.setdefault(architecture, {})[name] = fn
        return fn

    return add


def arch_extern(architecture: str, name: str) -> ExternCompiler | None:
    """The compiler of extern `name` for `architecture`, if it has one."""
    if architecture == "v1model" and "v1model" not in EXTERNS:
        import cloudtwin.p4.arch.v1model  # noqa: F401 - registers its externs
    return EXTERNS.get(architecture, {}).get(name)
