"""`cloudtwin run` on a flow list, with per-flow results written to Parquet."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

from cloudtwin.cli.app import main

EXAMPLE = "examples/leaf-spine-pairs.yaml"


def test_pairs_example_writes_every_flow(tmp_path: Path) -> None:
    out = tmp_path / "flows.parquet"
    done = cloudtwin("run", EXAMPLE, "--flows-out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["strategy"] == "dmodk"
    assert result["flows_out"] == {"file": str(out), "rows": 1000}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # as any file the command writes
    table = pq.read_table(out)
    assert table.column_names == [
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
    ]
    pairs = np.loadtxt(REPO / "examples" / "leaf-spine-pairs.csv", delimiter=",", skiprows=1, dtype=np.int64)
    assert table.column("source").to_pylist() == [f"host{h}" for h in pairs[:, 0]]
    assert table.column("destination").to_pylist() == [f"host{h}" for h in pairs[:, 1]]
    finish = np.array(table.column("finish_s").to_pylist())
    assert finish.max() * 1e3 == result["completion_s"] * 1e3
    fct = np.array(table.column("fct_s").to_pylist())
    rate = np.array(table.column("mean_rate_gbps").to_pylist())
    np.testing.assert_allclose(rate, 8.0 / fct, rtol=1e-12)  # 1 GB each
    # D-mod-k: a cross-leaf pair goes through spine (destination mod 4)
    first = table.column("path").to_pylist()[0].split()
    assert first[0] == f"host{pairs[0, 0]}/nic0" and first[-1] == f"host{pairs[0, 1]}/nic0"
    if pairs[0, 0] // 16 != pairs[0, 1] // 16:
        assert first[2] == f"spine{pairs[0, 1] % 4}"


def test_table_output_names_the_file(tmp_path: Path) -> None:
    out = tmp_path / "flows.parquet"
    done = cloudtwin("run", EXAMPLE, "--flows-out", str(out))
    assert done.returncode == 0, done.stderr
    assert "1,000 flows written to" in done.stdout
    assert pq.read_table(out).num_rows == 1000


def write_scenario(tmp_path: Path, file: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "fabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
        f"routing: {{strategy: dmodk}}\nworkload: {{kind: flows, file: {file}}}\n"
    )
    return path


def test_parquet_flow_file_relative_to_the_scenario(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"source": [0, 1], "destination": [2, 3], "bytes": [1e9, 1e9]}), tmp_path / "f.parquet"
    )
    done = cloudtwin("run", str(write_scenario(tmp_path, "f.parquet")), "--json")
    assert done.returncode == 0, done.stderr
    # two 1 GB flows on disjoint spines (destinations 2, 3 -> spines 0, 1): 0.08 s + 4 us
    assert json.loads(done.stdout)["completion_s"] == 0.080004


def test_bad_flow_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("source,destination,bytes\n0,2,1000\n1,host99,1000\n")
    done = cloudtwin("run", str(write_scenario(tmp_path, "f.csv")))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cloudtwin: error: workload.file f.csv: row 2, column destination: no host 'host99' (hosts 0-3)"
    ]
    missing = cloudtwin("run", str(write_scenario(tmp_path, "nothere.csv")))
    assert missing.returncode == 2 and "nothere.csv: no such flow file" in missing.stderr
    (tmp_path / "bad.parquet").write_text("not parquet")
    broken = cloudtwin("run", str(write_scenario(tmp_path, "bad.parquet")))
    assert broken.returncode == 2 and "not a readable Parquet file" in broken.stderr
    assert "Traceback" not in done.stderr + missing.stderr + broken.stderr


def _parquet(path: Path, rows: int = 2, tenant: list[str] | None = None) -> None:
    columns: dict[str, list[object]] = {
        "source": [0] * rows, "destination": [2] * rows, "bytes": [1e3] * rows,
    }
    if tenant is not None:
        columns["tenant"] = list(tenant)
    pq.write_table(pa.table(columns), path)


# With limits.flows = 10 a flow file may hold 512 x 10 + 4,096 = 9,216 bytes, as a CSV may.
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: _parquet(p, rows=11), "f.parquet: 11 rows, more than the 10 flows limits.flows allows"),
        # 10,000 random bytes as hex: a file of over 20,000 bytes
        (lambda p: _parquet(p, tenant=[os.urandom(10_000).hex(), "t"]),
         "f.parquet: the flow file is larger than 9,216 bytes, the most it may be; "
         "more than 10 flows can take (limits.flows)"),
        # two 10,000-character strings that compress to a small file but take 20,000 bytes read
        (lambda p: _parquet(p, tenant=["a" * 10_000, "b" * 10_000]),
         "f.parquet: more than 9,216 bytes of data uncompressed, more than 10 flows can take (limits.flows)"),
    ],
)
def test_a_parquet_flow_file_has_the_csv_cap(
    tmp_path: Path, make: Callable[[Path], None], message: str
) -> None:
    make(tmp_path / "f.parquet")
    done = cloudtwin("run", str(write_scenario(tmp_path, "f.parquet")), "--set", "limits.flows=10")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("cloudtwin: error: workload.file") and line.endswith(
        f"{message}; raise limits.flows for a longer list"
    )
    lifted = cloudtwin("run", str(write_scenario(tmp_path, "f.parquet")), "--set", "limits.flows=100",
                       "--json")
    assert "limits.flows" not in lifted.stderr


def test_a_parquet_flow_file_over_the_cap_is_refused_before_a_row_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_rows(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows were read")

    monkeypatch.setattr(pq.ParquetFile, "read", no_rows)
    monkeypatch.setattr(pq, "read_table", no_rows)
    for rows in (11, 1000):
        _parquet(tmp_path / "f.parquet", rows=rows)
        code = main(["run", str(write_scenario(tmp_path, "f.parquet")), "--set", "limits.flows=10"])
        assert code == 2 and f"{rows:,} rows, more than the 10 flows" in capsys.readouterr().err


def test_every_flow_finish_time_is_the_hand_computed_one(tmp_path: Path) -> None:
    # 2 leaves x 2 spines x 2 hosts, 100G links of 1 us, D-mod-k (spine = destination mod 2).
    # A 0->2 and B 1->2 share host2's downlink; B and D 1->3 (0.5 GB) share host1's uplink:
    # all three get 50 Gb/s. D is done at 4e9 / 50e9 = 0.08 s; A and B stay at 50 Gb/s (the
    # downlink still holds both) until 8e9 / 50e9 = 0.16 s. C 0->3 starts at 0.2 s alone:
    # 0.08 s later. Every finish adds the 4 hops' latency (4 us).
    (tmp_path / "f.csv").write_text(
        "source,destination,bytes,start\n0,2,1GB,0\n1,2,1GB,0\n0,3,1GB,0.2\n1,3,0.5GB,0\n"
    )
    out = tmp_path / "flows.parquet"
    done = cloudtwin("run", str(write_scenario(tmp_path, "f.csv")), "--flows-out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.column("source").to_pylist() == ["host0", "host1", "host0", "host1"]
    np.testing.assert_allclose(
        table.column("finish_s").to_pylist(), [0.160004, 0.160004, 0.280004, 0.080004], rtol=1e-12
    )
    np.testing.assert_allclose(table.column("start_s").to_pylist(), [0, 0, 0.2, 0], atol=0)
    assert json.loads(done.stdout)["completion_s"] == pytest.approx(0.280004, rel=1e-12)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,2,1000,\n1,host9,1000,\n", "row 2, column destination: no host 'host9' (hosts 0-3)"),
        ("0,2,-5,\n", "row 1, column bytes: size"),
        ("0,2,1000,host0/nic0 leaf0 leaf1 host2/nic0\n", "row 1, column path: not connected"),
        ("0,2,1000,\n0,2\n", "row 2 (line 3) has 2 fields, expected 4"),
    ],
    ids=["unknown host", "negative bytes", "path not connected", "malformed row"],
)
def test_bad_rows_through_the_cli_are_one_line_and_exit_2(tmp_path: Path, rows: str, message: str) -> None:
    (tmp_path / "f.csv").write_text("source,destination,bytes,path\n" + rows)
    out = tmp_path / "flows.parquet"
    done = cloudtwin("run", str(write_scenario(tmp_path, "f.csv")), "--flows-out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cloudtwin: error: workload.file f.csv: "), lines
    assert message in lines[0]
    assert not out.exists()
