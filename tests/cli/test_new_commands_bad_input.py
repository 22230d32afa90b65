"""Bad input to federate, migrate, nic, sweep and flow files: one line and exit 2, at once.

Each case here once ended in a traceback, ran for minutes, or printed a wrong result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli.app import main

EXAMPLES = REPO / "examples"
P4 = EXAMPLES / "p4"
TOKEN_ENV = "CLOUDTWIN_FEDERATION_TOKEN"


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("cloudtwin: error: "), err
    return err


# -- federate -----------------------------------------------------------------------------


def test_sites_that_are_not_a_list_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("name: x\nsites: 3\n")
    assert "sites" in one_line_error(capsys, "federate", "plan", str(path))


def test_a_huge_host_range_is_refused_before_it_is_expanded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "0-99999999" was expanded into 10^8 host indices: past 60 s and gigabytes
    text = (EXAMPLES / "intercloud.yaml").read_text().replace('hosts: "0-1", address: 10.0.0.11/24',
                                                               'hosts: "0-99999999", address: 10.0.0.11/24')
    path = tmp_path / "f.yaml"
    path.write_text(text)
    err = one_line_error(capsys, "federate", "plan", str(path))
    assert "sites.0.tenants.0.hosts: lists more than 4,194,304 hosts" in err
    tiny = tmp_path / "t.yaml"
    tiny.write_text("name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                    "tenants: [{name: a, vni: 3, hosts: '0-99999999999'}]\n")
    assert "tenants.0.hosts: lists more than" in one_line_error(capsys, "run", str(tiny))


@pytest.fixture
def state(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller state made by `federate apply`, with its admin token in the environment."""
    path = tmp_path / "fed" / "state.json"
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert main(["federate", "apply", str(EXAMPLES / "intercloud.yaml"), "--state", str(path), "--json"]) == 0
    capsys.readouterr()
    tokens = json.loads(path.with_name("state.json.tokens").read_text())
    monkeypatch.setenv(TOKEN_ENV, tokens["admin"])
    return path


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"admin": 5}, "state.admin"),
        ({"sites": None}, "state.sites"),
        ({"sites": {"east": 1}}, "state.sites.east"),
        ({"networks": []}, "state.networks"),
        ({"segments": {"x@east": {"site": "east"}}}, "state.segments.x@east"),
        ({"reports": "x"}, "state.reports"),
        ({"global_pool": "not-a-prefix"}, "state.global_pool"),
        ({"generation": "7"}, "state.generation"),
    ],
)
def test_a_damaged_state_file_is_one_line_naming_the_field_and_is_left_as_it_was(
    state: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], field: str
) -> None:
    damaged = {**json.loads(state.read_text()), **change}
    state.write_text(json.dumps(damaged))
    before = state.read_bytes()
    for command in (["status"], ["apply", str(EXAMPLES / "intercloud.yaml")]):
        err = one_line_error(capsys, "federate", *command, "--state", str(state))
        assert field in err and str(state) in err
    assert state.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"version": 1}', "state.generation"),
        (b"\xff\xfe\x00", "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
    ],
)
def test_a_state_file_that_is_not_one_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    content: bytes, reason: str,
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "t")
    path = tmp_path / "state.json"
    path.write_bytes(content)
    assert reason in one_line_error(capsys, "federate", "status", "--state", str(path))


@pytest.mark.parametrize("tokens", ['[1]', '"abc"', '{"admin": 5}', '{"sites": []}'])
def test_a_damaged_tokens_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tokens: str
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    (tmp_path / "state.json.tokens").write_text(tokens)
    (tmp_path / "state.json.tokens").chmod(0o600)
    err = one_line_error(capsys, "federate", "apply", str(EXAMPLES / "intercloud.yaml"),
                         "--state", str(tmp_path / "state.json"))
    assert "not a tokens file" in err


def test_a_state_file_where_none_can_be_written_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    err = one_line_error(capsys, "federate", "apply", str(EXAMPLES / "intercloud.yaml"),
                         "--state", "/proc/none/state.json")
    assert "cannot write here" in err


# -- nic run ------------------------------------------------------------------------------


def _nic(program: Path, entries: Path, *extra: str) -> list[str]:
    return ["nic", "run", str(program), "--entries", str(entries), "--pcap", str(P4 / "host-frames.pcap"),
            "--from", "host", *extra]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("tables: 3\n", "tables: a mapping of table name"),
        ("meters: 5\n", "meters: a mapping of meter name"),
        ("tables: " + "[" * 20_000 + "]" * 20_000, "nested more than 64 levels deep"),
        ("tables: {}\ntables: {}\n", "key 'tables' appears twice"),
        ("# " + "x" * 5_000_000 + "\n", "the table-entries file is larger than 4,194,304 bytes"),
    ],
)
def test_bad_table_entries_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, reason: str
) -> None:
    entries = tmp_path / "e.yaml"
    entries.write_text(text)
    assert reason in one_line_error(capsys, *_nic(P4 / "vxlan_gateway.p4", entries))


def test_a_program_naming_an_undeclared_type_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "p.p4"
    text = (P4 / "vxlan_gateway.p4").read_text()
    program.write_text(text.replace("pna_main_parser_input", "pna_mian_parser_input"))
    err = one_line_error(capsys, *_nic(program, P4 / "vxlan_gateway.entries.yaml"))
    assert "is not a declared struct" in err


@pytest.mark.parametrize(("extra", "reason"), [
    (["--port", str(2**70)], "--port"),
    (["--out", "{tmp}"], "is a folder"),
    (["--out", "/proc/x.pcap"], "cannot write in /proc"),
])
def test_nic_run_flags_are_checked_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], reason: str
) -> None:
    line = _nic(P4 / "vxlan_gateway.p4", P4 / "vxlan_gateway.entries.yaml",
                *[e.replace("{tmp}", str(tmp_path)) for e in extra])
    assert reason in one_line_error(capsys, *line)


# -- migrate ------------------------------------------------------------------------------


def test_a_vm_migrated_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # `migrate run` raised KeyError 'web1' when the second migration committed
    twice = "mobility.migrations=[{vm: web1, to: west}, {vm: web1, to: west}]"
    for command in ("run", "plan"):
        err = one_line_error(capsys, "migrate", command, str(EXAMPLES / "migration.yaml"), "--set", twice)
        assert "mobility.migrations.1.vm: VM 'web1' already migrates" in err


@pytest.mark.parametrize(("args", "reason"), [
    (["plan", "--memory", "4GiB", "--plot", "/proc/x.png"], "cannot write in /proc"),
    (["plan", "--memory", "4GiB", "--plot", "x.gif"], "must end in"),
    (["run", "{migration}", "--out", "{tmp}"], "is a folder"),
    (["plan", "{migration}", "--memory", "4GiB"], "memory: a scenario's VMs"),
])
def test_migrate_checks_its_outputs_first_and_ignores_no_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], reason: str
) -> None:
    line = [a.replace("{tmp}", str(tmp_path)).replace("{migration}", str(EXAMPLES / "migration.yaml"))
            for a in args]
    assert reason in one_line_error(capsys, "migrate", *line)


# -- sweep and overrides ------------------------------------------------------------------


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text("name: t\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                    "workload: {pattern: permutation, size: 1MiB}\n")
    return path


def test_a_vary_listing_too_many_values_is_refused_at_once(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 200,000 listed values were each validated before anything was printed (minutes)
    values = ",".join(str(i) for i in range(1, 1502))
    err = one_line_error(capsys, "sweep", str(tiny), "--vary", f"seed={values}", "--executor", "serial",
                         "--db", str(tmp_path / "s.duckdb"))
    assert "1,501 values listed one by one, more than the 1,000" in err


def test_sweep_refuses_a_strategy_named_twice(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, "sweep", str(tiny), "--vary", "seed=1,2", "--command", "compare",
                         "--strategies", "ecmp,ecmp", "--db", str(tmp_path / "s.duckdb"))
    assert "ecmp named twice" in err


def test_more_local_workers_than_can_help_are_refused_before_any_start(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the fork server started every one of them at once
    err = one_line_error(capsys, "sweep", str(tiny), "--vary", "seed=1", "--workers", "100000000",
                         "--db", str(tmp_path / "s.duckdb"))
    assert "workers: 100,000,000 local worker processes, more than the" in err


def test_a_deeply_nested_override_value_is_one_line(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # yaml.safe_load of the value raised RecursionError (run, sweep, every --set)
    err = one_line_error(capsys, "run", str(tiny), "--set", "seed=" + "[" * 5000)
    assert "seed: override value" in err and "nested more than 64 levels deep" in err


def test_a_yaml_error_without_a_line_has_no_empty_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("\x00\x01")
    err = one_line_error(capsys, "run", str(path))
    assert f"{path}: not valid YAML" in err


# -- flow files ---------------------------------------------------------------------------


def _flows(tmp_path: Path, file: str, content: str | None = None) -> Path:
    if content is not None:
        (tmp_path / file).write_text(content)
    path = tmp_path / "f.yaml"
    path.write_text("name: f\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                    f"workload: {{kind: flows, file: {file}}}\n")
    return path


HEADER = "source,destination,bytes,start\n"


@pytest.mark.parametrize(
    ("file", "content", "reason"),
    [
        ("/dev/zero", None, "not a regular file"),  # read forever, into gigabytes
        (".", None, "not a regular file"),  # IsADirectoryError
        ("long.csv", HEADER + "0,1,100," + "0" * 140_000 + "\n", "not a CSV file (field larger"),
        ("late.csv", HEADER + "0,1,100,1e300\n", "is later than 1e+06 s"),  # ran: utilization inf
        ("many.csv", HEADER + "0,1,1000,0\n" * 301, "limits.flows"),
    ],
)
def test_bad_flow_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, content: str | None, reason: str
) -> None:
    scenario = _flows(tmp_path, file, content)
    assert reason in one_line_error(capsys, "run", str(scenario), "--set", "limits.flows=300")


def test_more_listed_flows_than_limits_flows_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 400,000 rows ran past the 300,000 default before; here 20 rows over a limit of 10
    scenario = _flows(tmp_path, "f.csv", HEADER + "0,1,1000,0\n" * 20)
    err = one_line_error(capsys, "run", str(scenario), "--set", "limits.flows=10")
    assert "20 rows, more than the 10 flows limits.flows allows" in err


def test_flows_out_onto_a_folder_names_its_own_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_line_error(capsys, "run", str(EXAMPLES / "leaf-spine-pairs.yaml"), "--flows-out", str(tmp_path))
    assert f"--flows-out {tmp_path}: is a folder" in err
