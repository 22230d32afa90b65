"""Flow files in and out: reading a `flows` workload's CSV/Parquet file, writing per-flow results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cloudtwin.cli.output import atomic_file
from cloudtwin.errors import WorkloadError
from cloudtwin.files import read_bounded
from cloudtwin.scenario.model import FlowsWorkload, Scenario

if TYPE_CHECKING:
    import pyarrow as pa

    from cloudtwin.evaluation.run import Run

__all__ = ["FLOW_COLUMNS", "read_flow_file", "write_flows"]

FLOW_COLUMNS = (
    "flow",
    "connection",
    "tenant",
    "source",
    "destination",
    "bytes",
    "start_s",
    "finish_s",
    "fct_s",
    "mean_rate_gbps",
    "path",
)
"""The columns of a per-flow results file, one row per flow (a queue pair's transfer)."""


def read_flow_file(scenario: Scenario, scenario_path: Path) -> Scenario:
    """The scenario with its `flows` workload's file read (relative to the scenario file)."""
    workload = scenario.workload
    if not isinstance(workload, FlowsWorkload) or workload.file is None:
        return scenario
    from cloudtwin.workloads.flowlist import flow_table_from_arrow, flow_table_from_csv

    path = Path(workload.file)
    if not path.is_absolute():
        path = scenario_path.parent / path
    origin = f"workload.file {workload.file}"
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            table = flow_table_from_arrow(_read_parquet(path, origin, scenario.limits.flows), origin)
        else:
            table = flow_table_from_csv(_read_csv(path, origin, scenario.limits.flows), origin)
    except UnicodeDecodeError:
        raise WorkloadError(f"{origin}: not a text (CSV) file") from None
    return scenario.model_copy(update={"workload": workload.with_table(table)})


#: Bytes a flow file may hold per flow that `limits.flows` allows (a row with an explicit
#: path of a dozen hops is about 150 bytes).
BYTES_PER_FLOW = 512


def _most_bytes(flows: int) -> int:
    """The bytes a flow file may hold: BYTES_PER_FLOW per allowed flow."""
    return BYTES_PER_FLOW * flows + 4096


def _hint(flows: int) -> str:
    return f"more than {flows:,} flows can take (limits.flows); raise limits.flows for a longer list"


def _file_error(line: str) -> WorkloadError:
    """A flow file that cannot be read, named by its field: `workload.file: PATH: reason`."""
    return WorkloadError(f"workload.file: {line}")


def _too_many_rows(origin: str, rows: int, flows: int) -> WorkloadError:
    return WorkloadError(
        f"{origin}: {rows:,} rows, more than the {flows:,} flows limits.flows allows; "
        "raise limits.flows for a longer list"
    )


def _read_csv(path: Path, origin: str, flows: int) -> str:
    """The text of a CSV flow file: a regular file of at most BYTES_PER_FLOW per allowed
    flow, read in pieces (memory follows the file, not the limit), and refused when it
    holds more lines than `flows` rows and a header before any row is parsed."""
    data = read_bounded(path, _most_bytes(flows), "flow file", _file_error, _hint(flows))
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if lines - 1 > flows:  # blank lines count here: the parse skips them, but so many are not a list
        raise _too_many_rows(origin, lines - 1, flows)
    return data.decode("utf-8")


def _read_parquet(path: Path, origin: str, flows: int) -> pa.Table:
    """A Parquet flow file's table, under the CSV file's cap: the file's size, then its
    footer's row count (at most `flows`) and uncompressed size are checked before any row
    is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    most = _most_bytes(flows)
    data = read_bounded(path, most, "flow file", _file_error, _hint(flows))
    try:
        with pq.ParquetFile(pa.BufferReader(data)) as parquet:
            meta = parquet.metadata
            if meta.num_rows > flows:
                raise _too_many_rows(origin, meta.num_rows, flows)
            unpacked = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            if unpacked > most:
                raise WorkloadError(
                    f"{origin}: more than {most:,} bytes of data uncompressed, {_hint(flows)}"
                )
            # One thread: arrow's pool of reader threads, still joinable when the
            # interpreter exits, aborted the process ('terminate called without an
            # active exception') about one run in ten after its output was written.
            return parquet.read(use_threads=False)
    except (pa.ArrowInvalid, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise WorkloadError(f"{origin}: not a readable Parquet file ({first})") from None


def _path_names(run: Run) -> list[str]:
    """Each flow's path: its nodes in order (a split flow: its links)."""
    topology, paths = run.topology, run.paths
    names = np.array([topology.node_name(i) for i in range(topology.node_count)], dtype=object)
    result = []
    weights = paths.weights
    for f in range(paths.flow_count):
        links = paths.link_ids[paths.indptr[f] : paths.indptr[f + 1]]
        chain = links.size and np.array_equal(topology.link_dst[links[:-1]], topology.link_src[links[1:]])
        split = weights is not None and np.any(weights[paths.indptr[f] : paths.indptr[f + 1]] != 1.0)
        if chain and not split:
            result.append(" ".join([names[topology.link_src[links[0]]], *names[topology.link_dst[links]]]))
        else:
            result.append(", ".join(topology.link_name(int(link)) for link in links))
    return result


def write_flows(path: Path, run: Run) -> int:
    """Write one row per flow of `run` to a Parquet file (atomically); the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    flows, result, topology = run.flows, run.result, run.topology
    if result.finish_s.size != len(flows):
        raise WorkloadError(
            f"workload.kind: per-flow results are written for perftest and flows workloads, "
            f"not {run.scenario.workload.kind}"
        )
    tenants = [t.name for t in run.scenario.tenants]
    nic_host = {int(n): h for h, n in enumerate(topology.host_nics[:, 0])}
    if topology.nics_per_host > 1:
        nic_name = [topology.node_name(int(n)) for n in range(topology.node_count)]
        source = [nic_name[int(n)] for n in flows.src]
        destination = [nic_name[int(n)] for n in flows.dst]
    else:
        source = [f"host{nic_host[int(n)]}" for n in flows.src]
        destination = [f"host{nic_host[int(n)]}" for n in flows.dst]
    fct = result.finish_s - result.start_s
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(fct > 0, flows.size_bytes * 8 / fct / 1e9, np.nan)
    table = pa.table(
        {
            "flow": pa.array(np.arange(len(flows), dtype=np.int64)),
            "connection": pa.array(flows.connection.astype(np.int64)),
            "tenant": pa.array([tenants[t] if t >= 0 else None for t in flows.tenant.tolist()], pa.string()),
            "source": pa.array(source, pa.string()),
            "destination": pa.array(destination, pa.string()),
            "bytes": pa.array(flows.size_bytes.astype(float)),
            "start_s": pa.array(result.start_s.astype(float)),
            "finish_s": pa.array(result.finish_s.astype(float)),
            "fct_s": pa.array(fct.astype(float)),
            "mean_rate_gbps": pa.array(rate.astype(float)),
            "path": pa.array(_path_names(run), pa.string()),
        }
    )
    with atomic_file(path) as handle:  # a new file gets 0666 less the umask, like any output
        pq.write_table(table, handle)
    return table.num_rows
