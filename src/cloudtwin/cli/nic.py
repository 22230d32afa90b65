"""`cloudtwin nic ...`: smartNIC offload accounting, the P4 pipeline on captures, measured boot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml

from cloudtwin.cli import output
from cloudtwin.cli.checks import check_out_file, check_scenario_file, readable
from cloudtwin.cli.output import atomic_file, emit_json
from cloudtwin.cli.sites import SITE, for_each_site, site_scenarios
from cloudtwin.cli.startup import collector_paused, keep_freed_blocks
from cloudtwin.errors import NicError, ScenarioError, needs_extra
from cloudtwin.files import open_bounded, read_text_bounded
from cloudtwin.scenario.safe_yaml import load_yaml

if TYPE_CHECKING:
    from cloudtwin.evaluation.offload import NicOffload
    from cloudtwin.scenario.model import Scenario

__all__ = ["app"]

app = typer.Typer(
    help=(
        "The smartNIC (Janus) model: how many host cores NIC offload hands back (offload), "
        "a P4 program on real packets (run), p4c's STF packet tests (stf), and the NIC's measured "
        "boot (boot)."
    ),
    no_args_is_help=True,
)

_JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
_SET = typer.Option(None, "--set", "-s", help="Override a scenario key: --set nic.profile=bmv2-like.")


#: The most bytes `nic run` reads of each input, so that each is read and parsed within
#: seconds: a P4 program (the shipped ones are a few KiB; the parser takes about 10 s a
#: MiB) and an entries file (about 40,000 entries; at most ENTRIES_NODES YAML values once
#: its aliases are expanded). A capture is read a block at a time, so its size bounds only
#: the time it takes (16 GiB: about 100 million packets, a few minutes), not memory.
PROGRAM_BYTES = 1 << 20
ENTRIES_BYTES = 4 << 20
ENTRIES_NODES = 1_000_000
PCAP_BYTES = 16 << 30


def _read_yaml(path: Path, what: str) -> tuple[Any, yaml.Node | None]:
    text = read_text_bounded(path, ENTRIES_BYTES, f"table-{what} file", NicError)
    try:
        return load_yaml(text, str(path), f"table-{what} file", ENTRIES_BYTES, ENTRIES_NODES)
    except ScenarioError as err:
        raise NicError(str(err)) from err


def _at_line(err: NicError, path: Path, node: yaml.Node | None) -> NicError:
    """An entries error (`tables.t.3.match: ...`) with the file and line it names in front."""
    from cloudtwin.scenario.loader import line_of  # with the scenario models: only on an error
    parts = (err.field or "").split(".")
    if node is None or parts[0] not in ("tables", "meters", "pna"):
        return err
    line = line_of(node, [int(p) if p.isdigit() else p for p in parts])
    return NicError(f"{path}:{line}: {err}" if line else f"{path}: {err}", field=err.field)


PARSER_TABLES = "p4-parser.lark"
"""The file, in the user's cache folder, that keeps the P4 parser's tables between runs."""
KEPT_PROGRAMS = "p4-programs"
"""The folder, in the user's cache folder, that keeps checked P4 programs between runs."""


def cache_folder() -> Path | None:
    """cloudtwin's folder in the user's cache ($XDG_CACHE_HOME, else ~/.cache), made
    private (mode 0700) when missing; None when there is none to use (no home, a folder
    that cannot be made)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        folder = (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "cloudtwin"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # RuntimeError: no home directory to be found
        return None
    return folder


def _keep_parsed() -> None:
    """The P4 parser's tables and each checked program kept in the cache folder (0.2 s and
    0.06 s of CPU saved on each run after the first); built each run when there is no cache
    folder."""
    from cloudtwin.p4 import keep_parser_tables, keep_programs

    folder = cache_folder()
    if folder is not None:
        keep_parser_tables(folder / PARSER_TABLES)
        keep_programs(folder / KEPT_PROGRAMS)


def run_file(datapath: Any, pcap: Path, out: Path | None, direction: int, input_port: int) -> Any:
    """`nic run`'s path from file to file: the capture read a block at a time, each block's
    output records written as they are made (to a temporary file that replaces `out` only
    once the whole capture ran), so memory follows the block, not the capture."""
    from cloudtwin.p4 import run_pcap

    with open_bounded(pcap, PCAP_BYTES, "pcap", NicError) as source:
        if out is None:
            return run_pcap(datapath, source.readinto, None, direction, input_port, str(pcap))
        with atomic_file(out) as sink:
            return run_pcap(datapath, source.readinto, sink.write, direction, input_port, str(pcap))


def _load_datapath(program: Path, entries: Path | None) -> Any:
    """The datapath of a P4 program file with its entries file installed; errors in the
    entries name their file and line."""
    with needs_extra("nic", "nic run", NicError):  # lark parses the P4 program
        from cloudtwin.p4 import load_datapath

    _keep_parsed()
    document, node = _read_yaml(entries, "entries") if entries is not None else (None, None)
    text = read_text_bounded(program, PROGRAM_BYTES, "P4 program", NicError)
    try:
        return load_datapath(text, str(program), document)
    except NicError as err:
        located = err if entries is None else _at_line(err, entries, node)
        if located is err:
            raise
        raise located from err


_PROGRAM = typer.Argument(
    ...,
    help="P4-16 program (the subset in docs/smartnic.md).",
    show_default=False,
    callback=readable("P4 program", NicError),
)
_ENTRIES = typer.Option(
    None,
    "--entries",
    "-e",
    help="Table entries and meter settings (YAML).",
    callback=readable("table-entries file", NicError),
)
_PCAP = typer.Option(
    ...,
    "--pcap",
    help="Input capture (pcap, Ethernet).",
    show_default=False,
    callback=readable("pcap", NicError),
)
_OUT = typer.Option(
    None, "--out", "-o", help="Write the packets that leave the pipeline here.", callback=check_out_file
)
_FROM = typer.Option("network", "--from", help="Where the capture enters the NIC: network or host.")
_PORT = typer.Option(
    None,
    "--port",
    min=0,
    max=(1 << 32) - 1,
    help="Input port: 0 is the network, 1.. a host function (default: 0 / 1).",
)
_NIC_SCENARIO = typer.Argument(
    ..., help="Scenario YAML file (its `nic:` section).", show_default=False, callback=check_scenario_file
)
_TOP = typer.Option(8, "--top", min=0, help="How many hosts the table lists.")
_ALL = typer.Option(False, "--all", help="List every host (--json gives every host too).")
_BOOT_SCENARIO = typer.Argument(
    ..., help="Scenario YAML file (its `nic.boot_faults`).", show_default=False, callback=check_scenario_file
)
_DB = typer.Option(
    None, "--db", help="Also write attestation failures into this operations store (DuckDB)."
)


@app.command("run")
def run(
    program: Path = _PROGRAM,
    entries: Path | None = _ENTRIES,
    pcap: Path = _PCAP,
    out: Path | None = _OUT,
    from_: str = _FROM,
    port: int | None = _PORT,
    as_json: bool = _JSON,
) -> None:
    """Run a P4 program with its table entries over a capture; write what leaves it.

    Example:  cloudtwin nic run examples/p4/vxlan_gateway.p4 --entries
    examples/p4/vxlan_gateway.entries.yaml --pcap examples/p4/host-frames.pcap --from host
    --out encapsulated.pcap
    """
    if from_ not in ("network", "host"):
        raise NicError(f"from: {from_!r} is neither network nor host")
    direction = 1 if from_ == "host" else 0
    with collector_paused():  # start-up: the P4 modules, the program and its entries
        datapath = _load_datapath(program, entries)
    keep_freed_blocks()  # batch after batch, the same sizes made and freed
    report = run_file(datapath, pcap, out, direction, port if port is not None else direction)
    if as_json:
        emit_json(report.to_json())
        return
    from rich.table import Table

    table = Table(title=f"{program.name} on {pcap.name}", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in (
        ("packets in", report.packets_in),
        ("packets out", report.packets_out),
        ("dropped", report.dropped),
        ("parser errors", report.parser_errors),
    ):
        table.add_row(name, str(value))
    for out_port, count in sorted(report.out_ports.items()):
        table.add_row(f"to port {out_port}", str(count))
    for name, hits in report.table_hits.items():
        table.add_row(f"{name} hits per entry", " ".join(str(h) for h in hits) or "-")
    output.stdout.print(table)


STF_BYTES = 4 << 20
"""The most bytes `nic stf` reads of an STF script (p4c's are a few KiB)."""

_STF = typer.Argument(
    ..., help="STF script: table entries, packets in, packets expected out.", show_default=False
)
_INCLUDE = typer.Option(
    None,
    "--include",
    "-I",
    help="Where #include <core.p4>, <v1model.p4> ... are found (besides the program's directory "
    "and its ../include).",
)


@app.command("stf")
def stf(
    program: Path = _PROGRAM,
    script: Path = _STF,
    include: list[Path] | None = _INCLUDE,
    as_json: bool = _JSON,
) -> None:
    """Run one p4c STF packet test: exit 0 pass, 1 on the first difference, 2 unsupported.

    Example:  cloudtwin nic stf ../shared/datasets/p4c-stf/tests/arith-bmv2.p4
    ../shared/datasets/p4c-stf/tests/arith-bmv2.stf
    """
    with needs_extra("nic", "nic stf", NicError):  # lark parses the P4 program
        from cloudtwin.p4 import run_stf

    _keep_parsed()

    text = read_text_bounded(program, PROGRAM_BYTES, "P4 program", NicError)
    script_text = read_text_bounded(script, STF_BYTES, "STF script", NicError)
    dirs = (*(include or ()), program.parent / ".." / "include")
    result = run_stf(text, str(program), script_text, str(script), dirs)
    if as_json:
        emit_json(result.to_json())
    elif result.status == "pass":
        output.stdout.print(f"pass: {result.matched} of {result.expected} expected packets", highlight=False)
    elif result.status == "fail":
        output.stdout.print(f"fail: {result.reason}", highlight=False, soft_wrap=True)
    if result.status == "fail":
        raise typer.Exit(1)
    if result.status == "unsupported":
        if as_json:
            raise typer.Exit(2)
        raise NicError(f"unsupported: {result.reason}")


@app.command("offload")
def offload(
    scenario: Path = _NIC_SCENARIO,
    overrides: list[str] | None = _SET,
    top: int = _TOP,
    all_hosts: bool = _ALL,
    as_json: bool = _JSON,
    site: str | None = SITE,
) -> None:
    """Host cores offload hands back; per host: cores, NIC-core use, pipeline pps, slow path.

    Also the added latency per host, and a connection storm's dip and recovery when the
    scenario describes one (`nic.storm`).

    Example:  cloudtwin nic offload examples/smartnic.yaml
    """
    from cloudtwin.evaluation.offload import nic_offload

    def one(loaded: Scenario) -> dict[str, object]:
        result = nic_offload(loaded)
        if not as_json:
            _print_offload(result, top, all_hosts)
        return result.to_json()

    for_each_site(site_scenarios(scenario, overrides, site, "nic offload"), one, as_json)


def _print_offload(result: NicOffload, top: int, all_hosts: bool) -> None:
    report = result.report
    from rich.table import Table

    table = Table(title=f"NIC offload: {result.scenario} ({result.traffic})", title_justify="left")
    for name in ("host", "profile", "Gbps", "cores", "no offload", "NIC cores", "Mpps", "slow", "+us"):
        table.add_column(name, justify="left" if name in ("host", "profile") else "right")
    hosts = len(report.host_names)
    shown = hosts if all_hosts else min(top, hosts)
    for i in range(shown):
        table.add_row(
            report.host_names[i] + (" (quarantined)" if report.quarantined[i] else ""),
            report.profile[i],
            f"{report.throughput_bps[i] / 1e9:.1f}",
            f"{report.host_cores[i]:.2f}",
            f"{report.baseline_host_cores[i]:.2f}",
            f"{report.nic_core_utilization[i]:.0%}",
            f"{report.pipeline_pps[i] / 1e6:.2f}",
            f"{report.slow_path_share[i]:.1%}",
            f"{report.added_latency_s[i] * 1e6:.1f}",
        )
    output.stdout.print(table)
    if shown < hosts:
        output.stdout.print(f"{shown} of {hosts} hosts shown; --all lists every host, --json gives them all")
    totals = report.totals()
    output.stdout.print(
        f"{totals['hosts']} hosts: {totals['host_cores']:.1f} host cores for the datapath, "
        f"{totals['host_cores_saved']:.1f} handed back by offload "
        f"({totals['host_cores_without_offload']:.1f} without it); "
        f"{totals['quarantined_hosts']} quarantined"
    )
    if result.storm is not None:
        storm = result.storm.to_json()
        output.stdout.print(
            f"connection storm: {storm['baseline_gbps']:.1f} Gbps dips to {storm['minimum_gbps']:.1f} Gbps "
            f"({storm['steady_slow_path_share']:.0%} of new flows on the slow path); "
            f"recovered {storm['recovery_s'] * 1e3:.1f} ms after the storm"
        )


@app.command("boot")
def boot(
    scenario: Path = _BOOT_SCENARIO,
    overrides: list[str] | None = _SET,
    db: Path | None = _DB,
    as_json: bool = _JSON,
    site: str | None = SITE,
) -> None:
    """Measured boot of every host's NIC: firmware, NIC OS and pipeline, signed with Ed25519.

    A host whose chain fails stays quarantined; with --db its failure becomes an operations
    log line that `cloudtwin diagnose` ranks first.

    Example:  cloudtwin nic boot examples/smartnic.yaml
    """
    from cloudtwin.evaluation.offload import boot_nics

    def one(loaded: Scenario) -> dict[str, object]:
        reports = boot_nics(loaded)
        if db is not None:
            from cloudtwin.diagnosis.attestation import record_attestation
            from cloudtwin.store.database import Store

            # a cloud's site (`one-cloud/west`) records as the cloud's run, names site-qualified
            run, _, part = loaded.name.partition("/") if cloud else (loaded.name, "", "")
            with Store(db) as store:
                record_attestation(store, loaded, reports, prefix=f"{part}." if part else "", run=run)
        failed = [r for r in reports if not r.attested]
        if not as_json:
            from rich.table import Table

            table = Table(title=f"Measured boot: {loaded.name}", title_justify="left")
            for name in ("host", "result", "booted", "measurement"):
                table.add_column(name)
            for report in failed or reports[:1]:
                failure = f"QUARANTINED: {report.failed_stage} {report.reason}"
                result = "attested" if report.attested else failure
                table.add_row(report.host, result, ", ".join(report.booted) or "-", report.measurement[:16])
            output.stdout.print(table)
            attested = len(reports) - len(failed)
            output.stdout.print(f"{attested} of {len(reports)} NICs attested; {len(failed)} quarantined")
        totals = {"hosts": len(reports), "attested": len(reports) - len(failed), "quarantined": len(failed)}
        return {"hosts": {r.host: r.to_json() for r in reports}, "totals": totals}

    targets = site_scenarios(scenario, overrides, site, "nic boot")
    cloud = targets[0].site is not None
    for_each_site(targets, one, as_json)
