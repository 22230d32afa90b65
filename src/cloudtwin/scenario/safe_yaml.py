"""Reading untrusted YAML safely: bounded size after aliases, bounded depth, no duplicate keys.

PyYAML's safe loader builds shared objects for aliases, but anything that walks the
result (copying, validating) expands them: a 1 KB "billion laughs" document becomes
gigabytes. Here the node graph is measured before any Python object is built, and a
document that would expand beyond MAX_NODES nodes, or nest deeper than MAX_DEPTH, is
refused with one line. A key given twice in one mapping is refused too (YAML says keys
are unique; PyYAML silently keeps the last one).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.units import parse_int, parse_number

__all__ = ["MAX_DEPTH", "MAX_NODES", "load_yaml"]

#: A scenario expands to at most this many YAML nodes (aliases counted each time used).
MAX_NODES = 200_000
#: Mappings and lists nest at most this deep.
MAX_DEPTH = 64
#: A scenario's text is at most this many characters (real ones are a few KB).
MAX_TEXT_CHARS = 1 << 20
_BRACKETS = re.compile(r"""[\[\]{}"']""")


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a mapping that gives one key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (first on line {first})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)

    def construct_decimal_int(self, node: yaml.ScalarNode) -> int | str:
        """A plain decimal integer (`3_600_000` grouped as YAML writes it; `010` is ten).
        YAML 1.1 would also read `0x10`, `0b11` and `1:30` (90) as numbers, a silent surprise
        in a scenario: they stay text, which a number field refuses naming its key (and an
        entries file, which takes `0xff` masks, reads itself)."""
        text = str(self.construct_scalar(node))
        try:
            return parse_int(text)
        except ValueError:
            return text

    def construct_decimal_float(self, node: yaml.ScalarNode) -> float | str:
        """A finite decimal number; `.inf`, `.nan` and `1.0e+400` stay text (refused by a
        number field, naming its key)."""
        text = str(self.construct_scalar(node))
        try:
            return parse_number(text)
        except ValueError:
            return text


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_decimal_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_decimal_float)


def load_yaml(
    text: str,
    source: str,
    what: str = "scenario",
    max_chars: int = MAX_TEXT_CHARS,
    max_nodes: int = MAX_NODES,
) -> tuple[Any, yaml.Node | None]:
    """The document in ``text`` and its node tree; ScenarioError (one line) if it is
    malformed, too deep, too large once aliases are expanded, or repeats a key.

    `what` names the kind of document in the messages; `max_chars` and `max_nodes` bound
    its text and its size once aliases are expanded."""
    if len(text) > max_chars:
        raise ScenarioError(
            f"{source}: {len(text):,} characters is more than the {max_chars:,} a "
            f"{what} may have"
        )
    _check_flow_depth(text, source)
    try:
        node = yaml.compose(text, Loader=_UniqueKeyLoader)
    except RecursionError as err:
        raise ScenarioError(f"{source}: nested more than {MAX_DEPTH} levels deep") from err
    except yaml.YAMLError as err:
        raise ScenarioError(_yaml_problem(err, source)) from err
    if node is None:
        return None, None
    _check_size(node, source, max_nodes)
    loader = _UniqueKeyLoader("")
    try:
        data = loader.construct_document(node)
    except yaml.YAMLError as err:
        raise ScenarioError(_yaml_problem(err, source)) from err
    finally:
        loader.dispose()
    return data, node


def _check_flow_depth(text: str, source: str) -> None:
    """Refuse `[[[[...` nested beyond MAX_DEPTH before PyYAML's scanner, which takes time
    quadratic in the nesting, sees it (brackets inside quotes are skipped)."""
    depth = 0
    quote = ""
    for match in _BRACKETS.finditer(text):
        char = match.group(0)
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            # a quote opens a quoted scalar only where one may start (not in "it's")
            before = text[match.start() - 1] if match.start() else "\n"
            if before in " \t\n:[{,-?":
                quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise ScenarioError(f"{source}:{line}: nested more than {MAX_DEPTH} levels deep")
        else:
            depth = max(depth - 1, 0)


def _yaml_problem(err: yaml.YAMLError, source: str) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f": line {mark.line + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"{source}{where}: not valid YAML: {problem}"


def _check_size(root: yaml.Node, source: str, max_nodes: int = MAX_NODES) -> None:
    """Refuse a node graph deeper than MAX_DEPTH or larger than `max_nodes` once expanded.

    Sizes are memoised per node, so an alias bomb is measured in time linear in its
    text, not in its expansion.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    # iterative post-order walk (no recursion on hostile depth)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    active: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if not done:
            if key in active:  # a recursive alias: infinite once expanded
                raise ScenarioError(f"{source}: an alias refers to a node that contains it")
            active.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        active.discard(key)
        sizes[key] = min(1 + sum(sizes[id(c)] for c in children), max_nodes + 1)
        depths[key] = 1 + max((depths[id(c)] for c in children), default=0)
        if depths[key] > MAX_DEPTH:
            line = node.start_mark.line + 1
            raise ScenarioError(f"{source}:{line}: nested more than {MAX_DEPTH} levels deep")
        if sizes[key] > max_nodes:
            raise ScenarioError(
                f"{source}: expands to more than {max_nodes:,} values once its aliases are "
                "resolved; a scenario is never that large"
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
