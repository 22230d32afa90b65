"""`cloudtwin nic run|offload|boot` as a user runs them, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from scapy.all import VXLAN, Ether, rdpcap
from tests.cli.cli_helpers import REPO, cloudtwin

P4 = REPO / "examples" / "p4"
GATEWAY = ["nic", "run", str(P4 / "vxlan_gateway.p4"), "--entries", str(P4 / "vxlan_gateway.entries.yaml")]


def test_run_encapsulates_a_capture(tmp_path: Path) -> None:
    out = tmp_path / "out.pcap"
    done = cloudtwin(
        *GATEWAY, "--pcap", str(P4 / "host-frames.pcap"), "--from", "host", "--out", str(out), "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["packets_in"] == 8 and report["packets_out"] == 6 and report["dropped"] == 2
    assert report["table_hits"]["vf_vni"] == [8, 0]
    frames = rdpcap(str(out))
    assert len(frames) == 6 and all(Ether(bytes(f))[VXLAN].vni == 1001 for f in frames)


def test_run_output_has_a_new_files_usual_mode_and_keeps_an_existing_ones(tmp_path: Path) -> None:
    """The output is written aside and renamed: it still gets 0666 less the umask when new
    (not the 0600 of a temporary file) and the mode of the file it replaces."""
    fresh, kept = tmp_path / "fresh.pcap", tmp_path / "kept.pcap"
    kept.write_bytes(b"")
    kept.chmod(0o640)
    for out in (fresh, kept):
        capture = str(P4 / "host-frames.pcap")
        done = cloudtwin(*GATEWAY, "--pcap", capture, "--from", "host", "--out", str(out))
        assert done.returncode == 0, done.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
    assert kept.stat().st_mode & 0o777 == 0o640
    assert len(rdpcap(str(kept))) == 6


def test_run_keeps_the_parser_tables_in_the_users_cache(tmp_path: Path) -> None:
    """The first run keeps the P4 parser's tables in a private folder of the user's cache;
    later runs read them (the file is not written again) and print the same; a broken
    file is built again and written over, silently, with the same result."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = [*GATEWAY, "--pcap", str(P4 / "host-frames.pcap"), "--from", "host", "--json"]
    first = cloudtwin(*args, env=env)
    tables = tmp_path / "cache" / "cloudtwin" / "p4-parser.lark"
    assert first.returncode == 0 and tables.stat().st_size > 0, first.stderr
    assert tables.parent.stat().st_mode & 0o777 == 0o700
    written = tables.stat().st_mtime_ns
    second = cloudtwin(*args, env=env)
    assert (second.returncode, second.stdout) == (0, first.stdout)
    assert tables.stat().st_mtime_ns == written  # read, not built again
    tables.write_bytes(tables.read_bytes()[:1000])
    for kept in (tables.parent / "p4-programs").glob("*.pickle"):
        kept.unlink()  # else the checked program is read back and the tables are not needed
    third = cloudtwin(*args, env=env)
    assert (third.returncode, third.stdout, third.stderr) == (0, first.stdout, "")
    assert tables.stat().st_size > 1000


def test_run_keeps_the_checked_program_and_reads_it_back(tmp_path: Path) -> None:
    """The first run keeps the checked program beside the parser's tables; a later run reads
    it back (not written again) and writes the same packets and report; a broken file is
    a miss, parsed again and written over, with the same result; another program gets a
    file of its own."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    programs = tmp_path / "cache" / "cloudtwin" / "p4-programs"

    def run(out: Path, program: Path = P4 / "vxlan_gateway.p4") -> str:
        done = cloudtwin(
            "nic", "run", str(program), "--entries", str(P4 / "vxlan_gateway.entries.yaml"),
            "--pcap", str(P4 / "host-frames.pcap"), "--from", "host", "--out", str(out), "--json", env=env,
        )
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        return done.stdout

    first = run(tmp_path / "first.pcap")
    [kept] = programs.glob("*.pickle")
    assert programs.stat().st_mode & 0o777 == 0o700
    written = kept.stat().st_mtime_ns
    assert run(tmp_path / "second.pcap") == first
    assert kept.stat().st_mtime_ns == written  # read back, not parsed again
    assert (tmp_path / "second.pcap").read_bytes() == (tmp_path / "first.pcap").read_bytes()
    kept.write_bytes(b"\x80\x05not a program")
    assert run(tmp_path / "third.pcap") == first
    assert (tmp_path / "third.pcap").read_bytes() == (tmp_path / "first.pcap").read_bytes()
    assert kept.stat().st_size > 1000
    renamed = tmp_path / "renamed.p4"
    renamed.write_text((P4 / "vxlan_gateway.p4").read_text())
    assert json.loads(run(tmp_path / "fourth.pcap", renamed)) == json.loads(first)
    assert len(list(programs.glob("*.pickle"))) == 2  # a program is kept by its file name too


def test_run_prints_a_table() -> None:
    done = cloudtwin(*GATEWAY, "--pcap", str(P4 / "network-frames.pcap"))
    assert done.returncode == 0 and "packets out" in done.stdout and "to port 1" in done.stdout


def test_offload_json_has_the_documented_keys() -> None:
    done = cloudtwin("nic", "offload", "examples/smartnic.yaml", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    host = result["hosts"]["host0"]
    for key in ("host_cores", "nic_core_utilization", "pipeline_pps", "slow_path_share", "added_latency_s"):
        assert isinstance(host[key], float)
    assert {"host_cores", "host_cores_saved"} <= set(result["totals"])
    assert result["hosts"]["host5"]["quarantined"] and result["storm"]["dip_gbps"] > 0


def test_boot_quarantines_and_diagnose_names_the_host_first(tmp_path: Path) -> None:
    db = tmp_path / "ops.duckdb"
    done = cloudtwin("nic", "boot", "examples/smartnic.yaml", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["totals"] == {"hosts": 128, "attested": 127, "quarantined": 1}
    assert result["hosts"]["host5"]["failed_stage"] == "nic-os"
    ranked = json.loads(cloudtwin("diagnose", "--db", str(db), "--json").stdout)["suspects"]
    assert ranked[0]["component"] == "host5/nic0"
    # another scenario diagnosed into the store ranks its own fabric; the boots stay smartnic's
    both = cloudtwin("diagnose", "examples/diagnose.yaml", "--db", str(db), "--json")
    assert both.returncode == 0, both.stderr
    ranked = json.loads(both.stdout)["suspects"]
    assert ranked[0]["component"] == "leaf1-spine2" and "host5/nic0" not in {s["component"] for s in ranked}
    boots = json.loads(cloudtwin("diagnose", "--db", str(db), "--run", "smartnic", "--json").stdout)
    assert [s["component"] for s in boots["suspects"]] == ["host5/nic0"]


def _bad(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("program", r"^cloudtwin: error: .*bad\.p4:\d+:\d+: .*outside the supported P4-16 subset$"),
        (
            "entries",
            r"^cloudtwin: error: .*e\.yaml:3: tables\.vf_vni\.0\.match\.istd\.input_port: .* does not fit "
            r"in bit<32>$",
        ),
        ("pcap", r"^cloudtwin: error: .*cut\.pcap: record \d+ is truncated"),
        (
            "placement",
            r"^cloudtwin: error: nic\.functions\.0\.tier: storage-initiator cannot run on the pipeline",
        ),
        ("missing", r"^cloudtwin: error: .*nope\.p4: no such P4 program file$"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, message: str) -> None:
    out = tmp_path / "out.pcap"
    pcap = str(P4 / "host-frames.pcap")
    if case == "program":
        program = _bad(
            tmp_path,
            "bad.p4",
            (P4 / "vxlan_gateway.p4").read_text().replace("size = 64;", "size = 64; register<bit<8>>(4) r;"),
        )
        args = ["nic", "run", program, "--pcap", pcap, "--out", str(out)]
    elif case == "entries":
        entries = _bad(
            tmp_path,
            "e.yaml",
            "tables:\n  vf_vni:\n    - {match: {istd.input_port: 99999999999}, action: drop}\n",
        )
        args = [
            "nic",
            "run",
            str(P4 / "vxlan_gateway.p4"),
            "--entries",
            entries,
            "--pcap",
            pcap,
            "--out",
            str(out),
        ]
    elif case == "pcap":
        cut = _bad(tmp_path, "cut.pcap", (P4 / "host-frames.pcap").read_bytes()[:200])
        args = [*GATEWAY, "--pcap", cut, "--out", str(out)]
    elif case == "placement":
        args = [
            "nic",
            "offload",
            "examples/smartnic.yaml",
            "--set",
            "nic.functions=[{name: storage-initiator, tier: pipeline}]",
        ]
    else:
        args = ["nic", "run", str(tmp_path / "nope.p4"), "--pcap", pcap]
    done = cloudtwin(*args)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert __import__("re").match(message, done.stderr.strip()), done.stderr
    assert not out.exists()  # nothing half-written


def test_a_run_through_a_quarantined_host_is_refused_in_one_line() -> None:
    done = cloudtwin("run", "examples/smartnic.yaml", "--set", "workload.size=1MiB")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "cloudtwin: error: nic.boot_faults: host5's NIC failed measured boot (nic-os: signature does not "
        "match the image (tampered)); its port is quarantined and its flows get no bandwidth, so they can "
        "never finish"
    )
    clean = cloudtwin(
        "run", "examples/smartnic.yaml", "--set", "workload.size=1MiB", "--set", "nic.boot_faults=[]"
    )
    assert clean.returncode == 0, clean.stderr


def test_offload_says_how_many_hosts_it_lists_and_all_lists_every_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cloudtwin.cli.app import main

    assert main(["nic", "offload", str(REPO / "examples" / "smartnic.yaml"), "--top", "3"]) == 0
    shown = capsys.readouterr().out
    assert "3 of 128 hosts shown; --all lists every host" in shown
    assert main(["nic", "offload", str(REPO / "examples" / "smartnic.yaml"), "--all"]) == 0
    every = capsys.readouterr().out
    assert "hosts shown" not in every and "host127" in every.replace(" ", "")


@pytest.mark.parametrize("flag", ["program", "--entries", "--pcap"])
def test_a_device_or_fifo_as_any_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    from cloudtwin.cli.app import main

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    inputs = {"program": str(P4 / "vxlan_gateway.p4"), "--pcap": str(P4 / "host-frames.pcap")}
    for name, bad in (("zero", "/dev/zero"), ("fifo", str(fifo))):
        args = {**inputs, flag: bad}
        argv = ["nic", "run", args.pop("program"), *[x for kv in args.items() for x in kv]]
        assert main(argv) == 2, name
        err = capsys.readouterr().err.strip()
        assert err.endswith("not a regular file") and "\n" not in err, err
