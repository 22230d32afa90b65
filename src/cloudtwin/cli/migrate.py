"""`cloudtwin migrate plan|run`: live VM migration what-ifs and migrations inside a running scenario."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from cloudtwin.cli.checks import check_out_file, check_plot_file, check_scenario_file
from cloudtwin.cli.output import (
    emit_json,
    is_cloud_file,
    progress_bar,
    read_cloud,
    read_scenario,
    stdout,
    write_json,
    wrote,
)
from cloudtwin.errors import MobilityError
from cloudtwin.store.defaults import DEFAULT_DB

if TYPE_CHECKING:
    from cloudtwin.mobility.calibration import MigrationCalibration
    from cloudtwin.mobility.precopy import MigrationResult
    from cloudtwin.scenario.mobility import PlanRequest

Named = Sequence[tuple[str, "MigrationResult"]]
"""Migrations to show: each VM's name and its result."""

__all__ = ["app"]

app = typer.Typer(
    help=(
        "Live VM migration between clouds: how long it takes, how long the VM stops, what "
        "it costs the tenants sharing the path.\n\n"
        "Example:  cloudtwin migrate plan --memory 4GiB --dirty-rate 50MiB/s "
        "--working-set 1GiB --bandwidth 1Gbps"
    ),
    no_args_is_help=True,
)

_JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
_PLOT = typer.Option(
    None, "--plot", help="Write a plot of the rounds (PNG) to this file.", callback=check_plot_file
)
_PLAN_SCENARIO = typer.Argument(
    None,
    help="Plan the migrations of this scenario (each alone on its path) instead of flags.",
    show_default=False,
    callback=check_scenario_file,
)
_RUN_SCENARIO = typer.Argument(
    ...,
    help="Scenario YAML file with mobility.clouds, vms and migrations.",
    show_default=False,
    callback=check_scenario_file,
)
_OUT = typer.Option(
    None, "--out", "-o", help="Also write the JSON result to this file.", callback=check_out_file
)
_DB_OPTION = typer.Option(None, "--db", help=f"Store the run in this DuckDB file (e.g. {DEFAULT_DB}).")
_SET = typer.Option(None, "--set", "-s", help="Override a scenario key: --set mobility.wan.bandwidth=1Gbps.")
_PLAN_SET = typer.Option(
    None,
    "--set",
    "-s",
    help="Override a scenario key (--set mobility.wan.bandwidth=1Gbps); without a scenario, set any "
    "knob of the plan that has no flag of its own: --set resume=5ms, --set protected=false, --set "
    "sync_period=50ms (the keys of a scenario's migration).",
)
_CALIBRATION = typer.Option(
    None,
    "--calibration",
    help="A migration profile written by cloudtwin calibrate migration: its stop-and-copy rates, "
    "socket buffer, resume, set-up and sync times, unless set here (with a scenario: as "
    "mobility.calibration).",
)


@app.command("plan")
def plan(
    ctx: typer.Context,
    scenario: Path | None = _PLAN_SCENARIO,
    memory: str | None = typer.Option(None, "--memory", help="VM memory, e.g. 4GiB."),
    dirty_rate: str = typer.Option(
        "0", "--dirty-rate", help="Rate at which the VM dirties pages, e.g. 50MiB/s."
    ),
    working_set: str = typer.Option(
        "0", "--working-set", help="Writable working set (pages it keeps dirtying)."
    ),
    resident: str | None = typer.Option(
        None, "--resident", help="Memory holding data (default: all); the rest is zero pages."
    ),
    working_set_at: str = typer.Option(
        "spread",
        "--working-set-at",
        help="Where the working set sits in the order memory is scanned: spread (evenly), "
        "first or last.",
    ),
    write_order: str = typer.Option(
        "random",
        "--write-order",
        help="How the VM writes its working set: random, or ascending/descending (in turn, "
        "along or against the scan; needs --working-set-at first or last).",
    ),
    bandwidth: str = typer.Option("10Gbps", "--bandwidth", help="Bandwidth of the path."),
    downtime_limit: str = typer.Option(
        "300ms", "--downtime-limit", help="Longest pause allowed (QEMU: 300ms)."
    ),
    final_bandwidth: str | None = typer.Option(
        None,
        "--final-bandwidth",
        help="Stop-and-copy rate of pages the destination never held (default: the path's).",
    ),
    resent_bandwidth: str | None = typer.Option(
        None,
        "--resent-bandwidth",
        help="Stop-and-copy rate of pages the destination already holds (default: the final bandwidth).",
    ),
    socket_buffer: str | None = typer.Option(
        None, "--socket-buffer", help="Bytes the path buffers between the two QEMUs (default: 0)."
    ),
    resume: str | None = typer.Option(
        None, "--resume", help="Fixed part of a pause: stop, device state, start (default: 10ms)."
    ),
    calibration: Path | None = _CALIBRATION,
    max_bandwidth: str | None = typer.Option(
        None, "--max-bandwidth", help="Cap on the live rounds (QEMU's max-bandwidth)."
    ),
    auto_converge: bool = typer.Option(
        False, "--auto-converge", help="Throttle the vCPUs while dirtying outpaces sending."
    ),
    postcopy: bool = typer.Option(False, "--postcopy", help="Switch to post-copy after the first round."),
    xbzrle: bool = typer.Option(False, "--xbzrle", help="XBZRLE-compress re-sent pages."),
    multifd: int = typer.Option(1, "--multifd", help="Number of migration streams."),
    policy: str = typer.Option(
        "abort", "--policy", help="When it does not converge: abort, raise-downtime, auto-converge, postcopy."
    ),
    storage: str = typer.Option("shared", "--storage", help="shared, block or remote-then-local."),
    disk: str = typer.Option(
        "0", "--disk", help="Disk size (copied with --storage block or remote-then-local)."
    ),
    disk_dirty_rate: str = typer.Option("0", "--disk-dirty-rate", help="Rate of disk writes."),
    syncs: str = typer.Option(
        "qemu",
        "--syncs",
        help="When the dirty log is read: qemu (once less than the threshold is left unsent, "
        "checked every 100 ms) or rounds (the textbook model: at the end of whole rounds).",
    ),
    overrides: list[str] | None = _PLAN_SET,
    as_json: bool = _JSON,
    plot: Path | None = _PLOT,
) -> None:
    """Predict a migration: rounds, total time, downtime, bytes.

    From flags alone (a constant bandwidth and dirty rate), or for each migration of a
    SCENARIO on its path with no other traffic.

    Example:  cloudtwin migrate plan --memory 4GiB --dirty-rate 50MiB/s --working-set 1GiB
    --bandwidth 1Gbps --json
    """
    from cloudtwin.mobility.plan import plan_request, plan_scenario

    if scenario is not None:
        given = [name for name in _VM_FLAGS if _given(ctx, name)]
        if given:
            raise MobilityError(
                f"{given[0]}: a scenario's VMs and paths come from its mobility: section "
                "(change them with --set); give either a scenario or the VM's flags"
            )
        if calibration is not None:
            overrides = [*(overrides or []), f"mobility.calibration={calibration}"]
        if is_cloud_file(scenario):  # sites of one cloud: each migration on its path across the WAN
            from cloudtwin.mobility.plan import plan_cloud

            plans = plan_cloud(read_cloud(scenario, overrides))
        else:
            plans = plan_scenario(read_scenario(scenario, overrides))
        named = [(p.vm, p.result) for p in plans]
        if as_json:
            rows = [
                {"vm": p.vm, "from": p.source, "to": p.destination, "bandwidth_bps": p.bandwidth_bps,
                 **p.result.to_dict()}
                for p in plans
            ]
            emit_json({"migrations": rows})
        else:
            stdout.print(_table("migration plans (each alone on its path)", named))
        if plot:
            _plot(plot, named)
        return
    if memory is None:
        raise MobilityError("memory: give the VM's memory (or a scenario)")
    fields: dict[str, object] = {
        "memory": memory,
        "dirty_rate": dirty_rate,
        "working_set": working_set,
        "resident": resident,
        "working_set_at": working_set_at,
        "write_order": write_order,
        "bandwidth": bandwidth,
        "downtime_limit": downtime_limit,
        "final_bandwidth": final_bandwidth,
        "resent_bandwidth": resent_bandwidth,
        "socket_buffer": socket_buffer,
        "resume": resume,
        "max_bandwidth": max_bandwidth,
        "auto_converge": auto_converge,
        "postcopy": postcopy,
        "xbzrle": xbzrle,
        "multifd_channels": multifd,
        "policy": policy,
        "storage": storage,
        "disk": disk,
        "disk_dirty_rate": disk_dirty_rate,
        "syncs": syncs,
    }
    result = plan_request(_request(_with_sets(fields, overrides or [])), _calibration(calibration))
    if as_json:
        emit_json(result.to_dict())
    else:
        stdout.print(_table("migration plan", [("vm", result)]))
    if plot:
        _plot(plot, [("vm", result)])


#: `plan` options that describe one VM and its path: meaningless beside a scenario.
_VM_FLAGS = (
    "memory", "dirty_rate", "working_set", "resident", "working_set_at", "write_order",
    "bandwidth", "downtime_limit", "final_bandwidth", "resent_bandwidth", "socket_buffer", "resume",
    "max_bandwidth", "auto_converge",
    "postcopy", "xbzrle", "multifd", "policy", "storage", "disk", "disk_dirty_rate", "syncs",
)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` was given on the command line (not left at its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _with_sets(fields: dict[str, object], overrides: list[str]) -> dict[str, object]:
    """The plan's fields with each `--set key=value` of a flags-only plan applied."""
    from cloudtwin.scenario.loader import apply_overrides

    for item in overrides:
        key = item.partition("=")[0].strip()
        if "." in key:
            raise MobilityError(f"{key}: --set without a scenario sets one knob of the plan "
                                "(a key of a scenario's migration, e.g. resume=5ms)")
    return apply_overrides({k: v for k, v in fields.items() if v is not None}, overrides)


def _calibration(path: Path | None) -> MigrationCalibration | None:
    """The migration profile `--calibration` names, loaded as a scenario loads it."""
    if path is None:
        return None
    from cloudtwin.cli.profilefiles import read_json_file
    from cloudtwin.mobility.calibration import calibration_from_data

    document = read_json_file(path, "migration profile", lambda line: MobilityError(f"calibration: {line}"))
    return calibration_from_data(document, f"calibration: {path}")


def _request(fields: dict[str, object]) -> PlanRequest:
    from cloudtwin.scenario.mobility import PlanRequest

    try:
        return PlanRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        key = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise MobilityError(f"{key}: {message}" if key else message) from err


def _table(title: str, migrations: Named) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("vm", "converged", "rounds", "total (s)", "downtime (ms)", "GB sent", "notes"):
        table.add_column(column)
    for vm, result in migrations:
        extra = [text for text in (result.reason, result.over_limit_note()) if text]
        notes = "; ".join(result.actions + extra)
        table.add_row(
            vm,
            {"converged": "yes", "did not converge": "no"}.get(result.status(), "yes, over the limit"),
            str(result.rounds),
            f"{result.total_time_s:.3f}",
            f"{result.downtime_s * 1e3:.1f}",
            f"{result.bytes / 1e9:.3f}",
            notes or "-",
        )
    return table


def _plot(path: Path, migrations: Named) -> None:
    from cloudtwin.mobility.plot import rounds_figure

    figure = rounds_figure(migrations)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    wrote(path)


@app.command("run")
def run(
    scenario: Path = _RUN_SCENARIO,
    overrides: list[str] | None = _SET,
    as_json: bool = _JSON,
    plot: Path | None = _PLOT,
    out: Path | None = _OUT,
    db: Path | None = _DB_OPTION,
) -> None:
    """Run a scenario's migrations on the engine, sharing the path with its tenant traffic.

    Each round of each migration is a flow from the VM's host through both clouds'
    gateways and the WAN to the destination host. The destination cloud admits each
    migration and picks the host; both sides log their own side.

    Example:  cloudtwin migrate run examples/migration.yaml --json
    """
    from cloudtwin.twin import run_migrations

    if is_cloud_file(scenario):  # sites of one cloud: the migrations cross the federation
        from cloudtwin.twin.cloud import run_cloud

        cloud = read_cloud(scenario, overrides)
        if not cloud.mobility.migrations:
            raise MobilityError("mobility.migrations: the scenario has no migration to run")
        crossed = run_cloud(cloud).migrations
        assert crossed is not None
        outcome, name = crossed, cloud.name
    else:
        loaded = read_scenario(scenario, overrides)
        with progress_bar("migrating", not as_json) as progress:
            outcome = run_migrations(loaded, progress=progress)
        name = loaded.name
    document = _whole_bytes(outcome.to_dict())
    if db is not None:
        from cloudtwin.store.database import Store
        from cloudtwin.store.migrations import save_migration_run

        with Store(db) as store:
            document["run_id"] = save_migration_run(store, name, document, outcome.log_rows())
        wrote(db, f"run {document['run_id']}")
    if out is not None:
        write_json(out, document)
        wrote(out)
    if as_json:
        emit_json(document)
    else:
        stdout.print(_table(f"migrations of {name}", [(m.vm, m.result) for m in outcome.migrations]))
        if outcome.tenant_flows:
            stdout.print(
                f"tenant traffic: {outcome.tenant_flows} flows done at {outcome.tenant_completion_s:.3f} s "
                f"({outcome.tenant_completion_alone_s:.3f} s without the migrations)"
            )
    if plot:
        _plot(plot, [(m.vm, m.result) for m in outcome.migrations])


_DB_READ = typer.Option(DEFAULT_DB, "--db", help="The store written by cloudtwin migrate run --db.")


@app.command("list")
def list_runs(db: Path = _DB_READ, as_json: bool = _JSON) -> None:
    """List stored migration runs, newest first, one row per migration.

    Example:  cloudtwin migrate list --db migrations.duckdb --json
    """
    from cloudtwin.store.database import Store
    from cloudtwin.store.migrations import list_migration_runs

    with Store(db, read_only=True) as store:
        rows = list_migration_runs(store)
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"migration runs in {db}", title_justify="left")
    for column in ("run", "scenario", "vm", "converged", "total (s)", "downtime (ms)", "rounds"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["run_id"]),
            row["scenario"],
            row["vm"],
            "yes" if row["converged"] else "no",
            f"{row['total_time_s']:.3f}",
            f"{row['downtime_s'] * 1e3:.1f}",
            str(row["rounds"]),
        )
    stdout.print(table)


def _whole_bytes(value: object) -> Any:
    """The document with every byte count (`bytes`, `*_bytes`) a whole number: the model's
    fluid rounds carry fractions of a byte that a wire never does."""
    if isinstance(value, dict):
        return {
            k: round(v) if isinstance(v, float) and _is_bytes(k) else _whole_bytes(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_whole_bytes(v) for v in value]
    return value


def _is_bytes(key: str) -> bool:
    return key == "bytes" or key.endswith("_bytes")
