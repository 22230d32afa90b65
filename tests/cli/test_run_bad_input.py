"""Bad input to the simulation commands: outputs checked first, nothing silently ignored."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from tests.cli.cli_helpers import REPO
from tests.conftest import LOGHUB

from cloudtwin.cli.app import main
from cloudtwin.errors import ScenarioError
from cloudtwin.faults.events import expand_faults
from cloudtwin.scenario import load_scenario
from cloudtwin.topology.builders import build_topology

EXAMPLES = REPO / "examples"
TINY = (
    "name: tiny\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
    "workload: {pattern: permutation, size: 16MiB}\n"
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


@pytest.mark.parametrize("command", ["run", "compare", "nccl-tests"])
def test_out_onto_a_folder_fails_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # the whole simulation used to run first, then fail with a traceback
    err = one_line_error(capsys, command, str(tmp_path / "missing.yaml"), "--out", str(tmp_path))
    assert "is a folder" in err


def test_out_in_a_place_that_cannot_be_written_fails_first(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "cannot write in /proc" in one_line_error(capsys, "run", str(tiny), "--out", "/proc/r.json")


@pytest.mark.parametrize(("plot", "reason"), [("s.jpg", "must end in"), ("/proc/s.png", "cannot write")])
def test_a_bad_plot_path_fails_before_training(
    capsys: pytest.CaptureFixture[str], plot: str, reason: str
) -> None:
    err = one_line_error(capsys, "train", str(EXAMPLES / "vela.yaml"), "--plot", plot)
    assert reason in err


def test_evaluate_out_onto_a_file_fails_first(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "is a file" in one_line_error(capsys, "evaluate", str(tiny), "--out", str(tiny))


def test_json_out_gets_the_usual_mode_and_keeps_a_replaced_files_mode(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.json"
    kept.write_text("{}")
    kept.chmod(0o644)
    umask = os.umask(0o022)
    try:
        for path in (fresh, kept):
            assert run(capsys, "run", str(tiny), "--out", str(path))[0] == 0
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # was 0600
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644
    assert json.loads(kept.read_text())["scenario"] == "tiny"


@pytest.mark.parametrize("command", ["run", "compare"])
def test_run_and_compare_refuse_faults_they_would_ignore(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # they used to simulate the default permutation instead of the example's two jobs
    err = one_line_error(capsys, command, str(EXAMPLES / "resiliency.yaml"))
    assert "faults:" in err and "evaluate" in err


def test_run_refuses_faults_even_on_a_link_that_does_not_exist(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny.write_text(TINY + "faults: [{kind: link, target: leaf9-spine7, at: 0s}]\n")
    assert "faults:" in one_line_error(capsys, "run", str(tiny))


def _capacity_during(capacity: str) -> float:
    scenario = load_scenario(
        TINY + f"faults: [{{kind: link, target: leaf0-spine1, at: 0s, capacity: {capacity}}}]\n",
        "s.yaml",
    )
    topology = build_topology(scenario)
    states = expand_faults(scenario.faults, topology, 1)
    if not states:
        return float(topology.capacity_bps.min())
    return float(np.min(states[0].capacity_bps))


def test_capacity_100_percent_means_unchanged_not_one_bit_per_second() -> None:
    assert _capacity_during("100%") == 100e9
    assert _capacity_during("50%") == 50e9
    assert _capacity_during("40Gbps") == 40e9


@pytest.mark.parametrize("capacity", ["150%", "0%", "1bps"])
def test_capacity_above_100_percent_or_ambiguous_is_refused(capacity: str) -> None:
    with pytest.raises(ScenarioError, match="faults.0.capacity"):
        _capacity_during(capacity)


def test_evaluate_with_a_degradation_that_changes_nothing_reports_no_harm(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # zip() of unequal lengths used to crash evaluate here
    tiny.write_text(
        TINY + "faults: [{kind: link, target: leaf0-spine1, at: 0s, until: 1s, capacity: 100Gbps}]\n"
    )
    code, out, err = run(capsys, "evaluate", str(tiny), "--strategies", "ecmp", "--json",
                         "--out", str(tmp_path / "report"), "--no-store")
    assert code == 0, err
    resiliency = json.loads(out)["strategies"]["ecmp"]["resiliency"]
    assert (resiliency["flows_affected"], resiliency["bytes_delayed"], resiliency["dip"]) == (
        0, 0.0, 0.0,
    )


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["compare", "{tiny}", "--strategies", "ecmp,ecmp"], "ecmp named twice"),
        (["nccl-tests", "{tiny}", "--strategies", "pinning,ecmp,pinning"], "pinning named twice"),
        (["run", "{tiny}", "--set", "tenants=[{name: a, vni: 7, hosts: '0-1'}, "
          "{name: b, vni: 7, hosts: '2-3'}]"], "tenants.1.vni: VNI 7 is already used by tenant 'a'"),
        (["run", "{tiny}", "--set", "workload.pattern=shift", "--set", "workload.shift=101"],
         "workload.shift: 101 is not below the 4 hosts"),
        (["hpl", str(EXAMPLES / "vela-hpl.yaml"), "--set", "workload.n=1", "--set", "workload.nb=1"],
         "workload.n: N=1 gives some of the"),
        (["nccl-tests", str(EXAMPLES / "routing-strategies.yaml"), "--op", "allgather", "-b", "1",
          "-e", "1M"], "-b: 1 bytes gives a count of 0"),
        (["run", "{empty}"], "the scenario is empty"),
    ],
)
def test_inputs_once_accepted_with_a_wrong_result_are_refused(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], reason: str
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    line = [a.replace("{tiny}", str(tiny)).replace("{empty}", str(empty)) for a in args]
    assert reason in one_line_error(capsys, *line)


def test_an_empty_mask_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    log = LOGHUB / "HDFS" / "HDFS_2k.log"
    err = one_line_error(capsys, "logs", "parse", str(log), "-f", "hdfs", "--mask", "")
    assert "mask: an empty pattern" in err


@pytest.mark.parametrize("command", [["run"], ["logs", "sql"], ["nccl-tests"]])
def test_help_shows_flags_without_a_bool_type(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0 and "--json" in out and "<bool>" not in out


def test_a_table_written_to_a_pipe_keeps_whole_numbers(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "cloudtwin.cli.app", "nccl-tests",
         str(EXAMPLES / "routing-strategies.yaml"), "-b", "1G", "-e", "1G", "--strategies",
         "ecmp,pinning"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "1073741824" in done.stdout and "268435456" in done.stdout and "…" not in done.stdout


@pytest.mark.parametrize(
    ("preset", "line"),
    [
        ("linux", "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure;"),
        ("openssh", "Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking"),
    ],
)
def test_the_host_is_not_stored_as_level_or_component(preset: str, line: str) -> None:
    from cloudtwin.ops import PRESETS

    fmt = PRESETS[preset].format
    fields = fmt.parse(line)
    assert fields is not None and fields["Host"] in ("combo", "LabSZ")
    assert fmt.level_field is None
    assert fields[fmt.component_field or ""] in ("sshd(pam_unix)", "sshd")
