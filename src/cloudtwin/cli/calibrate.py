"""`cloudtwin calibrate datapath|migration`: measure this machine and write a profile the
twin loads (`nic.profile: FILE`, `mobility.calibration: FILE`, `migrate plan --calibration`).

Each command also measures points the fit never uses and prints them against what the
loaded profile predicts through the model every run uses; `--check FILE` does that from
a profile file alone (no root, no QEMU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_out_file
from cloudtwin.cli.output import emit_json, stdout, write_json, wrote
from cloudtwin.cli.profilefiles import read_json_file
from cloudtwin.errors import CalibrationError, NicError

__all__ = ["app", "datapath_rows", "migration_rows"]

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
    origin = provenance()  # the code as it was when the measurement began
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
        "provenance": origin,
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


# -- migration ---------------------------------------------------------------------------

MIB = 1 << 20
QEMU_PACKAGES = "qemu-system-x86 busybox-static linux-image-cloud-amd64 gcc libc6-dev cpio"


def migration_rows(document: object, where: str) -> tuple[list[dict[str, object]], dict[str, int]]:
    """The migration profile `document` loaded as `migrate plan --calibration` loads it,
    and each of its held-out migrations graded against what the plan predicts."""
    from cloudtwin.mobility.calibration import calibration_from_data
    from cloudtwin.mobility.check import grade, summary

    calibration = calibration_from_data(document, where)
    assert isinstance(document, dict)
    rows = grade(document.get("held_out"), calibration, f"{where}: held_out")
    return rows, summary(rows)


def _pair(measured: object, predicted: object, scale: float, digits: int) -> str:
    def shown(value: object) -> str:
        return "-" if value is None else f"{float(value) * scale:.{digits}f}"  # type: ignore[arg-type]
    return f"{shown(measured)} / {shown(predicted)}"


def _mark(check: object) -> str:
    return "-" if check is None else ("ok" if check else "MISS")


def _show_migration(document: dict[str, object], rows: list[dict[str, object]], totals: dict[str, int],
                    source: str, as_json: bool) -> None:
    if as_json:
        emit_json({"profile": source, "machine": document.get("machine"),
                   "parameters": document.get("parameters"), "held_out": rows, "summary": totals})
        return
    machine = document.get("machine") or {}
    assert isinstance(machine, dict)
    table = Table(title=f"{source}: {machine.get('qemu')} ({machine.get('accel')}), {machine.get('date')}; "
                        "measured / predicted", title_justify="left")
    for column in ("mem MiB", "ws MiB", "dirty MiB/s", "cap MiB/s", "limit ms", "converges",
                   "total s", "downtime ms", "MB sent", "total, bytes, downtime"):
        table.add_column(column)
    for row in rows:
        plan, measured, predicted = row["request"], row["measured"], row["predicted"]
        assert isinstance(plan, dict) and isinstance(measured, dict) and isinstance(predicted, dict)
        cap = plan.get("max_bandwidth")
        converged = predicted["converged"] or None
        table.add_row(
            f"{plan['memory'] / MIB:g}", f"{plan.get('working_set', 0) / MIB:g}",
            f"{plan.get('dirty_rate', 0) / 8 / MIB:g}", "-" if cap is None else f"{cap / 8 / MIB:g}",
            f"{plan.get('downtime_limit', 0.3) * 1000:g}",
            f"{'yes' if measured['converged'] else 'no'} / {'yes' if predicted['converged'] else 'no'}",
            _pair(measured["total_time_s"], converged and predicted["total_time_s"], 1, 2),
            _pair(measured["downtime_s"], converged and predicted["downtime_s"], 1e3, 1),
            _pair(measured["bytes"], converged and predicted["bytes"], 1e-6, 1),
            ", ".join(_mark(row[k]) for k in ("total_ok", "bytes_ok", "downtime_ok")),
        )
    stdout.print(table)
    stdout.print(
        f"{totals['met_every_target']} of {totals['migrations']} held-out migrations meet every target "
        f"(classified right {totals['classified_right']}; of {totals['compared']} that both converged: total "
        f"time {totals['total_time_within_15pct']}, bytes {totals['bytes_within_15pct']} within 15 %, "
        f"downtime {totals['downtime_within_bound']} within max(50 %, 10 ms))")
    loads = document.get("load_average")
    if isinstance(loads, dict) and loads.get("fit") and loads.get("held_out"):
        fit, held = loads["fit"], loads["held_out"]
        nice = machine.get("qemu_nice")
        stdout.print(f"load average (1 min) {fit[0]:.1f}-{fit[1]:.1f} during the fit's stop-and-copy runs, "
                     f"{held[0]:.1f}-{held[1]:.1f} during the held-out migrations"
                     + ("" if nice is None else f"; QEMU at nice {nice}")
                     + ("; guest memory preallocated" if machine.get("prealloc") else ""))


def _plan_of(trial: object, idle: dict[str, object], path_bps: float) -> dict[str, object]:
    """What a user passes to `migrate plan` for a migration of the calibration guest (as
    the flags spell it: --memory 384MiB ... --set protected=false)."""
    from cloudtwin.mobility.calibration import guest_resident_bytes

    t = trial.__dict__
    memory, working_set = t["memory_mib"] * MIB, t["dirty_mib"] * MIB
    stats = idle[str(t["memory_mib"])]
    assert isinstance(stats, dict)
    return {
        "memory": f"{t['memory_mib']}MiB",
        "working_set": f"{t['dirty_mib']}MiB",
        "dirty_rate": f"{t['rate_mib_s']:g}MiB/s",
        "resident": f"{min(memory, guest_resident_bytes(stats, working_set))}B",
        "bandwidth": f"{path_bps:.0f}bps",
        "max_bandwidth": f"{t['bandwidth_mib_s']:g}MiB/s",
        "downtime_limit": f"{t['downtime_limit_ms']}ms",
        "timeout": f"{t['give_up_s']:g}s",
        "protected": False,  # QEMU migrates in clear text here
    }


def _measured_of(stats: dict[str, object]) -> dict[str, object]:
    """QEMU's figures for one migration (a completed migration whose times QEMU never set
    has none: it counts as a miss)."""
    ok = stats.get("status") == "completed" and not stats.get("cancelled")
    ram = stats.get("ram") or {}
    assert isinstance(ram, dict)
    timed = ok and bool(stats.get("total-time"))
    return {
        "converged": ok,
        "total_time_s": float(stats["total-time"]) / 1000 if timed else None,  # type: ignore[arg-type]
        "downtime_s": float(stats.get("downtime") or 0) / 1000 if timed else None,  # type: ignore[arg-type]
        "bytes": float(ram.get("transferred", 0)) if ok else None,
    }


_MIGRATION_OUT = typer.Option(Path("migration-profile.json"), "--out", "-o", callback=check_out_file,
                              help="The profile file to write (written after the fit, then after each "
                              "held-out migration).")
_TRIES = typer.Option(5, "--tries", min=1, max=50, help="Tries of each calibration run.")
_HELD_OUT = typer.Option(10, "--held-out", min=0, max=200,
                         help="Random migrations drawn after the fit, measured and predicted.")
_SEED = typer.Option(None, "--seed", min=0, max=2**32 - 1,
                     help="Seed of the held-out draw (default: a fresh one, written to the profile "
                     "before the draw).")
_PREALLOC = typer.Option(False, "--prealloc",
                         help="Start both QEMU processes with their guest memory faulted in "
                         "(-mem-prealloc, as VMs whose memory is pinned for GPU or NIC passthrough "
                         "have it): the destination then takes no page fault for a page it never held.")
_NICE = typer.Option(-10, "--nice", min=-20, max=19,
                     help="Niceness of the QEMU processes, so that other work on the machine slows "
                     "the measured migrations less (below 0 needs root; --nice 0 without).")


@app.command("migration")
def migration(
    out: Path = _MIGRATION_OUT,
    tries: int = _TRIES,
    held_out: int = _HELD_OUT,
    seed: int | None = _SEED,
    nice: int = _NICE,
    prealloc: bool = _PREALLOC,
    check: Path | None = _CHECK,
    as_json: bool = _JSON,
) -> None:
    """Calibrate the live-migration model with real QEMU migrations and write a migration profile.

    Needs Debian's QEMU, busybox-static, the cloud kernel and a C compiler (make qemu
    installs them); uses KVM when a KVM guest boots here, TCG otherwise. Idle guests of
    128-512 MiB, stop-and-copy runs of first-time and re-sent pages and the loopback
    socket buffer give the profile's rates, buffer and resume time (about 5 minutes on
    TCG with the defaults); then --held-out random migrations are drawn with --seed,
    measured, and printed against what `migrate plan --calibration` predicts (about
    another 3 minutes for 10).

    Load the profile with `migrate plan --calibration FILE` or `mobility.calibration:
    FILE` in a scenario.

    Example:  cloudtwin calibrate migration --out my-hosts-migration.json
    """
    if check is not None:
        from cloudtwin.errors import MobilityError

        stored = read_json_file(check, "migration profile", MobilityError)
        rows, totals = migration_rows(stored, str(check))
        assert isinstance(stored, dict)
        _show_migration(stored, rows, totals, str(check), as_json)
        return
    document = _measure_migrations(out, tries, held_out, seed, nice, prealloc)
    rows, totals = migration_rows(document, str(out))
    _show_migration(document, rows, totals, str(out), as_json)
    if not as_json:
        wrote(out)


def _loads(runs: list[object]) -> list[float]:
    """The lowest and highest 1-minute load average at the end of `runs` (QEMU statistics)."""
    seen = [float(r["load_average"][0]) for r in runs
            if isinstance(r, dict) and r.get("load_average")]
    return [min(seen), max(seen)] if seen else []


def _measure_migrations(out: Path, tries: int, count: int, seed: int | None, nice: int, prealloc: bool
                        ) -> dict[str, object]:
    import secrets
    import time

    from cloudtwin.cli.measure import migration as measure
    from cloudtwin.cli.measure import qemu_guest as qg
    from cloudtwin.cli.measure.provenance import provenance
    from cloudtwin.mobility.calibration import fit_parameters

    reason = qg.missing_reason()
    if reason:
        raise CalibrationError(f"calibrate migration: {reason}; apt-get install {QEMU_PACKAGES} "
                               "(make qemu installs them)")
    if not qg.priority_allowed(nice):
        raise CalibrationError(f"calibrate migration: --nice {nice} needs root (run it with sudo, or "
                               "pass --nice 0)")
    seed = secrets.randbits(32) if seed is None else seed
    origin = provenance(seed)  # the code as it was when the measurement began
    try:
        with qg.workspace() as work:
            initrd = qg.build_initramfs(work)
            accel = qg.pick_accel(work, initrd)
            _say(f"accelerator: {accel}" + ("" if accel == "kvm" else " (no KVM guest boots here)"))
            _say(f"QEMU at nice {nice}{', guest memory preallocated' if prealloc else ''}; "
                 f"load {os.getloadavg()[0]:.2f}")
            calibration = measure.calibrate(work, initrd, accel, list(measure.RANDOM_MEMORY_MIB), tries, _say,
                                            nice, prealloc)
            calibration["load_average"] = list(os.getloadavg())
            parameters = fit_parameters(calibration)
            document: dict[str, object] = {
                "kind": "cloudtwin migration profile",
                "machine": {"qemu": measure.qemu_version(), "accel": accel, "cpus": os.cpu_count(),
                            "kernel": os.uname().release, "date": time.strftime("%Y-%m-%d"),
                            "qemu_nice": nice, "prealloc": prealloc},
                "provenance": origin,
                "method": ("real QEMU migrations between two local QEMU processes over loopback TCP; "
                           "parameters fitted on the calibration runs only; held-out migrations drawn "
                           "with the seed after the fit was written"),
                "parameters": parameters,
                "calibration": calibration,
                "held_out_draw": {"count": count, "seed": seed},
                "load_average": {"fit": _loads(calibration["switchover"]), "held_out": []},  # type: ignore[arg-type]
                "held_out": [],
            }
            write_json(out, document)  # the fit is on record before anything is drawn
            _say(f"fit: {json.dumps(parameters)}; wrote {out}")
            entries: list[dict[str, object]] = []
            for number, trial in enumerate(measure.draw(count, seed), 1):
                stats = qg.migrate(work, initrd, accel, trial, nice, prealloc)
                plan = _plan_of(trial, calibration["idle"], parameters["path_bandwidth_bps"])  # type: ignore[arg-type]
                entries.append({"trial": trial.__dict__, "plan": plan, "measured": _measured_of(stats),
                                "qemu": stats})
                document["held_out"] = entries
                document["load_average"] = {"fit": _loads(calibration["switchover"]),  # type: ignore[arg-type]
                                            "held_out": _loads([e["qemu"] for e in entries])}
                write_json(out, document)
                _say(f"held-out {number}/{count} {trial}: {stats.get('status')}"
                     f"{' (cancelled)' if stats.get('cancelled') else ''} (load {os.getloadavg()[0]:.2f}, "
                     f"first touch {stats['first_touch_bps'] / 8e6:.0f} MB/s)")
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        raise CalibrationError(f"calibrate migration: {err}") from err
    return document
