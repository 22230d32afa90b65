"""`cloudtwin calibrate datapath|migration`: measure this machine and write a profile the
twin loads (`nic.profile: FILE`, `mobility.calibration: FILE`, `migrate plan --calibration`).

Each command also measures points the fit never uses and prints them against what the
loaded profile predicts through the model every run uses; `--check FILE` does that from
a profile file alone (no root, no QEMU).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_out_file
from cloudtwin.cli.output import emit_json, stdout, write_json, wrote
from cloudtwin.cli.profilefiles import read_json_file
from cloudtwin.errors import CalibrationError, NicError

__all__ = ["app", "datapath_rows"]

app = typer.Typer(
    help=(
        "Make the twin yours: measure this machine's host datapath (datapath, root) or its "
        "live migrations (migration, QEMU) and write a profile file that scenarios and "
        "commands load. --check FILE prints a profile's held-out points, measured against "
        "predicted, without measuring anything."
    ),
    no_args_is_help=True,
)

_JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
RULES = (10, 200)
"""The two security-group rule counts of the fit: the model's rules per port, and a long chain."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- datapath ----------------------------------------------------------------------------


def datapath_rows(document: object, where: str) -> list[dict[str, object]]:
    """The profile `document` loaded as every run loads it, and each of its whole-chain
    points (fitted and held out) with the packets per second of one core it predicts."""
    from cloudtwin.smartnic.calibration import predict_points
    from cloudtwin.smartnic.profiles import nic_profile_from_data

    if not isinstance(document, dict):
        raise NicError(f"{where}: not a datapath profile (a JSON object written by "
                       "cloudtwin calibrate datapath)")
    profile = nic_profile_from_data(document, where, where)
    points = document.get("points")
    if not isinstance(points, list):
        raise NicError(f"{where}: points: missing (a profile written by cloudtwin calibrate "
                       "datapath has them)")
    whole = [p for p in points if isinstance(p, dict) and p.get("configuration") == "vxlan"
             and not str(p.get("label", "")).startswith("new")]
    if not any(p.get("held_out") for p in whole):
        raise NicError(f"{where}: points: no held-out point of the whole chain to check")
    clock_hz = profile.host.clock_hz
    measured = []
    for p in whole:
        cycles = p.get("cycles_per_packet")
        if isinstance(cycles, bool) or not isinstance(cycles, int | float) or not cycles > 0:
            raise NicError(f"{where}: points: vxlan {p.get('label')}: cycles_per_packet must be positive")
        kind = "held out" if p.get("held_out") else "fitted"
        measured.append({"configuration": f"whole chain, {p.get('label')} ({kind})",
                         "frames": p.get("frames"), "packets_per_s_per_core": clock_hz / cycles})
    rows = predict_points(profile, measured, f"{where}: points")
    for row, p in zip(rows, whole, strict=True):
        row["held_out"] = bool(p.get("held_out"))
    return rows


def _datapath_table(rows: list[dict[str, object]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("configuration", "measured pps/core", "predicted pps/core", "error"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row["configuration"]), f"{row['measured_pps_per_core']:,.0f}",
                      f"{row['predicted_pps_per_core']:,.0f}", f"{row['error']:+.1%}")
    return table


def _show_datapath(document: dict[str, object], rows: list[dict[str, object]], source: str,
                   as_json: bool) -> None:
    held = [r for r in rows if r["held_out"]]
    worst = max(abs(float(r["error"])) for r in held)  # type: ignore[arg-type]
    if as_json:
        emit_json({"profile": source, "machine": document.get("machine"), "points": rows,
                   "held_out_worst_error": worst})
        return
    machine = document.get("machine") or {}
    assert isinstance(machine, dict)
    stdout.print(_datapath_table(rows, f"{source}: {machine.get('cpu')} at "
                                       f"{float(machine.get('clock_hz', 0)) / 1e9:.2f} GHz, Linux "
                                       f"{machine.get('kernel')}, {machine.get('date')}"))
    stdout.print(f"held-out points: worst error {worst:.1%} (predicted by the loaded profile through "
                 "the NIC model every run uses)")


_DATAPATH_OUT = typer.Option(Path("datapath-profile.json"), "--out", "-o", callback=check_out_file,
                             help="The profile file to write.")
_SECONDS = typer.Option(2.0, "--seconds", min=0.1, max=600, help="Sending time of one sample, in seconds.")
_ROUNDS = typer.Option(5, "--rounds", min=1, max=100, help="Samples per point; the median is kept.")
_CHECK = typer.Option(None, "--check", help="Measure nothing: load this profile file and print its "
                      "held-out points, measured against predicted.")


@app.command("datapath")
def datapath(
    out: Path = _DATAPATH_OUT,
    seconds: float = _SECONDS,
    rounds: int = _ROUNDS,
    check: Path | None = _CHECK,
    as_json: bool = _JSON,
) -> None:
    """Measure the Linux kernel's datapath on this machine and write a NIC profile.

    Needs root and Debian's trafgen (netsniff-ng) and nftables (make datapath-tools). In
    network namespaces a sender and a receiver are joined through a veth pair, a bridge,
    nftables security groups (10 and 200 rules), conntrack, tc htb and VXLAN, added one at
    a time; each function's cycles per packet and per byte are the difference to the
    configuration before it, at 64 B and 1,400 B frames. The whole chain is then measured
    at 512 B and at a mix the fit never sees, and printed against what the written
    profile predicts. About 4 minutes with the defaults.

    Load the profile with `nic.profile: ./datapath-profile.json` in a scenario or
    `--set nic.profile=datapath-profile.json`.

    Run it as root.

    Example:  cloudtwin calibrate datapath --out my-hosts.json
    """
    if check is not None:
        stored = read_json_file(check, "datapath profile", NicError)
        rows = datapath_rows(stored, str(check))
        assert isinstance(stored, dict)
        _show_datapath(stored, rows, str(check), as_json)
        return
    from cloudtwin.cli.measure import datapath as measure
    from cloudtwin.cli.measure.provenance import provenance
    from cloudtwin.smartnic.calibration import fit_profile

    reason = measure.missing()
    if reason:
        raise CalibrationError(f"calibrate datapath: {reason}")
    machine = measure.machine()
    points_count = 8 * 2 + 3
    _say(f"measuring {points_count} points, {rounds} x {seconds:g} s each (about "
         f"{points_count * rounds * (seconds + 0.5) / 60:.0f} min; load {os.getloadavg()[0]:.2f})")
    try:
        points = measure.run(seconds, rounds, RULES, float(machine["clock_hz"]), _say)  # type: ignore[arg-type]
    except RuntimeError as err:  # a step of the set-up, or a run that delivered nothing
        raise CalibrationError(f"calibrate datapath: {err}") from err
    cycles: dict[str, dict[str, float]] = {}
    for point in points:
        label, value = str(point["label"]), float(point["cycles_per_packet"])  # type: ignore[arg-type]
        cycles.setdefault(str(point["configuration"]), {})[label] = value
    document: dict[str, object] = {
        "kind": "cloudtwin datapath profile",
        "machine": machine,
        "provenance": provenance(),
        "method": ("trafgen UDP from one core through network namespaces; CPU time of trafgen's "
                   "processes and ksoftirqd from /proc; a function's cost is the difference to the "
                   "configuration before it, fitted on 64 B and 1,400 B frames; held-out points are "
                   "never used by the fit"),
        "settings": {"seconds": seconds, "rounds": rounds},
        "security_group_rules": list(RULES),
        **fit_profile(cycles, RULES),
        "points": points,
    }
    rows = datapath_rows(document, str(out))
    write_json(out, document)
    _show_datapath(document, rows, str(out), as_json)
    if not as_json:
        wrote(out)
