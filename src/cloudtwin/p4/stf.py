"""p4c's Simple Test Framework scripts: table entries, packets in, packets expected out.

An STF script is one command a line (`#` starts a comment):

- `add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE, ...)`: an entry; a value is a
  number (`0x..`, decimal, `0b..`), `V&&&M` (ternary) or `V/LEN` (lpm);
- `setdefault TABLE ACTION(...)`, `remove TABLE KEY:VALUE ...`;
- `packet PORT HEX`, `expect PORT HEX` (`*` a wildcard nibble, a trailing `$`: the
  packet ends there), `wait`;
- `check_counter`, `register_read`/`register_write`/`register_reset`, `mc_mgrp_create`,
  `mc_node_create`, `mc_node_associate`, `mirroring_add`, `meter_set_rates`,
  `meter_array_set_rates`, `meter_get_rates`.

`parse_stf` turns a script into commands (NicError `file:line: reason` on a malformed
line); running them against a program is `stf_run`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cloudtwin.errors import NicError, P4Error
from cloudtwin.p4.batch import PacketBatch
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.frontend import parse_program
from cloudtwin.p4.program import MatchKind, TableKey
from cloudtwin.p4.tables import TableEntry, TableState

__all__ = [
    "MAX_STF_PACKET_BYTES",
    "Command",
    "Expect",
    "KeyMatch",
    "StfResult",
    "compare",
    "parse_stf",
    "run_stf",
]

MAX_STF_PACKET_BYTES = 65_535
"""The longest packet (in bytes) a `packet` or `expect` line may give."""

KeyMatch = int | tuple[str, int, int]
"""A key value: an int (exact), ("ternary", value, mask), ("lpm", value, prefix length) or
("range", low, high)."""

_NUMBER = r"(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*)"
_NAME = r"[A-Za-z_][A-Za-z_0-9.\[\]$]*"
_WILD = r"(?:0[xX][0-9a-fA-F_*]+|0[bB][01_*]+)"
_KEY = re.compile(rf"^({_NAME}):({_WILD}|{_NUMBER})(?:(&&&|/|->)({_NUMBER}))?$")
_ACTION = re.compile(rf"^({_NAME})\((.*)\)$")
_PARAM = re.compile(rf"^\s*({_NAME})\s*:\s*({_NUMBER})\s*$")
_COUNTER = re.compile(rf"^({_NAME})\(({_NUMBER})\)\s*(?:(packets|bytes)\s*)?==\s*({_NUMBER})$")
_RATE = re.compile(r"^([0-9.eE+-]+):([0-9]+)$")


@dataclass(frozen=True)
class Expect:
    """An expected packet: its bytes, which nibbles matter, and whether it must end there."""

    port: int
    nibbles: str  # upper-case hex digits and `*`
    exact_length: bool

    def matches(self, packet: bytes) -> bool:
        """Whether `packet` is this expectation (bmv2's STF: a longer packet matches unless `$`)."""
        got = packet.hex().upper()
        if len(got) < len(self.nibbles) or (self.exact_length and len(got) != len(self.nibbles)):
            return False
        return all(want in ("*", have) for want, have in zip(self.nibbles, got, strict=False))

    def text(self) -> str:
        return self.nibbles + ("$" if self.exact_length else "")


@dataclass(frozen=True)
class Command:
    """One STF command at `line`; `kind` is its keyword, the other fields what it names."""

    kind: str
    line: int
    column: int = 1
    name: str = ""  # a table, counter, register or meter
    keys: tuple[tuple[str, KeyMatch], ...] = ()
    action: str = ""
    params: tuple[tuple[str, int], ...] = ()
    priority: int | None = None
    port: int = 0
    data: bytes = b""
    expect: Expect | None = None
    numbers: tuple[int, ...] = ()
    rates: tuple[tuple[float, int], ...] = ()
    counter_kind: str = ""


def _number(text: str, what: str) -> int:
    try:
        return int(text.replace("_", ""), 0) if not re.fullmatch(r"0[0-9_]+", text) else int(text, 10)
    except ValueError as err:
        raise ValueError(f"{what}: {text!r} is not a number") from err


def _port(text: str) -> int:
    value = _number(text, "port")
    if not 0 <= value < 1 << 32:
        raise ValueError(f"port: {value} is outside 0..{(1 << 32) - 1}")
    return value


def _hex(words: list[str], wildcards: bool) -> tuple[str, bool]:
    body = "".join(words)
    exact = body.endswith("$")
    if exact:
        body = body[:-1]
        if not wildcards:
            raise ValueError("`$` ends only an expected packet")
    allowed = "0123456789abcdefABCDEF" + ("*" if wildcards else "")
    bad = next((c for c in body if c not in allowed), None)
    if bad is not None:
        raise ValueError(f"packet data: {bad!r} is not a hex digit{' or *' if wildcards else ''}")
    if len(body) % 2:
        raise ValueError(f"packet data: {len(body)} hex digits is not a whole number of bytes")
    if len(body) // 2 > MAX_STF_PACKET_BYTES:
        raise ValueError(f"packet data: more than {MAX_STF_PACKET_BYTES:,} bytes")
    return body.upper(), exact


def _key(word: str) -> tuple[str, KeyMatch]:
    match = _KEY.match(word)
    if match is None:
        forms = "FIELD:VALUE, FIELD:VALUE&&&MASK, FIELD:VALUE/LENGTH or FIELD:LOW->HIGH"
        raise ValueError(f"key {word!r} is not {forms}")
    field, value, sep, extra = match.groups()
    if "*" in value:
        if sep:
            raise ValueError(f"key {word!r}: a value with `*` digits takes no mask or length")
        return field, _wildcard(value)
    number = _number(value, field)
    if sep == "&&&":
        return field, ("ternary", number, _number(extra, field))
    if sep == "/":
        return field, ("lpm", number, _number(extra, field))
    if sep == "->":  # p4c's STF range: low->high
        return field, ("range", number, _number(extra, field))
    return field, number


def _wildcard(text: str) -> KeyMatch:
    """`0x**01` / `0b1*0`: a ternary match whose `*` digits are masked out."""
    bits = 4 if text[1] in "xX" else 1
    value = mask = 0
    for digit in text[2:].replace("_", ""):
        value, mask = value << bits, mask << bits
        if digit != "*":
            value |= int(digit, 16)
            mask |= (1 << bits) - 1
    return ("ternary", value, mask)


def _action(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    match = _ACTION.match(text)
    if match is None:
        raise ValueError(f"action {text!r} is not ACTION(PARAM:VALUE, ...)")
    name, inner = match.groups()
    params = []
    for part in inner.split(",") if inner.strip() else []:
        param = _PARAM.match(part)
        if param is None:
            raise ValueError(f"action {name}: parameter {part.strip()!r} is not NAME:VALUE")
        params.append((param.group(1), _number(param.group(2), param.group(1))))
    return name, tuple(params)


def _split_action(rest: str) -> tuple[list[str], str]:
    """The words before the action call, and the call (`name(...)`, spaces allowed inside)."""
    paren = rest.find("(")
    if paren < 0 or not rest.rstrip().endswith(")"):
        raise ValueError("no ACTION(...) at the end of the line")
    head = rest[:paren].split()
    if not head:
        raise ValueError("no action name before `(`")
    return head[:-1], head[-1] + rest[paren:].strip()


def _add(line: int, rest: str) -> Command:
    words, call = _split_action(rest)
    if not words:
        raise ValueError("add: no table name")
    table, *keys = words
    priority = None
    if keys and re.fullmatch(_NUMBER, keys[0]):
        priority = _number(keys.pop(0), "priority")
    action, params = _action(call)
    parsed = tuple(_key(k) for k in keys)
    return Command("add", line, name=table, keys=parsed, action=action, params=params, priority=priority)


def _numbers(words: list[str], count: tuple[int, int], kind: str) -> tuple[int, ...]:
    low, high = count
    if not low <= len(words) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise ValueError(f"{kind} takes {want} numbers, got {len(words)}")
    return tuple(_number(w, kind) for w in words)


def _rates(words: list[str], kind: str) -> tuple[tuple[float, int], ...]:
    out = []
    for word in words:
        match = _RATE.match(word)
        if match is None:
            raise ValueError(f"{kind}: rate {word!r} is not RATE:BURST")
        try:
            out.append((float(match.group(1)), int(match.group(2))))
        except ValueError as err:
            raise ValueError(f"{kind}: rate {word!r} is not RATE:BURST") from err
    return tuple(out)


def _command(line: int, text: str) -> Command:
    kind, _, rest = text.partition(" ")
    rest = rest.strip()
    words = rest.split()
    if kind in ("packet", "expect"):
        if not words:
            raise ValueError(f"{kind}: no port")
        port = _port(words[0])
        nibbles, exact = _hex(words[1:], kind == "expect")
        if kind == "packet":
            return Command(kind, line, port=port, data=bytes.fromhex(nibbles))
        return Command(kind, line, port=port, expect=Expect(port, nibbles, exact))
    if kind == "add":
        return _add(line, rest)
    if kind == "setdefault":
        head, call = _split_action(rest)
        if len(head) != 1:
            raise ValueError("setdefault takes TABLE ACTION(...)")
        action, params = _action(call)
        return Command(kind, line, name=head[0], action=action, params=params)
    if kind == "remove":
        if not words:
            raise ValueError("remove: no table name")
        return Command(kind, line, name=words[0], keys=tuple(_key(k) for k in words[1:]))
    if kind == "wait":
        if words:
            raise ValueError("wait takes nothing")
        return Command(kind, line)
    if kind == "check_counter":
        match = _COUNTER.match(rest)
        if match is None:
            raise ValueError("check_counter takes COUNTER(INDEX) [packets|bytes] == VALUE")
        name, index, what, value = match.groups()
        numbers = (_number(index, "index"), _number(value, "value"))
        return Command(kind, line, name=name, numbers=numbers, counter_kind=what or "packets")
    return _other(kind, line, words)


_SHAPES = {  # command -> (takes a name first, fewest numbers, most numbers)
    "register_read": (True, 1, 1),
    "register_write": (True, 2, 2),
    "register_reset": (True, 0, 0),
    "mc_mgrp_create": (False, 1, 1),
    "mc_node_create": (False, 2, 1 << 10),
    "mc_node_associate": (False, 2, 2),
    "mirroring_add": (False, 2, 2),
    "meter_get_rates": (True, 1, 1),
}


def _other(kind: str, line: int, words: list[str]) -> Command:
    if kind in ("meter_set_rates", "meter_array_set_rates"):
        with_index = kind == "meter_set_rates"
        if len(words) < 2 + with_index:
            raise ValueError(f"{kind} takes METER {'INDEX ' if with_index else ''}RATE:BURST ...")
        index = (_number(words[1], "index"),) if with_index else ()
        rates = _rates(words[1 + with_index :], kind)
        return Command(kind, line, name=words[0], numbers=index, rates=rates)
    shape = _SHAPES.get(kind)
    if shape is None:
        raise ValueError(f"unknown command {kind!r}")
    named, low, high = shape
    name = ""
    if named:
        if not words:
            raise ValueError(f"{kind}: no name")
        name, words = words[0], words[1:]
    return Command(kind, line, name=name, numbers=_numbers(words, (low, high), kind))


def parse_stf(text: str, source: str = "<stf>") -> list[Command]:
    """An STF script's commands; NicError `source:line: reason` at the first malformed line."""
    commands = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            commands.append(_command(number, line))
        except ValueError as err:
            raise NicError(f"{source}:{number}: {err}") from err
    return commands


# running --------------------------------------------------------------------------------
@dataclass(frozen=True)
class StfResult:
    """How an STF test went: `status` pass, fail or unsupported, and the counts behind it."""

    status: str
    expected: int = 0
    matched: int = 0
    unexpected: int = 0
    reason: str | None = None
    #: the packets that came out, per port in order (what `compare` judged)
    sent: dict[int, list[bytes]] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "expected": self.expected,
            "matched": self.matched,
            "unexpected": self.unexpected,
            "reason": self.reason,
        }


class Unsupported(NicError):
    """An STF command or program outside what the runner supports (`file:line:col: what`)."""


class _Runner:
    """Carries out an STF script's commands against one datapath."""

    def __init__(self, datapath: Datapath, source: str) -> None:
        from cloudtwin.p4.arch.v1model import Replication

        self.dp = datapath
        self.source = source
        self.engine = Replication()
        self.nodes: list[tuple[int, list[int]]] = []  # mc node handle -> (rid, ports)
        self.sent: dict[int, list[bytes]] = {}  # port -> packets out, in order
        self.pending: list[tuple[int, bytes]] = []  # packets queued to run as one batch
        self.longest = 0  # bytes of the longest queued packet

    def refuse(self, command: Command, what: str) -> Unsupported:
        return Unsupported(f"{self.source}:{command.line}:{command.column}: {what}")

    def table(self, command: Command) -> TableState:
        name = command.name
        aliases = self.dp.program.aliases
        for candidate in (
            name,
            name.split(".")[-1],
            aliases.get(name, ""),
            aliases.get(name.split(".")[-1], ""),
        ):
            state = self.dp.tables.get(candidate)
            if state is not None:
                return state
        raise NicError(f"{self.source}:{command.line}: {name!r} is not a table of the program")

    def action(self, command: Command, state: TableState) -> tuple[str, tuple[int, ...]]:
        name = command.action.split(".")[-1]
        if name not in state.table.actions:
            aliases = self.dp.program.aliases
            name = aliases.get(command.action, aliases.get(name, name))
        if name not in state.table.actions and name != "NoAction":
            raise NicError(
                f"{self.source}:{command.line}: action {command.action!r} is not one of {state.table.name}'s"
            )
        owner = self.dp.owners.get(state.table.name)
        params = self.dp.action_params(name, owner)
        given = dict(command.params)
        unknown = set(given) - {p for p, _ in params}
        if unknown or len(given) != len(params):
            want = ", ".join(p for p, _ in params) or "none"
            raise NicError(f"{self.source}:{command.line}: action {name} takes parameters ({want})")
        values = []
        for pname, width in params:
            value = given[pname]
            if not 0 <= value < 1 << width:
                raise NicError(
                    f"{self.source}:{command.line}: {name}({pname}): {value} does not fit bit<{width}>"
                )
            values.append(value)
        return name, tuple(values)

    def match(self, command: Command, state: TableState) -> tuple[int | tuple[int, int], ...]:
        keys = state.table.keys
        given: dict[int, KeyMatch] = {}
        for field_name, value in command.keys:
            index = _key_index(keys, field_name.replace("$", "[").replace("[", "[", 1), field_name)
            if index is None:
                raise NicError(
                    f"{self.source}:{command.line}: {field_name!r} is not a key of {state.table.name}"
                )
            given[index] = value
        out: list[int | tuple[int, int]] = []
        for j, key in enumerate(keys):
            width = state.widths[j]
            out.append(self._key_value(command, key.kind, width, given.get(j), key.name))
        return tuple(out)

    def _key_value(
        self, command: Command, kind: MatchKind, width: int, value: KeyMatch | None, name: str
    ) -> int | tuple[int, int]:
        full = (1 << width) - 1
        where = f"{self.source}:{command.line}: key {name}"
        if value is None:
            if kind == MatchKind.EXACT:
                raise NicError(f"{where}: an exact key needs a value")
            return (0, full) if kind == MatchKind.RANGE else (0, 0)
        if isinstance(value, int):
            if not 0 <= value <= full:
                raise NicError(f"{where}: {value:#x} does not fit bit<{width}>")
            if kind == MatchKind.RANGE:
                return (value, value)
            return value if kind == MatchKind.EXACT else (value, width if kind == MatchKind.LPM else full)
        if kind == MatchKind.RANGE and value[0] == "range":
            if not value[1] <= value[2] <= full:
                raise NicError(f"{where}: range {value[1]}->{value[2]} is empty or does not fit bit<{width}>")
            return (value[1], value[2])
        if kind == MatchKind.RANGE or value[0] == "range":
            raise NicError(f"{where}: a {value[0]} value for a {kind.value} key")
        if kind == MatchKind.OPTIONAL and value[0] == "ternary" and value[2] not in (0, full):
            raise NicError(f"{where}: an optional key matches one value or any (mask 0 or all ones)")
        form, number, extra = value
        if kind == MatchKind.EXACT or (form == "lpm") != (kind == MatchKind.LPM):
            raise NicError(f"{where}: a {form} value for a {kind.value} key")
        if form == "lpm" and not 0 <= extra <= width:
            raise NicError(f"{where}: prefix /{extra} is outside 0..{width}")
        if not 0 <= number <= full or (form == "ternary" and not 0 <= extra <= full):
            raise NicError(f"{where}: value or mask does not fit bit<{width}>")
        return (number, extra)

    # commands ------------------------------------------------------------------------------
    def add(self, command: Command) -> None:
        state = self.table(command)
        action, params = self.action(command, state)
        # as p4c's STF runner passes them: the higher an entry's priority number, the earlier it matches
        priority = command.priority if command.priority is not None else 0
        state.entries = [*state.entries, TableEntry(self.match(command, state), action, params, priority)]
        state.invalidate()

    def setdefault(self, command: Command) -> None:
        state = self.table(command)
        state.default = self.action(command, state)

    def remove(self, command: Command) -> None:
        state = self.table(command)
        match = self.match(command, state)
        kept = [e for e in state.entries if e.match != match]
        if len(kept) == len(state.entries):
            raise NicError(f"{self.source}:{command.line}: no entry of {state.table.name} has that key")
        state.entries = kept
        state.invalidate()

    def register(self, command: Command) -> None:
        """register_write NAME INDEX VALUE, register_reset NAME; register_read only reads."""
        name = command.name.split(".")[-1]
        if name not in self.dp.registers:
            raise NicError(f"{self.source}:{command.line}: {command.name!r} is not a register of the program")
        cells, width = self.dp.registers[name]
        if command.kind == "register_reset":
            cells[:] = 0
            return
        index = command.numbers[0]
        if not 0 <= index < cells.size:
            raise NicError(
                f"{self.source}:{command.line}: index {index} is outside {name}'s {cells.size} cells"
            )
        if command.kind == "register_write":
            value = command.numbers[1]
            if not 0 <= value < 1 << width:
                raise NicError(f"{self.source}:{command.line}: {value} does not fit bit<{width}>")
            cells[index] = value

    def meter(self, command: Command) -> None:
        """meter_set_rates NAME INDEX C:CB P:PB, meter_array_set_rates NAME C:CB P:PB (rates in
        units per microsecond, bursts in units, as bmv2's runtime takes them);
        meter_get_rates only reads."""
        meter = self.dp.meters.get(command.name.split(".")[-1])
        if meter is None:
            raise NicError(f"{self.source}:{command.line}: {command.name!r} is not a meter of the program")
        if command.numbers and not 0 <= command.numbers[0] < meter.size:
            raise NicError(f"{self.source}:{command.line}: index {command.numbers[0]} is outside the meter")
        if command.kind == "meter_get_rates":
            return
        if len(command.rates) != 2:
            raise NicError(f"{self.source}:{command.line}: two RATE:BURST (committed, then peak) are needed")
        (cir, cburst), (pir, pburst) = command.rates
        rates = (cir * 1e6, float(cburst), pir * 1e6, float(pburst))
        if command.kind == "meter_array_set_rates":
            meter.configure_all(*rates)
        else:
            meter.configure(command.numbers[0], *rates)

    def multicast(self, command: Command) -> None:
        if command.kind == "mc_mgrp_create":
            self.engine.groups.setdefault(command.numbers[0], [])
        elif command.kind == "mc_node_create":
            rid, *ports = command.numbers
            self.nodes.append((rid, sorted(set(ports))))  # bmv2 holds a node's ports as a bitmap
        else:
            group, handle = command.numbers
            if group not in self.engine.groups or not 0 <= handle < len(self.nodes):
                raise NicError(f"{self.source}:{command.line}: no multicast group {group} or node {handle}")
            rid, ports = self.nodes[handle]
            self.engine.groups[group].extend((rid, port) for port in ports)

    def packet(self, command: Command) -> None:
        """Queue a packet; queued packets run together (as one batch) before the next
        command that changes the datapath, which is what running them one by one does."""
        longest = max(self.longest, len(command.data), 1)
        if self.pending and (len(self.pending) + 1) * longest > BATCH_BYTES:
            self.flush()
            longest = max(len(command.data), 1)
        self.pending.append((command.port, command.data))
        self.longest = longest

    def flush(self) -> None:
        """Run the queued packets, in order; what each sends joins its port's output. A
        register carries state from packet to packet, so with registers they run one by one."""
        pending, self.pending, self.longest = self.pending, [], 0
        if not pending:
            return
        groups = [[p] for p in pending] if self.dp.registers else [pending]
        for group in groups:
            for port, data in self.run(group):
                self.sent.setdefault(port, []).append(data)

    def run(self, packets: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """`packets` through the datapath as one batch: the (port, bytes) they send, in order."""
        from cloudtwin.p4.arch.v1model import process

        ports = np.array([p for p, _ in packets], dtype=np.uint64)
        # PNA: port 0 is the network (NET_TO_HOST), ports 1.. host functions (HOST_TO_NET)
        direction = (ports != 0).astype(np.uint64)
        batch = PacketBatch.from_packets([d for _, d in packets], direction, ports)
        if self.dp.program.architecture == "v1model":
            sent = [s for row in process(self.dp, batch, self.engine) for s in row]
        elif self.dp.program.architecture == "psa":
            from cloudtwin.p4.arch import psa

            sent = [s for row in psa.process(self.dp, batch, self.engine) for s in row]
        else:
            result = self.dp.process(batch)
            sent = [
                (int(result.out_port[i]), out) for i, out in enumerate(result.packets()) if out is not None
            ]
        return sent


def _key_index(keys: tuple[TableKey, ...], name: str, raw: str) -> int | None:
    bracketed = re.sub(r"\$(\d+)", r"[\1]", raw)
    for j, key in enumerate(keys):
        for known in (key.control_name, key.name):
            if bracketed in (known, known.split(".", 1)[-1]) or known.endswith("." + bracketed):
                return j
    return None


BATCH_BYTES = 16 << 20
"""The most bytes (packets x the longest of them) the runner puts in one batch."""

_QUEUED = ("expect", "wait", "packet")
"""Commands the run loop itself carries out."""

_HANDLERS = {
    "add": _Runner.add,
    "setdefault": _Runner.setdefault,
    "remove": _Runner.remove,
    "register_read": _Runner.register,
    "register_write": _Runner.register,
    "register_reset": _Runner.register,
    "meter_set_rates": _Runner.meter,
    "meter_array_set_rates": _Runner.meter,
    "meter_get_rates": _Runner.meter,
    "mc_mgrp_create": _Runner.multicast,
    "mc_node_create": _Runner.multicast,
    "mc_node_associate": _Runner.multicast,
}


def compare(expected: list[Expect], sent: dict[int, list[bytes]]) -> StfResult:
    """Per port, in order: every expected packet came out and nothing else did."""
    matched = unexpected = 0
    first: str | None = None
    wanted: dict[int, list[Expect]] = {}
    for expect in expected:
        wanted.setdefault(expect.port, []).append(expect)
    for port in sorted(set(wanted) | set(sent)):
        want, got = wanted.get(port, []), sent.get(port, [])
        for i in range(max(len(want), len(got))):
            if i < len(want) and i < len(got) and want[i].matches(got[i]):
                matched += 1
                continue
            unexpected += i < len(got)
            if first is None:
                exp = want[i].text() if i < len(want) else "nothing"
                act = got[i].hex().upper() if i < len(got) else "nothing"
                first = f"port {port} packet {i + 1}: expected {exp}, got {act}"
    status = "pass" if first is None else "fail"
    return StfResult(status, len(expected), matched, unexpected, first, sent)


def run_stf(
    program_text: str,
    program_source: str,
    stf_text: str,
    stf_source: str,
    include_dirs: tuple[Path, ...] = (),
) -> StfResult:
    """Run an STF test: status pass / fail, or unsupported with the construct named.

    NicError (one line, `file:line: reason`) when the script is malformed or an entry
    does not fit the program."""
    commands = parse_stf(stf_text, stf_source)
    try:
        program = parse_program(program_text, program_source, include_dirs, Path(program_source).parent)
        runner = _Runner(Datapath(program), stf_source)
    except P4Error as err:
        return StfResult("unsupported", reason=str(err))
    unknown = next((c for c in commands if c.kind not in _HANDLERS and c.kind not in _QUEUED), None)
    if unknown is not None:
        return StfResult("unsupported", reason=str(runner.refuse(unknown, f"STF command {unknown.kind}")))
    try:
        return _run(runner, commands)
    except P4Error as err:  # what the program does at run time is outside the subset
        return StfResult("unsupported", reason=str(err))


def _run(runner: _Runner, commands: list[Command]) -> StfResult:
    expected: list[Expect] = []
    for command in commands:
        if command.kind == "expect":
            assert command.expect is not None
            expected.append(command.expect)
        elif command.kind == "packet":
            runner.packet(command)
        elif command.kind != "wait":
            runner.flush()
            _HANDLERS[command.kind](runner, command)
    runner.flush()
    return compare(expected, runner.sent)
