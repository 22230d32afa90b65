"""The P4-16 subset front end: source text -> a checked `Program`, or one `file:line:col` error.

Supported: `const`, `typedef`, `header` and `struct` declarations; one `parser` (states
with `extract`, assignments, `transition` to a state or `select` with value, mask and
default keysets, `accept`/`reject`); a main `control` (actions with parameters, tables
with exact/lpm/ternary keys, `actions`, `default_action`, `size`; `Counter` and `Meter`
externs; variables; an apply block with assignments, `if`/`else`, `t.apply()` and
`t.apply().hit`/`.miss`, `setValid`/`setInvalid`/`isValid`, action calls, `exit`); a
deparser control of `emit`s; and the `main` instantiation of the PNA-like `PNA_NIC`.

Here: preprocessing, parsing and the bound on nesting; the checker that turns the tree into
a `Program` is in `declarations` and `builder`, and the program is compiled once
(`datapath`) so that every name and width is resolved before it is returned.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sys
import tempfile
from functools import cache
from pathlib import Path

import lark
from lark import Lark, Tree

from cloudtwin.errors import P4Error
from cloudtwin.p4.declarations import position_of
from cloudtwin.p4.grammar import GRAMMAR
from cloudtwin.p4.normalise import normalise, strip_annotations
from cloudtwin.p4.preprocess import Source, preprocess
from cloudtwin.p4.program import Program

__all__ = ["KEPT_PROGRAMS", "MAX_NESTING", "keep_parser_tables", "keep_programs", "parse_program"]


MAX_NESTING = 200
"""The deepest a program's syntax tree may be: a 190-term sum, or about 100 nested `if`s
or chained `else if`s (each is two levels: the `if` and its block)."""


_TABLES: list[Path] = []
"""Where the parser's tables are kept (`keep_parser_tables`), when anywhere."""


def keep_parser_tables(path: Path) -> None:
    """Keep the parser's tables in the file `path`: building them from the grammar takes
    about 0.2 s of CPU, reading them back a few ms, so a command that parses one program
    starts faster from its second run on. The file is lark's cache, checked against the
    grammar, the options and lark's version: a stale or broken one is built again and
    written over. The caller (the CLI) chooses the file; nothing else here touches files."""
    _TABLES[:] = [path]
    _lark.cache_clear()


_PROGRAMS: list[Path] = []
"""Where checked programs are kept (`keep_programs`), when anywhere."""

KEPT_PROGRAMS = 64
"""The most programs `keep_programs` keeps (the least recently written go first): each is
some 60 KB."""


def keep_programs(folder: Path) -> None:
    """Keep each program this process checks in `folder`, and read a kept one back instead
    of parsing and checking it again: the parse and the checks take about 0.06 s of CPU for
    the VXLAN gateway, reading it back 2 ms. A program is found again only by the same
    text (after `#include`s), file name and annotations, checked by the same front end
    (the files of this package, lark's and Python's versions); a stale or broken file is
    a miss, parsed again and written over. The caller (the CLI) chooses the folder, in the
    user's own cache: what is kept there is trusted as the front end's own output."""
    _PROGRAMS[:] = [folder]


def _front_end() -> str:
    """What a kept program was checked by: this package's files (name, size, change time),
    lark's version and Python's."""
    here = Path(__file__).parent
    files = sorted(
        (str(p.relative_to(here)), p.stat().st_size, p.stat().st_mtime_ns) for p in here.rglob("*.py")
    )
    return repr((files, lark.__version__, sys.version_info[:3], pickle.HIGHEST_PROTOCOL))


def _kept_file(body: str, source: str, annotations: object, origins: object) -> Path | None:
    if not _PROGRAMS:
        return None
    key = hashlib.sha256(repr((_front_end(), source, body, annotations, origins)).encode()).hexdigest()
    return _PROGRAMS[0] / f"{key[:40]}.pickle"


def _read_kept(path: Path | None) -> Program | None:
    if path is None:
        return None
    try:
        program = pickle.loads(path.read_bytes())
    except Exception:  # noqa: BLE001 - a missing, broken or stale file is a miss: parsed again
        return None
    return program if isinstance(program, Program) else None


def _write_kept(path: Path | None, program: Program) -> None:
    """Write the program beside the others (atomically: a reader sees all of it or none),
    then drop the oldest past KEPT_PROGRAMS. Nothing is kept when the folder cannot be
    written."""
    if path is None:
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(program, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        kept = sorted(path.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for old in kept[:-KEPT_PROGRAMS]:
            old.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - keeping is best effort: a program pickle refuses, a full disk
        Path(tmp).unlink(missing_ok=True)


@cache
def _lark() -> Lark:
    kept = str(_TABLES[0]) if _TABLES else False
    return Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=kept)


def _check_depth(tree: Tree, source: str) -> None:
    """P4Error at the first construct nested more than MAX_NESTING levels deep (the checker
    and the interpreter walk the tree recursively; no real program comes near the limit)."""
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            line, column = position_of(node)
            raise P4Error(
                f"{source}:{line}:{column}: nested more than {MAX_NESTING} levels deep "
                "(expressions, blocks and if/else chains); split it into steps"
            )
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


def parse_program(
    text: str, source: str = "<p4>", include_dirs: tuple[Path, ...] = (), here: Path | None = None
) -> Program:
    """Parse and check a P4 program; P4Error (`file:line:col: what`) when it is outside the subset.

    `#include`s are looked up beside the program (or in `here`), then in `include_dirs`; an
    architecture include (`<core.p4>`, `<pna.p4>`) found nowhere leaves the built-in
    declarations of the PNA-like NIC in force."""
    located = preprocess(text, source, include_dirs, here) if "#" in text else None
    body = located.text if located is not None else text
    annotations, body = strip_annotations(body)
    body = _TYPE_ARGUMENT.sub(_blank_type_argument, body)
    body = _SKIP.sub(lambda m: f"{m.group(1)}(__skip__{m.group(2)})", body)
    origins = located.origins if located is not None else []
    kept = _kept_file(body, source, annotations, origins)
    program = _read_kept(kept)
    if program is not None:
        return program
    try:
        program = _parse(body, source, annotations, origins)
    except P4Error as err:
        if located is None:
            raise
        message = _relocate(str(err), source, located)
        if located.missing and any(hint in message for hint in _UNDECLARED):
            # a name the architecture file would have declared: the likelier cause first
            message = f"{located.missing[0]}; the built-in declarations stood in, and then: {message}"
        raise P4Error(message) from err
    _write_kept(kept, program)
    return program


_UNDECLARED = ("not declared", "no parser named", "no control named", "unknown type")
"""Front-end errors that a missing `<core.p4>` or `<pna.p4>` may explain."""


def _blank_type_argument(match: re.Match[str]) -> str:
    return match.group(1) + " " * (len(match.group(0)) - len(match.group(1)) - 1) + "("


_TYPE_ARGUMENT = re.compile(r"(\.\s*(?:extract|emit))\s*<\s*[A-Za-z_]\w*\s*>\s*\((?!\s*_\s*\))")
"""`pkt.extract<H>(hdr.h)`: a type argument the header argument already gives (blanked so
that positions hold; `extract<H>(_)`, which skips an H, keeps it and is refused)."""


_SKIP = re.compile(r"(\.\s*extract)\s*<\s*([A-Za-z_]\w*)\s*>\s*\(\s*_\s*\)")
"""`pkt.extract<H>(_)`: skip an H (held as `extract(__skip__H)`; the line's later columns
move by a few characters)."""


def _relocate(message: str, source: str, located: Source) -> str:
    """`source:LINE:COL: what` with LINE mapped back to the file and line it came from."""
    head = f"{source}:"
    if not message.startswith(head):
        return message
    line_text, _, rest = message[len(head) :].partition(":")
    if not line_text.isdigit():
        return message
    where, line = located.locate(int(line_text))

    def first(match: re.Match[str]) -> str:  # "(first at L:C)" names its file and line too
        origin, at = located.locate(int(match.group(1)))
        return f"(first at {origin}:{at}:{match.group(2)})"

    return f"{where}:{line}:" + re.sub(r"\(first at (\d+):(\d+)\)", first, rest)


def _parse(
    text: str, source: str, annotations: dict[int, tuple[str, str]], origins: list[tuple[str, int]]
) -> Program:
    try:
        tree = _lark().parse(text)
    except lark.UnexpectedCharacters as err:
        raise P4Error(
            f"{source}:{err.line}:{err.column}: unexpected character {text[err.pos_in_stream or 0]!r}"
        ) from err
    except lark.UnexpectedToken as err:
        token = err.token
        what = "end of file" if token.type == "$END" else f"{token.value!r}"
        raise P4Error(
            f"{source}:{err.line}:{err.column}: unexpected {what}; this construct is outside the "
            f"supported P4-16 subset"
        ) from err
    except lark.UnexpectedEOF as err:
        raise P4Error(f"{source}: unexpected end of file") from err
    _check_depth(tree, source)
    tree = normalise(tree)
    from cloudtwin.p4.builder import Checker  # not needed when a kept program is read back

    checker = Checker(source, text)
    checker.annotations = annotations
    checker.parser_nodes = [n for n in tree.children if isinstance(n, Tree) and n.data == "parser_decl"]
    program = checker.build(tree)
    program.origins = origins
    from cloudtwin.p4.datapath import compile_program

    compile_program(program)  # resolves every name and width now, so errors surface here
    return program
