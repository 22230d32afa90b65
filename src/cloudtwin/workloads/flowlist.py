"""A workload given as a list of flows: inline rows of a scenario, or a CSV or Parquet table.

Columns: `source`, `destination` (a host index `12`, a host `host12`, or a NIC
`host12/nic1`), `bytes` (a number or a size such as `1GiB`), and optionally `start`
(seconds, or a duration such as `2ms`; default 0), `tenant` (a tenant's name: its
overlay carries the flow; hosts may be shared between tenants' flows), `qps` (queue
pairs the transfer is split over; default the workload's `qps`) and `path` (the nodes
the flow crosses, e.g. `host0/nic0 leaf0 spine1 leaf3 host50/nic0`, which overrides the
routing strategy for that flow). Every bad value is reported with its row and column.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cloudtwin.errors import WorkloadError
from cloudtwin.flows import Flows
from cloudtwin.scenario.model import FlowsWorkload
from cloudtwin.scenario.units import DIGITS, parse_int, parse_number, parse_size, parse_time
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import NodeKind, Topology
from cloudtwin.workloads.perftest import qp_flows

__all__ = [
    "COLUMNS",
    "FlowTable",
    "apply_explicit_paths",
    "explicit_paths",
    "flow_table_from_arrow",
    "flow_table_from_csv",
    "flow_table_from_rows",
    "flows_from_table",
    "workload_table",
]

REQUIRED = ("source", "destination", "bytes")
COLUMNS = (*REQUIRED, "start", "tenant", "qps", "path")

_HOST = re.compile(r"^(?:host)?([0-9]+)(?:/nic([0-9]+))?$")
#: A start given as a bare number of seconds (anything else is a duration with a unit).
_BARE_NUMBER = re.compile(r"[-+]?[0-9._]+(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|infinity)", re.I)
_PATH_SEPARATORS = re.compile(r"\s*(?:->|>|,|\s)\s*")


#: The latest start a listed flow may have: float seconds still tell nanoseconds apart
#: (1e6 s is 1e15 ns, below 2**53).
MAX_START_S = 1e6


@dataclass(frozen=True, eq=False)
class FlowTable:
    """Rows of flows as read (values not yet checked); `origin` names them in messages."""

    origin: str
    columns: Mapping[str, Sequence[object]]

    def __len__(self) -> int:
        return len(self.columns["source"])


def _where(table: FlowTable, row: int, column: str) -> str:
    return f"{table.origin}: row {row + 1}, column {column}"


def _check_columns(origin: str, names: Sequence[str]) -> None:
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise WorkloadError(f"{origin}: column {twice[0]!r} appears more than once")
    for name in names:
        if name not in COLUMNS:
            raise WorkloadError(f"{origin}: unknown column {name!r} (known: {', '.join(COLUMNS)})")
    for name in REQUIRED:
        if name not in names:
            raise WorkloadError(f"{origin}: column {name!r} is missing (required: {', '.join(REQUIRED)})")


def flow_table_from_csv(text: str, origin: str) -> FlowTable:
    """A table from CSV text with a header line naming the columns."""
    try:
        return _table_from_csv(text, origin)
    except csv.Error as err:
        raise WorkloadError(f"{origin}: not a CSV file ({err})") from None


def _table_from_csv(text: str, origin: str) -> FlowTable:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise WorkloadError(f"{origin}: empty file (expected a header line: {','.join(COLUMNS)})")
    names = [h.strip() for h in header]
    _check_columns(origin, names)
    columns: dict[str, list[object]] = {n: [] for n in names}
    for number, fields in enumerate(reader, start=1):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(names):
            raise WorkloadError(
                f"{origin}: row {len(columns[names[0]]) + 1} (line {number + 1}) has {len(fields)} "
                f"fields, expected {len(names)} ({','.join(names)})"
            )
        for name, value in zip(names, fields, strict=True):
            columns[name].append(value.strip())
    return FlowTable(origin, columns)


def flow_table_from_arrow(table: object, origin: str) -> FlowTable:
    """A table from a pyarrow Table (as read from a Parquet file)."""
    names = list(table.column_names)  # type: ignore[attr-defined]
    _check_columns(origin, names)
    return FlowTable(origin, {n: table.column(n).to_pylist() for n in names})  # type: ignore[attr-defined]


def flow_table_from_rows(rows: Sequence[Mapping[str, object]], origin: str = "workload.rows") -> FlowTable:
    """A table from a scenario's inline rows (mappings of column to value)."""
    names = [c for c in COLUMNS if any(row.get(c) is not None for row in rows)]
    for name in REQUIRED:
        if name not in names:
            names.append(name)
    return FlowTable(origin, {n: [row.get(n) for row in rows] for n in names})


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _nic(table: FlowTable, row: int, column: str, value: object, topology: Topology) -> int:
    where = _where(table, row, column)
    if isinstance(value, bool) or _is_blank(value):
        raise WorkloadError(f"{where}: expected a host (12, host12 or host12/nic1), got {value!r}")
    if isinstance(value, (int, np.integer)) or isinstance(value, float) and value.is_integer():
        host, rail = int(value), 0
    else:
        match = _HOST.match(str(value).strip())
        if match is None:
            raise WorkloadError(f"{where}: expected a host (12, host12 or host12/nic1), got {value!r}")
        host, rail = int(match.group(1)), int(match.group(2) or 0)
    if not 0 <= host < topology.host_count:
        raise WorkloadError(f"{where}: no host {value!r} (hosts 0-{topology.host_count - 1})")
    if not 0 <= rail < topology.nics_per_host:
        raise WorkloadError(f"{where}: host {host} has no NIC {rail} (NICs 0-{topology.nics_per_host - 1})")
    return int(topology.host_nics[host, rail])


def _bytes(table: FlowTable, row: int, value: object) -> float:
    where = _where(table, row, "bytes")
    try:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str) and re.fullmatch(rf"[-+]?{DIGITS}(\.0*)?", value.strip()):
            value = int(parse_number(value.strip()))
        return float(parse_size(value))  # type: ignore[arg-type]
    except ValueError as err:
        raise WorkloadError(f"{where}: {err}") from None


def _start(table: FlowTable, row: int, value: object) -> float:
    where = _where(table, row, "start")
    if _is_blank(value):
        return 0.0
    try:
        if isinstance(value, str):
            text = value.strip()
            seconds = parse_number(text) if _BARE_NUMBER.fullmatch(text) else parse_time(text)
        elif isinstance(value, bool):
            raise ValueError(f"{value!r} is not a time")
        else:
            seconds = float(value)  # type: ignore[arg-type]
    except ValueError as err:
        raise WorkloadError(f"{where}: {err}") from None
    if not np.isfinite(seconds) or seconds < 0:
        raise WorkloadError(f"{where}: must be a time of 0 s or later, got {value!r}")
    if seconds > MAX_START_S:
        raise WorkloadError(
            f"{where}: {value!r} is later than {MAX_START_S:.0e} s (the engine keeps nanoseconds "
            "apart only below that)"
        )
    return seconds


def _qps(table: FlowTable, row: int, value: object, default: int) -> int:
    if _is_blank(value):
        return default
    try:
        qps = parse_int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        qps = 0
    if isinstance(value, bool) or not 1 <= qps <= 1024:
        raise WorkloadError(f"{_where(table, row, 'qps')}: expected a whole number 1-1024, got {value!r}")
    return qps


def flows_from_table(
    table: FlowTable,
    topology: Topology,
    tenants: Sequence[str],
    default_qps: int,
    seed: int | np.random.Generator,
) -> Flows:
    """The flows of the table's rows (a row's QPs are one connection, `connection` = row)."""
    n = len(table)
    cols = table.columns
    src = np.array(
        [_nic(table, r, "source", v, topology) for r, v in enumerate(cols["source"])], dtype=np.int64
    )
    dst = np.array(
        [_nic(table, r, "destination", v, topology) for r, v in enumerate(cols["destination"])],
        dtype=np.int64,
    )
    same = np.flatnonzero(src == dst)
    if same.size:
        raise WorkloadError(f"{_where(table, int(same[0]), 'destination')}: the same NIC as the source")
    size = np.array([_bytes(table, r, v) for r, v in enumerate(cols["bytes"])])
    start = np.array([_start(table, r, v) for r, v in enumerate(cols.get("start", [None] * n))])
    index = {name: i for i, name in enumerate(tenants)}
    tenant = np.full(n, -1, dtype=np.int64)
    for r, value in enumerate(cols.get("tenant", [None] * n)):
        if _is_blank(value):
            continue
        if str(value).strip() not in index:
            known = ", ".join(tenants) or "none"
            raise WorkloadError(f"{_where(table, r, 'tenant')}: no tenant named {value!r} (tenants: {known})")
        tenant[r] = index[str(value).strip()]
    qps = np.array([_qps(table, r, v, default_qps) for r, v in enumerate(cols.get("qps", [None] * n))])
    for r, links in explicit_paths(table, topology).items():  # bad input, whatever the strategy
        if topology.link_src[links[0]] != src[r] or topology.link_dst[links[-1]] != dst[r]:
            raise WorkloadError(f"{_where(table, r, 'path')}: does not go from the source to the destination")
    rng = np.random.default_rng(seed)
    parts: list[Flows] = []
    rows: list[np.ndarray] = []
    for count in np.unique(qps):
        chosen = np.flatnonzero(qps == count)
        parts.append(
            qp_flows(
                topology,
                src[chosen],
                dst[chosen],
                size[chosen],
                int(count),
                rng,
                start[chosen],
                tenant[chosen],
            )
        )
        rows.append(np.repeat(chosen, count))
    if not parts:
        raise WorkloadError(f"{table.origin}: no flows")
    merged = Flows.concat(parts)
    row = np.concatenate(rows)
    order = np.argsort(row, kind="stable")
    columns = {name: getattr(merged, name)[order] for name in merged.__dataclass_fields__}
    columns["connection"] = row[order]
    return Flows(**columns)


def explicit_paths(table: FlowTable, topology: Topology) -> dict[int, np.ndarray]:
    """Per row that names a `path`: its link ids (checked: consecutive nodes are linked)."""
    values = table.columns.get("path")
    if values is None:
        return {}
    names = {topology.node_name(i): i for i in range(topology.node_count)}
    for host in range(topology.host_count):
        for rail in range(topology.nics_per_host):
            if rail == 0:
                names[f"host{host}"] = int(topology.host_nics[host, 0])
    found: dict[int, np.ndarray] = {}
    for r, value in enumerate(values):
        if _is_blank(value):
            continue
        where = _where(table, r, "path")
        hops = [h for h in _PATH_SEPARATORS.split(str(value).strip()) if h]
        nodes = []
        for hop in hops:
            if hop not in names:
                raise WorkloadError(f"{where}: no node named {hop!r}")
            nodes.append(names[hop])
        if len(nodes) < 2:
            raise WorkloadError(f"{where}: a path needs at least its two NICs, got {value!r}")
        _check_no_loop(where, nodes, topology)
        if topology.node_kind[nodes[0]] != NodeKind.NIC or topology.node_kind[nodes[-1]] != NodeKind.NIC:
            raise WorkloadError(f"{where}: a path goes from the source NIC to the destination NIC")
        links = []
        for a, b in zip(nodes[:-1], nodes[1:], strict=True):
            hits = np.flatnonzero((topology.link_src == a) & (topology.link_dst == b))
            if hits.size == 0:
                raise WorkloadError(
                    f"{where}: not connected: no link from {topology.node_name(a)} to {topology.node_name(b)}"
                )
            links.append(int(hits[0]))
        found[r] = np.array(links, dtype=np.int64)
    return found


def _check_no_loop(where: str, nodes: list[int], topology: Topology) -> None:
    """A path visits each node once: a loop would load its links twice for no hop gained."""
    seen: set[int] = set()
    for node in nodes:
        if node in seen:
            raise WorkloadError(f"{where}: visits {topology.node_name(node)} twice (a path may not loop)")
        seen.add(node)


def apply_explicit_paths(paths: Paths, flows: Flows, chosen: dict[int, np.ndarray]) -> Paths:
    """`paths` with every flow of a row that names a path taking that path."""
    if not chosen:
        return paths
    moved = np.flatnonzero(np.isin(flows.connection, np.fromiter(chosen, dtype=np.int64)))
    lists = [chosen[int(flows.connection[f])] for f in moved]
    indptr = np.concatenate(([0], np.cumsum([p.size for p in lists]))).astype(np.int64)
    return paths.replace(moved, Paths(indptr, np.concatenate(lists)))


def workload_table(workload: FlowsWorkload) -> FlowTable:
    """The rows of a `flows` workload: its inline rows, or the table read from its file."""
    if workload.file is None:
        return flow_table_from_rows([row.model_dump() for row in workload.rows])
    if not isinstance(workload.table, FlowTable):
        raise WorkloadError(f"workload.file: {workload.file} has not been read (the CLI reads flow files)")
    return workload.table
