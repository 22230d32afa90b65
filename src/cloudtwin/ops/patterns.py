"""Regular expressions a user supplies (log formats, masks), run by RE2 in linear time.

Python's ``re`` backtracks: a pattern such as ``(a+)+b`` over a line of a's takes time
exponential in the line, holding the interpreter all along. RE2 runs every pattern it
accepts in time linear in the text; what it cannot run that way (back-references,
look-around, possessive quantifiers) and patterns too large for its memory budget are
refused when compiled, with one line naming the field.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

import re2

from cloudtwin.errors import LogFormatError

__all__ = ["LinearPattern", "MAX_PATTERN_BYTES", "compile_linear"]

#: A compiled RE2 pattern; its API is that of ``re.Pattern`` (match, split, sub, findall,
#: groupindex, groups, pattern), without flags (write ``(?m)`` or ``(?i)`` inline).
LinearPattern: TypeAlias = Any
#: The memory RE2 may use for one compiled pattern; a larger one (``a{1000}{1000}``) is
#: refused instead of compiled.
MAX_PATTERN_BYTES = 64 * 2**20


def compile_linear(pattern: str, field: str, shown: str | None = None) -> LinearPattern:
    """``pattern`` compiled by RE2, or LogFormatError naming ``field`` and the reason.

    ``shown`` is the text the user wrote, when ``pattern`` was built from it.

    >>> compile_linear(r"(a+)+b", "mask").match("a" * 50_000) is None
    True
    >>> compile_linear(r"(?<=x)y", "mask")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    cloudtwin.errors.LogFormatError: mask '(?<=x)y' cannot run in time linear in the line ...
    """
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        text = pattern if shown is None else shown
        raise LogFormatError(f"{field} {text!r} {_why(pattern, err)}", field=field) from None


def _why(pattern: str, err: Exception) -> str:
    """Why RE2 refused a pattern: not a pattern at all, or not one it runs in linear time."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as bad:
        return f"is not a valid pattern: {bad}"
    reason = err.args[0] if err.args else "refused"
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    return (
        f"cannot run in time linear in the line ({reason}); back-references and look-around "
        "are not supported"
    )
