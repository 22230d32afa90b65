"""Random and hostile input to federate, nic run, sweep and flow files, in process.

As in test_cli_fuzz: exit 0 with a result, or exit 2 with one line; never a traceback,
within the same time and memory bounds.
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.cli.cli_helpers import REPO
from tests.fuzz.test_cli_fuzz import outcome

from cloudtwin.errors import SweepError
from cloudtwin.sweep.values import parse_vary

EXAMPLES = REPO / "examples"
P4 = EXAMPLES / "p4"
FAST = settings(
    max_examples=20, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
#: Each example compiles a P4 program, builds fabrics or runs a sweep: fewer of them.
HEAVY = settings(FAST, max_examples=12)

leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=12),
    st.sampled_from(["10.0.0.1/24", "0-99999999", "0-3", "east", "west", "vxlan", "global-nat",
                     "l2-stretch", "1e400Gbps", "0bps", "leaf-spine", "1001", "-1"]),
)
tree = st.recursive(leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
), max_leaves=10)


@pytest.mark.slow
@HEAVY
@given(section=st.sampled_from(["sites", "wan", "networks", "encapsulation", "underlay_mtu", "name"]),
       index=st.integers(0, 2), key=st.sampled_from(["name", "tenants", "fabric", "gateway", "between",
                                                       "sites", "mode", "tenant", "vni", "hosts"]),
       value=tree)
def test_any_federation_document_is_planned_or_refused_with_one_line(
    section: str, index: int, key: str, value: object
) -> None:
    document = yaml.safe_load((EXAMPLES / "intercloud.yaml").read_text())
    items = document.get(section)
    if isinstance(items, list) and index < len(items) and isinstance(items[index], dict):
        items[index][key] = value
    else:
        document[section] = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.yaml"
        path.write_text(json.dumps(document, default=str))
        code, out, _ = outcome(["federate", "plan", str(path), "--json"])
        if code == 0:
            assert json.loads(out)["sites"] >= 1


@pytest.fixture(scope="module")
def good_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str]:
    """A controller state written by `federate apply`, and its admin token."""
    import os

    folder = tmp_path_factory.mktemp("fed")
    old = os.environ.pop("CLOUDTWIN_FEDERATION_TOKEN", None)
    try:
        outcome(["federate", "apply", str(EXAMPLES / "intercloud.yaml"), "--state", str(folder / "s.json")])
    finally:
        if old is not None:
            os.environ["CLOUDTWIN_FEDERATION_TOKEN"] = old
    tokens = json.loads((folder / "s.json.tokens").read_text())
    return json.loads((folder / "s.json").read_text()), str(tokens["admin"])


@FAST
@given(path=st.lists(st.sampled_from(["sites", "networks", "segments", "reports", "east", "red-net",
                                      "red-net@east", "sites", "realised", "0", "peers", "vni",
                                      "address", "gateway", "generation", "global_pool"]),
                     min_size=1, max_size=4),
       value=tree)
def test_any_damaged_state_file_is_shown_or_refused_with_one_line(
    good_state: tuple[dict[str, object], str], path: list[str], value: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, admin = json.loads(json.dumps(good_state[0])), good_state[1]
    node: object = state
    for part in path[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
    if isinstance(node, dict):
        node[path[-1]] = value
    monkeypatch.setenv("CLOUDTWIN_FEDERATION_TOKEN", admin)
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "s.json"
        file.write_text(json.dumps(state, default=str))
        before = file.read_bytes()
        outcome(["federate", "status", "--state", str(file), "--json"])
        assert file.read_bytes() == before


entries = st.one_of(
    tree,
    st.fixed_dictionaries({"tables": st.dictionaries(
        st.sampled_from(["vf_vni", "vtep", "local_vteps", "vni_function", "nope"]),
        st.lists(st.fixed_dictionaries(
            {"match": st.dictionaries(st.sampled_from(["istd.input_port", "meta.vni", "hdr.ethernet.dst",
                                                       "hdr.outer_ipv4.dst", "x"]), leaf, max_size=2),
             "action": st.sampled_from(["set_vni", "set_vtep", "deliver", "NoAction", "nope"]),
             "params": st.dictionaries(st.sampled_from(["vni", "local_ip", "nic_mac", "remote_ip",
                                                        "function", "x"]), leaf, max_size=3)}),
                 max_size=3),
        max_size=3)}),
)


@pytest.mark.slow
@HEAVY
@given(document=entries)
def test_any_table_entries_run_or_are_refused_with_one_line(document: object) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "e.yaml"
        path.write_text(json.dumps(document, default=str))
        code, out, _ = outcome(["nic", "run", str(P4 / "vxlan_gateway.p4"), "--entries", str(path),
                                "--pcap", str(P4 / "host-frames.pcap"), "--from", "host", "--json"])
        if code == 0:
            assert json.loads(out)["packets_in"] == 8


_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
records = st.lists(
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=200)).map(
        lambda r: struct.pack("<IIII", 0, 0, r[0] % 70_000, r[1] % 70_000) + r[2]
    ),
    max_size=20,
)
captures = st.one_of(st.binary(max_size=2000), records.map(lambda rs: _PCAP_HEADER + b"".join(rs)))


@pytest.mark.slow
@HEAVY
@given(data=captures, program=st.sampled_from(["parse_only.p4", "security_groups.p4"]))
def test_any_capture_runs_or_is_refused_with_one_line(data: bytes, program: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.pcap"
        path.write_bytes(data)
        entries = P4 / program.replace(".p4", ".entries.yaml")
        line = ["nic", "run", str(P4 / program), "--pcap", str(path), "--json"]
        if entries.exists():
            line += ["--entries", str(entries)]
        outcome(line)


varies = st.one_of(
    st.text(max_size=30),
    st.builds(lambda k, a, b, step: f"{k}={a}..{b}" + (f":{step}" if step is not None else ""),
              st.sampled_from(["seed", "fabric.spines", "nope", "workload.size"]),
              st.integers(-5, 10**12), st.integers(-5, 10**12), st.none() | st.integers(-2, 10**12)),
    st.builds(lambda k, vs: f"{k}={','.join(vs)}",
              st.sampled_from(["seed", "fabric.leaves", "routing.strategy"]),
              st.lists(st.sampled_from(["1", "2", "0", "-1", "x", "[", "{a: 1", "'", "1e400", "ecmp",
                                        "os:abort", ""]), max_size=5)),
)


@pytest.mark.slow
@HEAVY
@given(vary=varies)
def test_any_vary_is_swept_or_refused_with_one_line(vary: str) -> None:
    try:
        size = len(parse_vary(vary).values)
    except SweepError:
        size = 0
    assume(size <= 1)  # a valid vary of many points is a real sweep: minutes, not a fuzz case
    with tempfile.TemporaryDirectory() as folder:
        scenario = Path(folder) / "s.yaml"
        scenario.write_text("name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                            "workload: {pattern: permutation, size: 1MiB}\n")
        code, out, err = outcome_allowing_failed_points(
            ["sweep", str(scenario), "--vary", vary, "--executor", "serial", "--json",
             "--db", str(Path(folder) / "s.duckdb")])
        if code == 0:
            assert "summary" in json.loads(out)


def outcome_allowing_failed_points(argv: list[str]) -> tuple[int, str, str]:
    """A sweep whose points ran but failed (a varied value the run refuses) exits 1 with
    its summary: that is a result too."""
    import contextlib
    import io

    from cloudtwin.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 1, 2), err.getvalue()[-2000:]
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert out.getvalue() == "" and err.getvalue().count("\n") == 1, err.getvalue()[-2000:]
    if code == 1:
        assert "points failed" in err.getvalue()
    return code, out.getvalue(), err.getvalue()


cells = st.one_of(
    st.integers(-3, 6).map(str), st.sampled_from(["host1", "host99", "host1/nic0", "1GiB", "0", "-5", "1e400",
                                                   "nan", "inf", "1e300", "2us", "x", "", '"1,2"', "\x00"]),
    st.text(max_size=8),
)
columns = st.lists(st.sampled_from(["source", "destination", "bytes", "start", "tenant", "qps", "path", "x"]),
                   min_size=1, max_size=5)


@FAST
@given(header=columns, rows=st.lists(st.lists(cells, min_size=1, max_size=6), max_size=8))
def test_any_flow_file_runs_or_is_refused_with_one_line(header: list[str], rows: list[list[str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        text = ",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows)
        (Path(folder) / "f.csv").write_text(text, encoding="utf-8", errors="replace")
        scenario = Path(folder) / "s.yaml"
        scenario.write_text("name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                            "workload: {kind: flows, file: f.csv}\n")
        code, out, _ = outcome(["run", str(scenario), "--json"])
        if code == 0:
            assert json.loads(out)["flows"] >= 1
