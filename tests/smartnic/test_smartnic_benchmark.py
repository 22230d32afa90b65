"""benchmarks/smartnic.py measures `nic run` end to end on what it says: the shipped captures
scaled to the packets asked for, half each way, every packet through read, process and
write (a small run in process; its figures are the benchmark's, not asserted)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from cloudtwin.p4 import index_pcap

REPO = Path(__file__).resolve().parents[2]


def _benchmark():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("smartnic_benchmark", REPO / "benchmarks" / "smartnic.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scaled_captures_hold_half_each_way_in_time_order(tmp_path: Path) -> None:
    files = _benchmark().scaled_captures(tmp_path, 2_001)
    assert [(origin, count) for _, origin, count in files] == [("host", 1_001), ("network", 1_000)]
    for path, _, count in files:
        times = index_pcap(path.read_bytes()).timestamp_ns
        assert times.size == count and (times[1:] > times[:-1]).all()


@pytest.mark.slow
def test_a_small_run_reports_every_figure(tmp_path: Path) -> None:
    options = argparse.Namespace(packets=4_000, repeat=1, cli=False, cli_repeat=1, all_cores=False)
    figures = _benchmark().measure(options)
    assert figures["packets"] == 4_000 and figures["in_process_packets_per_cpu_second"] > 0
    assert set(figures["phase_share"]) == {"read", "batch", "process", "output", "write"}
    assert figures["cli_packets_per_cpu_second"] is None and figures["load_average_before"]


@pytest.mark.slow
def test_whole_process_rounds_report_their_median_and_kernel_share(tmp_path: Path) -> None:
    """Each round runs the command on both files with a new cache folder (a user's first run,
    then start-up alone, then the files); the printed rate is the median round's."""
    options = argparse.Namespace(packets=2_000, repeat=1, cli=True, cli_repeat=3, all_cores=True)
    figures = _benchmark().measure(options)
    each = figures["cli_packets_per_cpu_second_each"]
    assert len(each) == 3 and figures["cli_packets_per_cpu_second"] == sorted(each)[1]
    assert figures["cli_user_s"] > 0 and figures["cli_system_s"] >= 0 and figures["cores"] == "all"
    assert figures["cli_first_startup_cpu_s"] > 0 and figures["cli_startup_cpu_s"] > 0
