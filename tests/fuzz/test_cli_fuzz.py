"""Random and hostile input through the CLI's entry point, in process.

Whatever the input (valid or broken scenarios, deep or huge or aliased YAML, random
`--set` overrides, random log lines and JSON lines, binary data), the outcome is exit 0
with a result on stdout, or exit 2 with exactly one line on stderr: never a traceback,
and within a time and memory bound.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudtwin.cli.app import main

#: Per input: a call still running after this long is a hang (a guard, not a measurement:
#: the bound is far above any input's time on a loaded machine), and the peak Python/numpy
#: allocation (tracemalloc sees numpy too).
HANG_SECONDS = 300
MAX_PEAK_BYTES = 1 << 30


class Hung(BaseException):
    """Raised into a CLI call that is still running at HANG_SECONDS (BaseException: the CLI's
    own error handling must not swallow it)."""


def _hung(signum: int, frame: object) -> None:
    raise Hung(f"still running after {HANG_SECONDS} s")

FUZZ = settings(
    max_examples=40, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Each log example runs several commands, each opening the store: fewer examples.
FUZZ_LOGS = settings(FUZZ, max_examples=15)

# Small valid fabrics, with limits low enough that any run the fuzzer builds is quick.
BASE = {
    "name": "fuzz",
    "seed": 1,
    "fabric": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2},
    "workload": {"pattern": "permutation", "size": "8MiB"},
    "limits": {"flows": 2000, "memory": "256MiB"},
}

KEYS = [
    "name", "seed", "fabric.kind", "fabric.leaves", "fabric.spines", "fabric.hosts_per_leaf",
    "fabric.host_link", "fabric.uplink", "fabric.latency", "fabric.k", "fabric.uplinks_per_spine",
    "hosts.nics", "hosts.gpus", "hosts.udp_sport", "routing.strategy", "routing.hash",
    "workload.kind", "workload.pattern", "workload.size", "workload.qps", "workload.shift",
    "workload.incast_senders", "workload.op", "workload.channels", "tenants", "tenants.0",
    "tenants.0.name", "tenants.0.vni", "tenants.0.hosts", "faults", "faults.0.capacity",
    "workloads", "nope", "fabric.nope", "",
]
HOSTILE_VALUES = [
    "0", "-1", "1", "2", "3", "4", "7", "10**30", "1e400", "nan", "inf", "-inf", "true", "null",
    "~", "[]", "{}", "[1, 2]", "{a: 1}", "'x'", "leaf-spine", "fat-tree", "rail-optimized",
    "ecmp", "pinning", "spray", "adaptive", "ecmp-qp", "os:abort", "builtins:object",
    "100%", "150%", "0%", "1e-300Gbps", "100Gbps", "1bps", "8MiB", "1e400GiB", "2us", "-1us",
    "shift", "all-to-all", "incast", "pairs", "collective", "perftest", "alltoall",
    "allreduce", "0-3", "3-0", "0-99999999", "[{name: t, vni: 1, hosts: '0-1'}]",
    "[{kind: link, target: leaf0-spine1, at: 0s, capacity: 50%}]",
    "[{kind: link, target: leaf9-spine9}]", "18446744073709551616", "'" + "x" * 5000 + "'",
]

overrides = st.lists(
    st.one_of(
        st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), st.sampled_from(HOSTILE_VALUES)),
        st.text(max_size=40),
    ),
    max_size=4,
)


def _nested(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def _bomb(levels: int, width: int) -> str:
    lines = [f"b0: &b0 [{', '.join(['x'] * width)}]"]
    lines += [f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nname: *b{levels - 1}\n"


def _yaml(document: object) -> str:
    return json.dumps(document)  # JSON is YAML


scalar = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True), st.text(max_size=20), st.sampled_from(HOSTILE_VALUES),
)
documents = st.one_of(
    st.just(_yaml(BASE)),
    st.builds(  # the base with one section replaced by random data
        lambda key, value: _yaml({**BASE, key: value}),
        st.sampled_from(["fabric", "workload", "tenants", "faults", "hosts", "routing", "seed",
                         "limits", "workloads", "name", "extra"]),
        st.recursive(scalar, lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ), max_leaves=12),
    ),
    st.text(max_size=200),  # broken text
    st.builds(_nested, st.integers(min_value=1, max_value=30_000)),  # deep
    st.builds(_bomb, st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=12)),
    st.builds(lambda n: _yaml({**BASE, "name": "n" * n}), st.integers(0, 300_000)),  # huge
    st.builds(lambda k: _yaml({**BASE, **{f"k{i}": i for i in range(k)}}), st.integers(0, 5000)),
)


def outcome(argv: list[str], stdin: bytes = b"", allow_empty: bool = False) -> tuple[int, str, str]:
    """Run the CLI in process; exit code, stdout and stderr, checked against the bounds.

    A success prints something, unless `allow_empty` (one JSON line per input line of an
    empty input is nothing)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    tracemalloc.start()
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        sys.stdin = old_stdin
    assert peak < MAX_PEAK_BYTES, (argv[:3], peak)
    stdout, stderr = out.getvalue(), err.getvalue()
    assert code in (0, 2), (argv[:3], code, stderr[-2000:])
    if code == 2:
        assert stdout == "", argv[:3]
        assert stderr.count("\n") == 1 and stderr.startswith("cloudtwin: error: "), stderr[-2000:]
    else:
        assert stdout.strip() or allow_empty, argv[:3]
    return code, stdout, stderr


@pytest.mark.slow
@FUZZ
@given(document=documents, sets=overrides, strategy=st.sampled_from(["ecmp", "pinning", "spray"]))
def test_any_scenario_and_overrides_give_a_result_or_one_line(
    document: str, sets: list[str], strategy: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(document, encoding="utf-8")
        argv = ["run", str(path), "--json", "--strategy", strategy]
        for item in sets:
            argv += ["--set", item]
        code, out, _ = outcome(argv)
        if code == 0:
            assert json.loads(out)["flows"] >= 0


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["msg", "message", "level", "ts", "component", "x"]),
                        inner, max_size=4),
    ),
    max_leaves=10,
)
log_lines = st.one_of(
    st.text(max_size=300),
    st.builds(lambda n: " ".join(f"w{i}" for i in range(n)), st.integers(0, 400)),
    st.builds(json.dumps, json_values),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 6000)),
    st.just("081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 terminating"),
)
log_files = st.one_of(
    st.lists(log_lines, max_size=30).map(lambda lines: "\n".join(lines).encode("utf-8", "replace")),
    st.binary(max_size=3000),
)
PRESETS = ["hdfs", "linux", "openssh", "zookeeper", "jsonl", "syslog", "rfc5424", "<A> <Content>"]


QUERIES = [["templates"], ["counts", "--window", "1s"], ["anomalies"], ["search", "a"],
           ["sql", "SELECT count(*) AS n FROM ops_lines"]]


@pytest.mark.slow
@FUZZ_LOGS
@given(data=log_files, preset=st.sampled_from(PRESETS), via_stdin=st.booleans(),
       query=st.sampled_from(QUERIES))
def test_any_log_is_parsed_and_ingested_or_refused_with_one_line(
    data: bytes, preset: str, via_stdin: bool, query: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "x.log"
        log.write_bytes(data)
        source = "-" if via_stdin else str(log)
        outcome(["logs", "parse", source, "-f", preset, "--jsonl"], data, allow_empty=not data)
        db = str(Path(folder) / "s.duckdb")
        code, out, _ = outcome(["logs", "ingest", source, "-f", preset, "--db", db, "--json"], data)
        if code == 0:
            [summary] = json.loads(out)
            again = outcome(["logs", "ingest", source, "-f", preset, "--db", db, "--json"], data)
            assert json.loads(again[1])[0]["lines"] == 0  # stored once, not twice
            assert summary["lines"] + summary["unparsed"] >= 0
            outcome(["logs", *query, "--db", db, "--json"])


@pytest.fixture(scope="module")
def query_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small store of timestamped lines, made once for the query flags below."""
    db = str(tmp_path_factory.mktemp("fuzz") / "s.duckdb")
    lines = "\n".join(
        f"0811{9 + i // 1000:02d} {i % 24:02d}0000 {i} INFO dfs.X: block {i} done"
        for i in range(200)
    )
    outcome(["logs", "ingest", "-", "-f", "hdfs", "--db", db], lines.encode())
    return db


@pytest.mark.slow
@FUZZ_LOGS
@given(args=st.lists(st.one_of(st.sampled_from(
    ["--window", "0ms", "1ms", "99999999999d", "--since", "x", "2008-11-09", "--until",
     "--limit", "0", "-1", "5", "--by", "node", "component", "--max-rows", "--timeout",
     "--max-cells", "1", "--threshold", "nan", "--history", "--json", "--pca"]),
    st.text(max_size=10)), max_size=6), command=st.sampled_from(
    ["templates", "search", "sql", "counts", "anomalies"]))
def test_random_query_flags_give_a_result_or_one_line(
    query_db: str, args: list[str], command: str
) -> None:
    head = ["SELECT 1"] if command == "sql" else ["x"] if command == "search" else []
    outcome(["logs", command, *head, *args, "--db", query_db])
