"""Source and tree clean-up before checking: annotations taken out, postfix chains folded.

The grammar reads member access, indexing and calls as general postfix operations; the
checker and the interpreter work on dotted `path`s, `call`/`call_member` and `lvalue`s, so
`normalise` folds the chains that are plain names back into those shapes. Annotations
(`@name("k")`, `@pure` ...) are blanked out of the text (line and column positions kept)
and returned by position, for the few that carry meaning.
"""

from __future__ import annotations

import re

from lark import Token, Tree

__all__ = ["IGNORED_ANNOTATIONS", "normalise", "strip_annotations"]

IGNORED_ANNOTATIONS = frozenset(
    {
        "name",
        "noWarn",
        "hidden",
        "pure",
        "noSideEffects",
        "metadata",
        "alias",
        "deprecated",
        "pipeline",
        "deparser",
        "optional",
        "defaultonly",
        "tableonly",
        "brief",
        "description",
        "globalname",
        "id",
        "unused",
        "atomic",
        "noWarnUnused",
        "inline",
        "suppress_warnings",
        "in_hdr_dpdk",
        "match",
        "p4runtime_translation",
        "controller_header",
        "packet_in",
    }
)
"""Annotations that do not change what a program does in this interpreter (bmv2 ignores
them too); any other is kept with its position for the checker to honour or refuse."""

_START = re.compile(r'@\s*([A-Za-z_]\w*)|"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def _annotation_end(text: str, at: int) -> int:
    """Where an annotation's `(...)` body ends (balanced, strings skipped), from `at` just
    after its name; `at` itself when no body follows on the same line."""
    i = at
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "(":
        return at
    depth = 0
    while i < len(text):
        char = text[i]
        if char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def strip_annotations(text: str) -> tuple[dict[int, tuple[str, str]], str]:
    """The annotations of `text` by offset (name, body) and the text with them blanked."""
    found: dict[int, tuple[str, str]] = {}
    pieces: list[str] = []
    last = 0
    for match in _START.finditer(text):
        if match.group(1) is None:
            continue
        if match.start() < last:
            continue
        end = _annotation_end(text, match.end())
        body = text[match.end() : end].strip()
        found[match.start()] = (match.group(1), body[1:-1] if body.startswith("(") else body)
        pieces.append(text[last : match.start()])
        pieces.append(re.sub(r"[^\n]", " ", text[match.start() : end]))
        last = end
    pieces.append(text[last:])
    return found, "".join(pieces)


_OPERATORS = {
    "+=": "add", "-=": "sub", "*=": "mul", "&=": "band", "|=": "bor", "^=": "bxor",
    "<<=": "shl", ">>=": "shr", "|+|=": "sat_add", "|-|=": "sat_sub",
}


def _path(node: Tree) -> Tree | None:
    """The `path` a `ref` chain names, or None."""
    return node.children[0] if isinstance(node, Tree) and node.data == "ref" else None


_LITERAL_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "shl": lambda a, b: a << b if 0 <= b <= 4096 else None,
}


def _literal(node: Tree) -> int | None:
    """The value of an expression of integer literals and + - * <<, or None."""
    if node.data == "number":
        text = re.sub(r"^[0-9]+[ws]", "", str(node.children[0])).replace("_", "")
        return int(text, 0)
    op = _LITERAL_OPS.get(node.data)
    if op is None or len(node.children) != 2:
        return None
    left, right = (_literal(c) for c in node.children)
    return None if left is None or right is None else op(left, right)


def _fold(node: Tree) -> Tree:
    kind, children, meta = node.data, node.children, node.meta
    if kind == "name":
        return Tree("ref", [Tree("path", [children[0]], meta)], meta)
    if kind == "bit1":  # `bit` is bit<1>
        return Tree("bits", [Token("NUMBER", "1")], meta)
    if kind == "bit_expr":  # bit<(8 * 8)>: a width written as a literal expression
        width = _literal(children[0])
        return node if width is None else Tree("bits", [Token("NUMBER", str(width))], meta)
    if kind == "member":
        base, name = children
        path = _path(base)
        if path is not None:
            return Tree("ref", [Tree("path", [*path.children, name], meta)], meta)
        if base.data == "call_expr" and base.children[0].data == "call":
            return Tree("call_expr", [Tree("call_member", [*base.children[0].children, name], meta)], meta)
        return node
    path = _path(children[0]) if kind == "index" else None
    if path is not None and children[1].data == "number":
        digits = re.sub(r"^[0-9]+[ws]", "", str(children[1].children[0])).replace("_", "")
        last = Token("NAME", f"{path.children[-1]}[{int(digits, 0)}]")
        return Tree("ref", [Tree("path", [*path.children[:-1], last], meta)], meta)
    if kind == "call_raw":
        callee, *args = children
        path = _path(callee)
        if path is not None:
            return Tree("call_expr", [Tree("call", [path, *args], meta)], meta)
        return node
    if kind == "call_stmt":
        inner = children[0]
        if isinstance(inner, Tree) and inner.data == "call_expr":
            return Tree("call_stmt", [inner.children[0]], meta)
        return node
    if kind == "opassign":  # `a op= b` is `a = a op b`, `a` evaluated once
        target, operator, value = children
        if target.data == "member" and target.children[0].data == "index":
            # s[e].f op= v: the run-time index e (maybe a call with side effects) is
            # evaluated once; the datapath keeps it for the read and the write
            return Tree("opassign_element", [target, Token("OP", _OPERATORS[str(operator)]), value], meta)
        binary = Tree(_OPERATORS[str(operator)], [target, value], meta)
        return _fold(Tree("assign", [target, binary], meta))
    if kind == "assign":
        target, value = children
        path = _path(target)
        if path is not None:
            return Tree("assign", [Tree("lvalue", [path, None], meta), value], meta)
        if target.data == "slice_expr" and _path(target.children[0]) is not None:
            bits = Tree("slice", target.children[1:], target.meta)
            return Tree("assign", [Tree("lvalue", [_path(target.children[0]), bits], meta), value], meta)
        return node
    if kind == "cast" and isinstance(children[0], Tree) and children[0].data == "bit_type":
        return Tree("cast", [children[0].children[0], children[1]], meta)
    return node


def normalise(tree: Tree) -> Tree:
    """`tree` with plain-name postfix chains folded into paths, calls and lvalues."""
    stack: list[tuple[Tree, bool]] = [(tree, False)]
    done: dict[int, Tree] = {}
    while stack:
        node, visited = stack.pop()
        if not visited:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children if isinstance(c, Tree))
            continue
        children = [done.pop(id(c)) if isinstance(c, Tree) else c for c in node.children]
        done[id(node)] = _fold(Tree(node.data, children, node.meta))
    return done[id(tree)]
