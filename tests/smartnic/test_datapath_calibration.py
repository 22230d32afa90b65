"""`cloudtwin calibrate datapath`: the fit, the shipped profile checked against its own raw
points, held-out points predicted by the loaded profile through the NIC model, and a
scenario that loads a profile file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tests.cli.cli_helpers import REPO, cloudtwin

from cloudtwin.cli import calibrate
from cloudtwin.cli.app import main
from cloudtwin.cli.measure import datapath as measure
from cloudtwin.smartnic.calibration import fit_profile, line, predict_points
from cloudtwin.smartnic.placement import HostNic
from cloudtwin.smartnic.profiles import (
    DEFAULT_CHAIN,
    LINUX_KERNEL_PROFILE,
    PROFILES,
    SECURITY_GROUP_RULES,
    nic_profile_from_data,
)

SHIPPED = json.loads(LINUX_KERNEL_PROFILE.read_text())


def _points(per_packet: dict[str, float], per_byte: dict[str, float]) -> dict[str, dict[str, float]]:
    """Cycles at 64 B and 1,400 B of configurations with the given line each."""
    return {name: {f"{size} B": per_packet[name] + per_byte[name] * size for size in (64, 1400)}
            for name in per_packet}


def test_the_fit_is_the_difference_between_stages_by_hand() -> None:
    packet = {"veth": 10_000, "bridge": 12_000, "sg 10": 12_500, "sg 200": 16_300, "conntrack": 13_500,
              "htb": 14_000, "vxlan": 17_000}
    per_byte = {"veth": 0.5, "bridge": 0.5, "sg 10": 0.5, "sg 200": 0.5, "conntrack": 1.0, "htb": 1.0,
                "vxlan": 2.0}
    cycles = _points(packet, per_byte)
    cycles["conntrack"]["new conns 64 B"] = cycles["conntrack"]["64 B"] + 700
    fitted = fit_profile(cycles, (10, 200))
    assert fitted["base"] == pytest.approx({"cycles_per_packet": 10_000, "cycles_per_byte": 0.5})
    functions = fitted["functions"]
    # overlay: bridge - veth (2,000) plus vxlan - htb (3,000, +1 cycle/B)
    assert functions["overlay"] == pytest.approx({"cycles_per_packet": 5_000, "cycles_per_byte": 1.0})
    # 3,800 cycles for 190 more rules: 20 a rule; 500 at 10 rules, less 10 x 20
    assert functions["security-groups"] == pytest.approx(
        {"cycles_per_packet": 300, "cycles_per_byte": 0.0, "cycles_per_rule": 20})
    assert functions["conntrack"] == pytest.approx(
        {"cycles_per_packet": 1_000, "cycles_per_byte": 0.5, "cycles_per_new_connection": 700})
    assert functions["rate-limiter"] == pytest.approx({"cycles_per_packet": 500, "cycles_per_byte": 0.0})


def test_the_loaded_profile_is_the_fit_of_its_raw_points() -> None:
    """The shipped profile's functions are the fit of the raw points stored beside them, and
    the loaded profile holds them (security groups at the model's rules per port)."""
    cycles: dict[str, dict[str, float]] = {}
    for point in SHIPPED["points"]:
        samples = [s["cycles_per_packet"] for s in point["samples"]]
        assert point["cycles_per_packet"] == pytest.approx(float(np.median(samples)))
        assert all(len(s["load_average"]) == 3 for s in point["samples"])
        cycles.setdefault(point["configuration"], {})[point["label"]] = point["cycles_per_packet"]
    refit = fit_profile(cycles, tuple(SHIPPED["security_group_rules"]))
    assert refit["base"] == pytest.approx(SHIPPED["base"])
    for name, cost in refit["functions"].items():
        assert cost == pytest.approx(SHIPPED["functions"][name])
    profile = PROFILES["linux-kernel"]
    sg = SHIPPED["functions"]["security-groups"]
    expected = sg["cycles_per_packet"] + sg["cycles_per_rule"] * SECURITY_GROUP_RULES
    assert profile.cost("security-groups").cycles_per_packet == pytest.approx(max(expected, 0.0))
    assert profile.host_base is not None
    assert profile.host_base.cycles_per_packet == pytest.approx(SHIPPED["base"]["cycles_per_packet"])
    assert profile.host.clock_hz == SHIPPED["machine"]["clock_hz"]
    assert SHIPPED["provenance"]["command"][:3] == ["cloudtwin", "calibrate", "datapath"]
    assert SHIPPED["provenance"]["commit"]


def test_the_held_out_points_are_within_20_percent_through_the_model() -> None:
    rows = calibrate.datapath_rows(SHIPPED, "linux-kernel.json")
    held = [r for r in rows if r["held_out"]]
    assert [r["configuration"] for r in held] == [
        "whole chain, 512 B (held out)", "whole chain, mix (held out)"]
    assert all(abs(r["error"]) <= 0.20 for r in held), held


def test_a_prediction_is_the_host_tier_of_the_model_by_hand() -> None:
    """clock / (base + the chain's clamped costs, at the mix's sizes weighted by count):
    what capacity.tier_packets_per_s gives for one core, no formula of its own."""
    profile = PROFILES["linux-kernel"]
    costs = [profile.cost(f) for f in DEFAULT_CHAIN]
    assert profile.host_base is not None
    costs.append(profile.host_base)
    mix = [(64, 7), (576, 4), (1400, 1)]
    cycles = sum(count * sum(c.cycles_per_packet + c.cycles_per_byte * size for c in costs)
                 for size, count in mix) / 12
    [row] = predict_points(profile, [{"configuration": "mix", "frames": mix, "packets_per_s_per_core": 1e5}])
    assert row["predicted_pps_per_core"] == pytest.approx(profile.host.clock_hz / cycles)
    # the host tier pays the datapath's own cost once any function runs there, never on its own
    nic = HostNic(profile, {f: "host" for f in DEFAULT_CHAIN})
    assert nic.load("host").cycles_per_packet == pytest.approx(sum(c.cycles_per_packet for c in costs))
    assert HostNic(profile, {}).load("host").cycles_per_packet == 0.0


def test_check_prints_the_shipped_profile_measured_against_predicted() -> None:
    done = cloudtwin("calibrate", "datapath", "--check", str(LINUX_KERNEL_PROFILE), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["points"] == calibrate.datapath_rows(SHIPPED, str(LINUX_KERNEL_PROFILE))
    assert document["held_out_worst_error"] <= 0.20


def test_a_scenario_loads_a_profile_file(tmp_path: Path) -> None:
    """`nic.profile: FILE` in the scenario (relative to it) and `--set nic.profile=FILE`
    (relative to the current directory) give the same offload as the built-in profile
    from the same file."""
    scenario = tmp_path / "hosts.yaml"
    text = (REPO / "examples" / "smartnic.yaml").read_text()
    shutil.copy(LINUX_KERNEL_PROFILE, tmp_path / "my-hosts.json")
    scenario.write_text(text.replace("profile: janus-100g", "profile: ./my-hosts.json").replace(
        "tier: pipeline", "tier: host").replace("tier: nic-cores", "tier: host"))
    from_file = cloudtwin("nic", "offload", str(scenario), "--json")
    assert from_file.returncode == 0, from_file.stderr
    built_in = cloudtwin("nic", "offload", str(scenario), "--set", "nic.profile=linux-kernel", "--json")
    assert built_in.returncode == 0, built_in.stderr
    left, right = json.loads(from_file.stdout), json.loads(built_in.stdout)
    assert left["totals"] == right["totals"] and left["totals"]["host_cores"] > 0
    typed = cloudtwin("nic", "offload", str(scenario), "--set", "nic.profile=my-hosts.json", "--json",
                      cwd=tmp_path)
    assert typed.returncode == 0 and json.loads(typed.stdout)["totals"] == left["totals"]


@pytest.mark.parametrize(("value", "says"), [
    ("./absent.json", "nic.profile: "),
    ("fast-nic", "unknown profile 'fast-nic'"),
])
def test_a_bad_profile_reference_is_one_line(tmp_path: Path, value: str, says: str) -> None:
    done = cloudtwin("nic", "offload", "examples/smartnic.yaml", "--set", f"nic.profile={value}")
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_broken_profile_file_names_its_key(tmp_path: Path) -> None:
    broken = json.loads(json.dumps(SHIPPED))
    broken["functions"]["overlay"]["cycles_per_byte"] = "fast"
    (tmp_path / "p.json").write_text(json.dumps(broken))
    done = cloudtwin("calibrate", "datapath", "--check", str(tmp_path / "p.json"))
    assert done.returncode == 2 and "functions.overlay.cycles_per_byte" in done.stderr
    with pytest.raises(Exception, match="base: missing"):
        nic_profile_from_data({k: v for k, v in SHIPPED.items() if k != "base"}, "p.json")


def test_without_root_or_trafgen_it_says_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(measure.os, "geteuid", lambda: 1000)
    assert main(["calibrate", "datapath"]) == 2
    assert "needs root" in capsys.readouterr().err
    monkeypatch.setattr(measure.os, "geteuid", lambda: 0)
    monkeypatch.setattr(measure.shutil, "which", lambda tool: None if tool == "trafgen" else "/bin/" + tool)
    assert main(["calibrate", "datapath"]) == 2
    err = capsys.readouterr().err
    assert "trafgen not installed" in err and "apt-get install netsniff-ng" in err
    assert "make datapath-tools" in err


def test_line_through_two_sizes() -> None:
    assert line({"64 B": 1064.0, "1400 B": 2400.0}) == (1000.0, 1.0)


def test_the_docs_tables_are_the_shipped_profile() -> None:
    """docs/smartnic.md shows the shipped profile's points and what --check prints for it."""
    doc = (REPO / "docs" / "smartnic.md").read_text()
    cycles = {(p["configuration"], p["label"]): p["cycles_per_packet"] for p in SHIPPED["points"]}
    for name in ("veth", "bridge", "sg 10", "sg 200", "conntrack", "htb", "vxlan"):
        shown = name if name != "vxlan" else "vxlan (whole chain)"
        row = f"| {shown} | {cycles[name, '64 B']:,.0f} | {cycles[name, '1400 B']:,.0f} |"
        assert row in doc, row
    for row in calibrate.datapath_rows(SHIPPED, "shipped"):
        label = str(row["configuration"]).replace("1400 B", "1,400 B")
        line = (f"| {label} | {row['measured_pps_per_core']:,.0f} | {row['predicted_pps_per_core']:,.0f} | "
                f"{row['error']:+.1%} |")
        assert line in doc, line
    machine = SHIPPED["machine"]
    assert f"at {machine['clock_hz'] / 1e9:.2f} GHz, Linux {machine['kernel']}" in doc


def test_a_sweep_varies_profile_files_and_keys_its_points_on_their_content(tmp_path: Path) -> None:
    from cloudtwin.sweep import Task

    shutil.copy(LINUX_KERNEL_PROFILE, tmp_path / "hosts.json")
    done = cloudtwin("sweep", str(REPO / "examples" / "leaf-spine-perftest.yaml"), "--vary",
                     "nic.profile=linux-kernel,hosts.json", "--db", str(tmp_path / "s.duckdb"), "--json",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["run"]["failed"] == 0
    means = {g["values"]["nic.profile"]: g["mean"] for g in result["summary"]["groups"]}
    assert means["hosts.json"] == means["linux-kernel"]  # the same measurement, by name or by file
    text = (REPO / "examples" / "leaf-spine-perftest.yaml").read_text()
    one = Task(text, "s.yaml", files=(("hosts.json", json.dumps(SHIPPED)),))
    other = Task(text, "s.yaml", files=(("hosts.json", json.dumps({**SHIPPED, "base": {}})),))
    assert one.digest != other.digest  # a re-measured profile is a new point, not a stored one
