"""The C preprocessor subset P4 programs use: `#include`, `#define`, `#undef`, `#if` family.

`#include <core.p4>` / `"x.p4"` is looked up beside the including file, then in the
include directories; each output line remembers the file and line it came from so that
errors name the right place. Object-like macros are substituted whole-word; a
function-like macro is refused (P4Error naming it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cloudtwin.errors import P4Error

__all__ = ["MAX_INCLUDE_BYTES", "MAX_INCLUDE_DEPTH", "Source", "preprocess"]

MAX_INCLUDE_DEPTH = 16
"""How deep `#include`s may nest (a file including itself stops here)."""

MAX_INCLUDE_BYTES = 4 << 20
"""The most bytes all the included files together may add."""

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Source:
    """Preprocessed text and where each of its lines came from (file, line)."""

    text: str
    origins: list[tuple[str, int]] = field(default_factory=list)
    included: set[str] = field(default_factory=set)
    #: `<core.p4>` or `<pna.p4>` found nowhere (the built-in declarations stand in): where
    #: each was asked for and the folders searched, to name it when the program fails
    missing: list[str] = field(default_factory=list)

    def locate(self, line: int) -> tuple[str, int]:
        """The file and line of output line `line` (1-based)."""
        if 1 <= line <= len(self.origins):
            return self.origins[line - 1]
        return self.origins[-1] if self.origins else ("<p4>", line)


@dataclass
class _State:
    dirs: tuple[Path, ...]
    macros: dict[str, str]
    lines: list[str] = field(default_factory=list)
    origins: list[tuple[str, int]] = field(default_factory=list)
    included: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)
    budget: int = MAX_INCLUDE_BYTES
    functions: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # NAME(params) body


BUILT_IN = frozenset({"core.p4", "pna.p4"})
"""System includes the built-in PNA-like declarations stand in for when they are found nowhere."""


def _strip_comments(text: str) -> str:
    """Block comments replaced by as many newlines, so that line numbers hold and a `#`
    inside a comment is no directive."""
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


MAX_EXPANSION = 1 << 16
"""The longest a line may grow by macro expansion (characters)."""


Functions = dict[str, tuple[list[str], str]]
"""Function-like macros: NAME -> (parameter names, body)."""


def _expand(line: str, macros: dict[str, str], functions: Functions | None = None) -> str:
    """`line` with object-like macros and calls of function-like ones replaced, a few
    levels deep (a macro naming itself stops there)."""
    if not macros and not functions:
        return line
    for _ in range(8):  # macros naming macros, a few levels
        new = _WORD.sub(lambda m: macros.get(m.group(0), m.group(0)), line)
        if functions:
            new = _call_macros(new, functions)
        if len(new) > MAX_EXPANSION:
            raise ValueError(f"a macro expands the line past {MAX_EXPANSION:,} characters")
        if new == line:
            break
        line = new
    return line


def _call_macros(line: str, functions: Functions) -> str:
    """Each `NAME(a, b)` of a function-like macro replaced by its body with the arguments
    in place of the parameters; a call whose parentheses do not close on the line stays."""
    out: list[str] = []
    at = 0
    for match in _WORD.finditer(line):
        if match.start() < at or match.group(0) not in functions:
            continue
        params, body = functions[match.group(0)]
        args, end = _arguments(line, match.end())
        if args is None or len(args) != max(len(params), 1) or (not params and args != [""]):
            continue
        out.append(line[at : match.start()])
        out.append(_substitute(body, dict(zip(params, args, strict=False))))
        at = end
    out.append(line[at:])
    return "".join(out)


def _substitute(body: str, values: dict[str, str]) -> str:
    """A function-like macro's body with each parameter replaced by its argument."""
    return _WORD.sub(lambda m: values.get(m.group(0), m.group(0)), body)


def _arguments(line: str, start: int) -> tuple[list[str] | None, int]:
    """The comma-separated arguments of a call whose `(` follows `start` (blanks allowed),
    split at the top level, and where the call ends; None when there is no such call."""
    i = start
    while i < len(line) and line[i] in " \t":
        i += 1
    if i >= len(line) or line[i] != "(":
        return None, start
    depth, args, begin = 0, [], i + 1
    for j in range(i, len(line)):
        char = line[j]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append(line[begin:j].strip())
                return args, j + 1
        elif char == "," and depth == 1:
            args.append(line[begin:j].strip())
            begin = j + 1
    return None, start


def _condition(expr: str, state: _State, where: str) -> bool:
    """An `#if` expression: integers, macros, defined(X), comparisons, && || !."""
    macros = state.macros
    expr = re.sub(
        r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
        lambda m: "1" if (m.group(1) or m.group(2)) in {**macros, **state.functions} else "0",
        expr,
    )
    expr = _line(expr.split("//")[0], state, where)
    expr = _WORD.sub(lambda m: m.group(0) if m.group(0).isdigit() else "0", expr)
    if not re.fullmatch(r"[\s0-9()<>=!&|+\-*]*", expr):
        raise P4Error(f"{where}: #if {expr!r} is outside the supported preprocessor subset")
    python = expr.replace("&&", " and ").replace("||", " or ")
    python = re.sub(r"!(?!=)", " not ", python)
    try:
        return bool(eval(python, {"__builtins__": {}}, {}))  # noqa: S307 - digits and operators only
    except Exception as err:
        raise P4Error(f"{where}: #if {expr!r} cannot be evaluated") from err


def _find(name: str, quoted: bool, here: Path, state: _State, where: str) -> Path | None:
    """The file an `#include` names; None for `<core.p4>` or `<pna.p4>` found nowhere (the
    built-in PNA-like architecture stands in for them; noted in `state.missing`). Any other
    include found nowhere is an error naming it and the folders searched."""
    dirs = ((here,) if quoted else ()) + state.dirs + ((here,) if not quoted else ())
    for directory in dirs:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    shown = f'"{name}"' if quoted else f"<{name}>"
    searched = f"looked in {', '.join(dict.fromkeys(map(str, dirs)))}"
    if not quoted and name in BUILT_IN:
        state.missing.append(f"{where}: #include {shown} is not found ({searched})")
        return None
    hint = "; give the folder of p4c's p4include with -I" if not quoted else ""
    raise P4Error(f"{where}: #include {shown} is not found ({searched}){hint}")


def _run(text: str, source: str, here: Path, state: _State, depth: int) -> None:
    stack: list[tuple[bool, bool]] = []  # (this branch taken, some branch taken)
    for number, line in enumerate(_strip_comments(text).splitlines(), start=1):
        where = f"{source}:{number}"
        active = all(taken for taken, _ in stack)
        match = _DIRECTIVE.match(line)
        if match is None:
            state.lines.append(_line(line, state, where) if active else "")
            state.origins.append((source, number))
            continue
        state.lines.append("")
        state.origins.append((source, number))
        word, rest = match.groups()
        rest = rest.split("//")[0].strip()
        if word in ("ifdef", "ifndef"):
            taken = (rest in state.macros or rest in state.functions) == (word == "ifdef")
            stack.append((taken, taken))
        elif word == "if":
            taken = active and _condition(rest, state, where)
            stack.append((taken, taken))
        elif word in ("elif", "else", "endif"):
            if not stack:
                raise P4Error(f"{where}: #{word} without #if")
            _, done = stack.pop()
            if word == "endif":
                continue
            taken = not done and (word == "else" or _condition(rest, state, where))
            stack.append((taken, done or taken))
        elif not active:
            continue
        elif word == "define":
            _define(rest, state, where)
        elif word == "undef":
            state.macros.pop(rest, None)
            state.functions.pop(rest, None)
        elif word == "include":
            _include(rest, here, state, depth, where)
        else:
            raise P4Error(f"{where}: #{word} is outside the supported preprocessor subset")
    if stack:
        raise P4Error(f"{source}: #if without #endif")


def _define(rest: str, state: _State, where: str) -> None:
    match = re.match(r"([A-Za-z_]\w*)(\()?\s*(.*)$", rest)
    if match is None:
        raise P4Error(f"{where}: #define needs a name")
    name, paren, body = match.groups()
    state.macros.pop(name, None)
    state.functions.pop(name, None)
    if paren:  # NAME(a, b) body: the parameters' names, then the body
        params_text, closed, body = body.partition(")")
        params = [p.strip() for p in params_text.split(",")] if params_text.strip() else []
        named = all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in params)
        if not closed or not named or len(set(params)) != len(params):
            raise P4Error(f"{where}: #define {name}(...): parameters are distinct names, then `)`")
        state.functions[name] = (params, body.strip())
        return
    state.macros[name] = _line(body, state, where)


def _line(text: str, state: _State, where: str) -> str:
    """`text` with the macros expanded; P4Error naming the line when it grows too long."""
    try:
        return _expand(text, state.macros, state.functions)
    except ValueError as err:
        raise P4Error(f"{where}: {err}") from err


def _include(rest: str, here: Path, state: _State, depth: int, where: str) -> None:
    match = re.fullmatch(r'"([^"]+)"|<([^>]+)>', rest)
    if match is None:
        raise P4Error(f'{where}: #include takes "file" or <file>')
    if depth >= MAX_INCLUDE_DEPTH:
        raise P4Error(f"{where}: #include nested more than {MAX_INCLUDE_DEPTH} deep")
    path = _find(match.group(1) or match.group(2), match.group(1) is not None, here, state, where)
    if path is None:
        return
    try:
        with path.open("rb") as handle:
            raw = handle.read(state.budget + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise P4Error(f"{where}: #include {path}: {err}") from err
    state.budget -= len(raw)
    if state.budget < 0:
        raise P4Error(f"{where}: the included files add more than {MAX_INCLUDE_BYTES:,} bytes")
    state.included.add(path.name)
    _run(text, str(path), path.parent, state, depth + 1)


def preprocess(
    text: str, source: str = "<p4>", include_dirs: tuple[Path, ...] = (), here: Path | None = None
) -> Source:
    """`text` with its directives carried out; P4Error `file:line: what` on one outside the subset."""
    state = _State(tuple(include_dirs), {})
    _run(text, source, here if here is not None else Path(source).parent, state, 0)
    return Source("\n".join(state.lines) + "\n", state.origins, state.included, state.missing)
