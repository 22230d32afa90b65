"""Table entries and meter settings as written in an entries document, checked against a program.

```yaml
tables:
  vf_vni:
    - match: {istd.input_port: 1}          # key name = the key expression's text
      action: set_vni
      params: {vni: 1001, local_ip: 10.0.0.1, nic_mac: "02:00:00:00:00:01"}
  acl:
    - match: {hdr.ipv4.dst: 10.1.0.0/16, hdr.tcp.dstPort: {value: 22, mask: 0xffff}}
      action: deny
      priority: 10
meters:
  tenant_rate:
    - {index: 1, cir: 1Gbps, cburst: 64KiB, pir: 2Gbps, pburst: 128KiB}
```

Values are integers, hex strings, IPv4/IPv6 addresses or MAC addresses; lpm keys take
`address/prefix`, ternary keys `{value, mask}`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from cloudtwin.errors import NicError, ScenarioError
from cloudtwin.p4.datapath import Datapath
from cloudtwin.p4.program import MatchKind
from cloudtwin.p4.tables import TableEntry
from cloudtwin.scenario.units import parse_rate, parse_size

__all__ = ["MeterSetting", "parse_entries", "parse_value"]

_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


@dataclass(frozen=True)
class MeterSetting:
    """Rates and bursts of one meter cell, in the meter's unit per second (bytes or packets)."""

    meter: str
    index: int
    cir: float
    cburst: float
    pir: float
    pburst: float


def parse_value(value: object, width: int, where: str) -> int:
    """An entry value as an int that fits `width` bits.

    >>> parse_value("10.0.0.1", 32, "k")
    167772161
    >>> parse_value("02:00:00:00:00:01", 48, "k")
    2199023255553
    """
    if isinstance(value, bool):
        raise NicError(f"{where}: {value!r} is not a number or address")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        number = _parse_text(value.strip(), where)
    else:
        raise NicError(f"{where}: {value!r} is not a number or address")
    if not 0 <= number < (1 << width):
        raise NicError(f"{where}: {value!r} does not fit in bit<{width}>")
    return number


def _parse_text(text: str, where: str) -> int:
    if _MAC.match(text):
        return int(text.replace(":", "").replace("-", ""), 16)
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return int(ipaddress.ip_address(text))
    except ValueError as err:
        raise NicError(f"{where}: {text!r} is not a number, MAC or IP address") from err


def _match(value: object, kind: MatchKind, width: int, where: str) -> int | tuple[int, int]:
    if kind == MatchKind.EXACT:
        return parse_value(value, width, where)
    if kind == MatchKind.RANGE:
        raise NicError(f"{where}: range keys are set by const entries or STF only")
    if kind == MatchKind.LPM:
        address: object
        if isinstance(value, str) and "/" in value:
            address, _, prefix_text = value.partition("/")
            prefix = int(prefix_text) if prefix_text.isascii() and prefix_text.isdigit() else -1
        elif isinstance(value, dict) and set(value) == {"value", "prefix_len"}:
            address, prefix = value["value"], int(value["prefix_len"])
        else:
            address, prefix = value, width
        if not 0 <= prefix <= width:
            raise NicError(f"{where}: prefix length must be 0..{width}")
        number = parse_value(address, width, where)
        return number & (((1 << width) - 1) ^ ((1 << (width - prefix)) - 1)), prefix
    if isinstance(value, dict) and set(value) == {"value", "mask"}:
        number = parse_value(value["value"], width, f"{where}.value")
        mask = parse_value(value["mask"], width, f"{where}.mask")
        return number & mask, mask
    return parse_value(value, width, where), (1 << width) - 1


def _entry(datapath: Datapath, table_name: str, i: int, raw: object) -> TableEntry:
    where = f"tables.{table_name}.{i}"
    if not isinstance(raw, dict):
        raise NicError(f"{where}: an entry is a mapping with match, action and params")
    unknown = set(raw) - {"match", "action", "params", "priority"}
    if unknown:
        raise NicError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    state = datapath.tables[table_name]
    table = state.table
    match = raw.get("match") or {}
    if not isinstance(match, dict):
        raise NicError(f"{where}.match: a mapping of key name to value")
    names = [k.name for k in table.keys]
    aliases = {k.control_name: k.name for k in table.keys if k.control_name}  # a key's @name
    match = {aliases.get(str(name), name): value for name, value in match.items()}
    for name in match:
        if name not in names:
            raise NicError(f"{where}.match: {table_name} has no key {name!r} (keys: {', '.join(names)})")
    values: list[int | tuple[int, int]] = []
    for key, width in zip(table.keys, state.widths, strict=True):
        if key.name not in match:
            if key.kind == MatchKind.EXACT:
                raise NicError(f"{where}.match: exact key {key.name!r} is missing")
            values.append((0, 0))  # a wildcard
            continue
        values.append(_match(match[key.name], key.kind, width, f"{where}.match.{key.name}"))
    action = raw.get("action")
    if action not in table.actions:
        raise NicError(
            f"{where}.action: {action!r} is not an action of {table_name} ({', '.join(table.actions)})"
        )
    owner = datapath.owners.get(table_name)
    params = _params(datapath, str(action), raw.get("params") or {}, f"{where}.params", owner)
    priority = raw.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
        raise NicError(f"{where}.priority: a non-negative integer")
    return TableEntry(tuple(values), str(action), params, priority)


def _check_distinct(datapath: Datapath, table: str, name: str, entries: list[TableEntry]) -> None:
    """NicError naming the later of two entries that match the same keys (the same masks and,
    where priorities decide, the same priority): the later one would never be hit."""
    kinds = {k.kind for k in datapath.tables[table].table.keys}
    ranked = bool({MatchKind.TERNARY, MatchKind.OPTIONAL} & kinds) or not kinds  # priorities order them
    seen: dict[tuple[object, ...], int] = {}
    for i, entry in enumerate(entries):
        key = (entry.match, entry.priority if ranked else 0)
        first = seen.setdefault(key, i)
        if first != i:
            raise NicError(
                f"tables.{name}.{i}.match: the same match as tables.{name}.{first}, "
                "so this entry would never be hit"
            )


def _params(datapath: Datapath, action: str, raw: object, where: str, owner: Any = None) -> tuple[int, ...]:
    declared = datapath.action_params(action, owner)
    if not isinstance(raw, dict):
        raise NicError(f"{where}: a mapping of parameter name to value")
    names = [name for name, _ in declared]
    for name in raw:
        if name not in names:
            raise NicError(f"{where}: action {action} has no parameter {name!r}")
    missing = [name for name in names if name not in raw]
    if missing:
        raise NicError(f"{where}: parameter {missing[0]!r} of {action} is missing")
    return tuple(parse_value(raw[name], width, f"{where}.{name}") for name, width in declared)


def _meter(datapath: Datapath, name: str, i: int, raw: object) -> MeterSetting:
    where = f"meters.{name}.{i}"
    meter = datapath.meters[name]
    if not isinstance(raw, dict) or set(raw) != {"index", "cir", "cburst", "pir", "pburst"}:
        raise NicError(f"{where}: give index, cir, cburst, pir and pburst")
    extern = datapath.program.control.externs[name]
    index = raw["index"]
    if not isinstance(index, int) or not 0 <= index < extern.size:
        raise NicError(f"{where}.index: must be 0..{extern.size - 1}")
    try:
        if meter.unit == "packets":
            rates = [float(raw[k]) for k in ("cir", "cburst", "pir", "pburst")]
        else:
            rates = [
                parse_rate(raw["cir"]) / 8,
                float(parse_size(raw["cburst"])),
                parse_rate(raw["pir"]) / 8,
                float(parse_size(raw["pburst"])),
            ]
    except (ValueError, TypeError, ScenarioError) as err:
        raise NicError(f"{where}: {err}") from err
    if rates[2] < rates[0]:
        raise NicError(f"{where}.pir: the peak rate must be at least the committed rate")
    return MeterSetting(name, index, *rates)


def parse_entries(
    datapath: Datapath, document: Any
) -> tuple[dict[str, list[TableEntry]], list[MeterSetting]]:
    """Entries per table and meter settings from a loaded entries document, all checked."""
    if document is None:
        document = {}
    if not isinstance(document, dict) or set(document) - {"tables", "meters", "pna"}:
        raise NicError("entries: a mapping with `tables`, `meters` and/or `pna`")
    for section in ("tables", "meters"):
        if not isinstance(document.get(section) or {}, dict):
            raise NicError(f"{section}: a mapping of {section[:-1]} name to a list of entries")
    tables: dict[str, list[TableEntry]] = {}
    for name, rows in (document.get("tables") or {}).items():
        short = str(name).split(".")[-1]
        if short not in datapath.tables:
            raise NicError(f"tables.{name}: the program has no table {name!r}")
        if not isinstance(rows, list):
            raise NicError(f"tables.{name}: a list of entries")
        entries = [_entry(datapath, short, i, row) for i, row in enumerate(rows)]
        _check_distinct(datapath, short, str(name), entries)
        size = datapath.tables[short].table.size
        if len(entries) > size:
            raise NicError(f"tables.{name}: {len(entries)} entries exceed the table's size {size}")
        tables[short] = entries
    meters: list[MeterSetting] = []
    for name, rows in (document.get("meters") or {}).items():
        if name not in datapath.meters:
            raise NicError(f"meters.{name}: the program has no meter {name!r}")
        if not isinstance(rows or [], list):
            raise NicError(f"meters.{name}: a list of meter settings")
        meters.extend(_meter(datapath, name, i, row) for i, row in enumerate(rows or []))
    return tables, meters
