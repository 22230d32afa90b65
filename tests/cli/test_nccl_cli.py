"""`cloudtwin nccl-tests` end to end: the JSON it documents, its table, its errors."""

from __future__ import annotations

import json

from tests.cli.cli_helpers import cloudtwin

SMALL = [
    "--set",
    "fabric.leaves=2",
    "--set",
    "fabric.hosts_per_leaf=2",
    "--set",
    "tenants=[]",
    "--set",
    "hosts.nics=1",
    "--set",
    "hosts.gpus=2",
    "--set",
    "workload.channels=2",
]


def test_json_is_the_documented_object_and_sizes_are_powers_of_1024() -> None:
    done = cloudtwin(
        "nccl-tests",
        "examples/routing-strategies.yaml",
        "--op",
        "allgather",
        "-b",
        "1K",
        "-e",
        "4K",
        "-f",
        "2",
        "--strategies",
        "ecmp,pinning",
        "--json",
        *SMALL,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"scenario", "op", "results"}
    assert result["scenario"] == "routing-strategies" and result["op"] == "allgather"
    assert list(result["results"]) == ["ecmp", "pinning"]
    rows = result["results"]["pinning"]
    assert [r["size_bytes"] for r in rows] == [1024, 2048, 4096]
    for row in rows:
        assert set(row) == {"size_bytes", "time_us", "algbw_GBps", "busbw_GBps"}
        assert row["algbw_GBps"] == row["size_bytes"] / (row["time_us"] * 1e-6) / 1e9
        assert abs(row["busbw_GBps"] - row["algbw_GBps"] * 7 / 8) < 1e-9  # 8 ranks: (n-1)/n


def test_table_and_errors() -> None:
    done = cloudtwin(
        "nccl-tests",
        "examples/routing-strategies.yaml",
        "-b",
        "1M",
        "-e",
        "2M",
        *SMALL,
        "--strategies",
        "ecmp,pinning",
    )
    assert done.returncode == 0, done.stderr
    for label in ("size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "busbw vs ecmp"):
        assert label in done.stdout
    bad = cloudtwin("nccl-tests", "examples/routing-strategies.yaml", "-b", "1X")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "minbytes" in bad.stderr and "Traceback" not in bad.stderr
    help_ = cloudtwin("nccl-tests", "--help")
    assert help_.returncode == 0 and "Example:" in help_.stdout
