"""Flow lists: rows and files become flows, explicit paths override routing, bad rows are named."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from cloudtwin.errors import WorkloadError
from cloudtwin.evaluation.run import run_scenario
from cloudtwin.scenario import load_scenario
from cloudtwin.topology import build_topology
from cloudtwin.workloads.flowlist import (
    flow_table_from_arrow,
    flow_table_from_csv,
    flows_from_table,
)

# 2 leaves x 2 spines x 2 hosts; every link 100 Gb/s and 1 us
FABRIC = "fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"


def scenario(rows: str, extra: str = ""):
    return load_scenario(
        FABRIC + extra + f"routing: {{strategy: dmodk}}\nworkload: {{kind: flows, rows: {rows}}}\n"
    )


def test_two_flows_share_the_spine_dmodk_chose() -> None:
    # host0 -> host2 and host1 -> host2 both end on host2's 100G link: 50G each, 1 GB
    # = 8e9 bits / 50e9 = 0.16 s, + 4 links x 1 us. A third flow host1 -> host3 from
    # 0.5 s runs alone: 0.08 s + 4 us.
    s = scenario(
        "[{source: 0, destination: host2, bytes: 1GB}, {source: host1, destination: 2, bytes: 1000000000},"
        " {source: 1, destination: 3, bytes: 1e9, start: 500ms}]"
    )
    run = run_scenario(s)
    np.testing.assert_allclose(run.result.finish_s, [0.160004, 0.160004, 0.580004], rtol=1e-12)
    np.testing.assert_allclose(run.result.start_s, [0.0, 0.0, 0.5])
    # D-mod-k: destination 2 -> spine 0, destination 3 -> spine 1
    topology = run.topology
    spines = [topology.node_name(int(topology.link_dst[run.paths.path(f)[1]])) for f in range(3)]
    assert spines == ["spine0", "spine0", "spine1"]


def test_an_explicit_path_overrides_the_strategy() -> None:
    s = scenario(
        "[{source: 0, destination: 2, bytes: 1GB, path: 'host0/nic0 leaf0 spine1 leaf1 host2/nic0'}]"
    )
    run = run_scenario(s)
    names = [run.topology.link_name(int(link)) for link in run.paths.path(0)]
    assert names == ["host0/nic0->leaf0", "leaf0->spine1", "spine1->leaf1", "leaf1->host2/nic0"]


def test_qps_split_a_row_and_tenants_may_share_hosts() -> None:
    extra = "tenants: [{name: a, vni: 10, hosts: [0, 1]}, {name: b, vni: 20, hosts: [2, 3]}]\n"
    s = scenario(
        "[{source: 0, destination: 2, bytes: 2GB, qps: 2, tenant: a},"
        " {source: 0, destination: 3, bytes: 1GB, tenant: b}]",
        extra,
    )
    run = run_scenario(s)
    assert len(run.flows) == 3
    np.testing.assert_array_equal(run.flows.connection, [0, 0, 1])
    np.testing.assert_array_equal(run.flows.tenant, [0, 0, 1])
    np.testing.assert_allclose(run.flows.size_bytes, [1e9, 1e9, 1e9])


def table_of(csv: str):
    topology = build_topology(load_scenario(FABRIC))
    return flows_from_table(flow_table_from_csv(csv, "flows.csv"), topology, ["a"], 1, 1)


def test_csv_and_parquet_rows_read_alike() -> None:
    csv = "source,destination,bytes,start\n0,2,1000,0\nhost1,host3/nic0,1KiB,0.5\n"
    from_csv = table_of(csv)
    topology = build_topology(load_scenario(FABRIC))
    arrow = pa.table(
        {"source": [0, 1], "destination": ["2", "host3"], "bytes": [1000, 1024], "start": [0.0, 0.5]}
    )
    from_parquet = flows_from_table(flow_table_from_arrow(arrow, "flows.parquet"), topology, [], 1, 1)
    for flows in (from_csv, from_parquet):
        np.testing.assert_allclose(flows.size_bytes, [1000, 1024])
        np.testing.assert_allclose(flows.start_s, [0.0, 0.5])
        np.testing.assert_array_equal(flows.src, topology.host_nics[[0, 1], 0])


@pytest.mark.parametrize(
    ("csv", "message"),
    [
        (
            "source,destination,bytes\n0,2,1000\n0,9,1000\n",
            r"flows.csv: row 2, column destination: no host '9' \(hosts 0-3\)",
        ),
        ("source,destination,bytes\nhost7,2,1000\n", r"row 1, column source: no host 'host7'"),
        ("source,destination,bytes\n0,2,-5\n", r"row 1, column bytes: size .*-5.* must be positive"),
        ("source,destination,bytes\n0,2,lots\n", r"row 1, column bytes: 'lots' is not a size"),
        (
            "source,destination,bytes\n0,2,1000\n0,2\n",
            r"flows.csv: row 2 \(line 3\) has 2 fields, expected 3",
        ),
        (
            "source,destination,bytes,start\n0,2,1000,-1\n",
            r"row 1, column start: must be a time of 0 s or later",
        ),
        ("source,destination,bytes,tenant\n0,2,1000,zz\n", r"row 1, column tenant: no tenant named 'zz'"),
        ("source,destination,bytes\n2,2,1000\n", r"row 1, column destination: the same NIC as the source"),
        ("source,destination,bytes,qps\n0,2,1000,0\n", r"row 1, column qps: expected a whole number"),
        (
            "source,destination,bytes,path\n0,2,1000,host0/nic0 leaf0 leaf1 host2/nic0\n",
            r"row 1, column path: not connected: no link from leaf0 to leaf1",
        ),
        (
            "source,destination,bytes,path\n0,2,1000,host0 leaf0 spine9\n",
            r"row 1, column path: no node named 'spine9'",
        ),
        (
            "source,destination,bytes,path\n0,3,1000,host0/nic0 leaf0 spine0 leaf1 host2/nic0\n",
            r"row 1, column path: does not go from the source to the destination",
        ),
        ("source,destination,size\n0,2,1000\n", r"flows.csv: unknown column 'size'"),
        ("source,bytes\n0,1000\n", r"flows.csv: column 'destination' is missing"),
        ("", r"flows.csv: empty file"),
        # silently wrong before: the first of two `bytes` columns was used
        ("source,destination,bytes,bytes\n0,2,1000,5\n", r"flows.csv: column 'bytes' appears more than once"),
        # a loop was simulated, loading leaf0's links twice
        (
            "source,destination,bytes,path\n0,2,1000,host0/nic0 leaf0 spine0 leaf0 spine1 leaf1 host2/nic0\n",
            r"row 1, column path: visits leaf0 twice \(a path may not loop\)",
        ),
        # other scripts' digits were read as numbers: Arabic-Indic 2, full-width 2 and 1000
        ("source,destination,bytes\n0,\u0662,1000\n", r"row 1, column destination: expected a host"),
        ("source,destination,bytes\n0,host\uff12,1000\n", r"row 1, column destination: expected a host"),
        ("source,destination,bytes\n0,2,\uff11\uff10\uff10\uff10\n", r"column bytes: .* is not a size"),
        ("source,destination,bytes\n0,2,1__000\n", r"row 1, column bytes: '1__000' is not a size"),
        ("source,destination,bytes,start\n0,2,1000,\u0661\n", r"row 1, column start: .* is not a time"),
        ("source,destination,bytes,start\n0,2,1000,nan\n", r"row 1, column start: 'nan' is not a number"),
        ("source,destination,bytes,start\n0,2,1000,1e400\n", r"row 1, column start: '1e400' is not a finite"),
        ("source,destination,bytes,qps\n0,2,1000,\u0662\n", r"row 1, column qps: expected a whole number"),
        ("source,destination,bytes,qps\n0,2,1000,1__0\n", r"row 1, column qps: expected a whole number"),
    ],
)
def test_bad_rows_are_named_by_row_and_column(csv: str, message: str) -> None:
    with pytest.raises(WorkloadError, match=message) as caught:
        table_of(csv)
    assert "\n" not in str(caught.value)


def test_rows_or_file_not_both() -> None:
    from cloudtwin.errors import ScenarioError

    with pytest.raises(ScenarioError, match="either rows or a file"):
        load_scenario("workload: {kind: flows, file: a.csv, rows: [{source: 0, destination: 1, bytes: 1}]}\n")
    with pytest.raises(ScenarioError, match="either rows or a file"):
        load_scenario("workload: {kind: flows}\n")
