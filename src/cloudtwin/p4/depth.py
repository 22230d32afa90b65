"""How many bytes of a packet a program's parser can read: the head `nic run` batches.

A parser whose states form no loop visits each state at most once, so it reads at most
the bytes its extracts and lookaheads take along the longest path of states. `nic run`
then holds only that head of each packet in its batches and copies the rest untouched
from the capture to the output. Anything that the count cannot bound from the program's
text (a loop between states, `advance`, an extract of a variable size or a varbit header,
a sub-parser, a lookahead of anything but `bit<N>`, a packet recirculated or copied)
gives None: the whole packet is batched.
"""

from __future__ import annotations

import re

from lark import Token, Tree

from cloudtwin.p4.program import ParserBlock, Program

__all__ = ["parse_depth"]

_COPIES = re.compile(r"(recirc|mirror|clone|resubmit)\w*")
"""A call that sends a packet through the pipeline again or copies it: the packet that
comes back is the deparsed one, whole, so such a program is batched whole."""


def parse_depth(program: Program) -> int | None:
    """The most bytes the parser reads of any packet, or None when it cannot be bounded.

    >>> from cloudtwin.p4.frontend import parse_program
    >>> parse_depth(parse_program(PARSE_TWO, "two.p4"))
    18
    """
    parsers = [b for b in program.blocks.values() if isinstance(b, ParserBlock)]
    varbit = any(getattr(h, "varbit", None) is not None for h in program.headers.values())
    if len(parsers) > 1 or program.architecture != "pna" or varbit or copies_packets(program):
        return None
    parser = program.parser
    cost: dict[str, int] = {}
    targets: dict[str, list[str]] = {}
    for name, state in parser.states.items():
        taken = _state_bytes(program, parser, state)
        following = _targets(state.children[-1])
        if taken is None or following is None:
            return None
        cost[name], targets[name] = taken, following
    return _longest(cost, targets)


def copies_packets(program: Program) -> bool:
    """Whether any block, action or function of the program calls an extern that sends a
    packet round again or copies it (declarations, as pna.p4's, do not count)."""
    trees: list[Tree] = [*(f.body for f in program.functions.values())]
    trees += [a.body for a in program.global_actions.values()]
    for block in program.blocks.values():
        if isinstance(block, ParserBlock):
            trees += list(block.states.values())
        else:
            trees += [a.body for a in block.actions.values()] + ([block.apply] if block.apply else [])
    for tree in trees:
        for node in tree.iter_subtrees():
            if node.data == "call" and isinstance(node.children[0], Tree):
                names = [str(t) for t in node.children[0].children if isinstance(t, Token)]
                if names and _COPIES.fullmatch(names[-1]):
                    return True
    return False


def _longest(cost: dict[str, int], targets: dict[str, list[str]]) -> int | None:
    """The largest sum of `cost` along a path of states from `start`; None on a loop."""
    done: dict[str, int] = {}
    on_path: set[str] = set()

    def visit(state: str) -> int | None:
        if state not in cost:  # accept, reject (or a state the compiler refuses)
            return 0
        if state in done:
            return done[state]
        if state in on_path:
            return None
        on_path.add(state)
        best = 0
        for target in targets[state]:
            after = visit(target)
            if after is None:
                return None
            best = max(best, after)
        on_path.discard(state)
        done[state] = cost[state] + best
        return done[state]

    return visit("start")


def _targets(transition: Tree) -> list[str] | None:
    if transition.data == "goto":
        return [str(transition.children[0])]
    if transition.data == "select":
        return [str(case.children[-1]) for case in transition.children[1:]]
    return None


def _state_bytes(program: Program, parser: ParserBlock, state: Tree) -> int | None:
    """The bytes one visit of `state` reads at most: its extracts and lookaheads."""
    total = 0
    for node in state.iter_subtrees():
        if node.data == "lookahead":
            type_ = node.children[-1]
            if not isinstance(type_, Tree) or type_.data != "bit_type":
                return None
            total += -(-_number(type_) // 8) if _number(type_) > 0 else 0
            continue
        if node.data != "call" or not isinstance(node.children[0], Tree):
            continue
        names = [str(t) for t in node.children[0].children if isinstance(t, Token)]
        method = names[-1] if names else ""
        if method in ("advance", "apply"):
            return None
        if method == "extract":
            args = node.children[1:]
            if len(args) != 1:
                return None
            total += _header_bytes(program, parser, args[0])
    return total


def _number(type_: Tree) -> int:
    token = next((t for t in type_.scan_values(lambda v: isinstance(v, Token))), None)
    try:
        return int(str(token), 0)
    except (TypeError, ValueError):
        return 1 << 20  # not a literal: more than any packet


def _header_bytes(program: Program, parser: ParserBlock, arg: Tree | Token) -> int:
    """The size of the header `arg` names; the largest header of the program when the name
    is not a plain instance (a stack element, a union member, a local)."""
    largest = max((h.size_bytes for h in program.headers.values()), default=0)
    if not isinstance(arg, Tree) or arg.data != "ref" or not isinstance(arg.children[0], Tree):
        return largest
    names = [str(t) for t in arg.children[0].children if isinstance(t, Token)]
    if not names:
        return largest
    key = ".".join([parser.roles.get(names[0], names[0]), *names[1:]])
    htype = program.header_instances.get(key)
    if htype is not None:
        return htype.size_bytes
    stack = program.stacks.get(key.removesuffix(".next").removesuffix(".last"))
    return stack[0].size_bytes if stack is not None else largest


PARSE_TWO = """
#include <core.p4>
#include <pna.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<32> tag; }
struct h_t { eth_t eth; tag_t tag; }
struct m_t { }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, in pna_main_parser_input_metadata_t istd) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x8100: tag; default: accept; } }
    state tag { pkt.extract(hdr.tag); transition accept; }
}
control C(inout h_t hdr, inout m_t meta, in pna_main_input_metadata_t istd,
          inout pna_main_output_metadata_t ostd) { apply { } }
control D(packet_out pkt, in h_t hdr, in m_t meta, in pna_main_output_metadata_t ostd) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); }
}
PNA_NIC(P(), C(), D()) main;
"""
"""A two-state parser (Ethernet, then a 4-byte tag): it reads at most 18 bytes."""
