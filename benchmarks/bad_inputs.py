"""Run broken, empty, deep, huge and hostile inputs through every command and count outcomes.

Each input runs `cloudtwin` in its own process with a 60 s limit; the outcome is one of
ok (exit 0), clean (exit 2, one line on stderr, nothing on stdout), traceback, other
exit, hang (killed at 60 s), big (peak memory above 8 GiB) or left running (a process the
command started outlived it). Besides the cases below, every module in benchmarks/hostile/
adds its room's cases (`cases(tmp)`, CLI calls) and probes (`probes(tmp)`, e.g. HTTP requests
to a running service, each returning its outcome). Prints one line per input, then the
counts and the number of failures.

    python benchmarks/bad_inputs.py              # from the repository root, next to shared/
    python benchmarks/bad_inputs.py --only nic   # the inputs whose label names nic
"""

from __future__ import annotations

import argparse
import functools
import gzip
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
HDFS = REPO / ".." / "shared" / "datasets" / "loghub-2k" / "HDFS" / "HDFS_2k.log"
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
LIMIT_S = 60
BIG_KB = 8 << 20


def scenarios(tmp: Path) -> dict[str, str]:
    bomb = ['a0: &a0 ["l","l","l","l","l","l","l","l","l"]']
    bomb += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    small = "name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
    return {
        "empty": "",
        "comment-only": "# nothing\n",
        "not-a-mapping": "- 1\n- 2\n",
        "broken-yaml": "name: [unclosed\n",
        "tabs": "name:\tx\n\tfabric: 1\n",
        "binary": "\x00\x01\x02",
        "alias-bomb": "\n".join(bomb) + "\nname: *a8\n",
        "deep-brackets": "a: " + "[" * 20_000 + "]" * 20_000,
        "deep-blocks": "".join("  " * i + f"k{i}:\n" for i in range(300)),
        "huge-text": "name: " + "x" * 5_000_000 + "\n",
        "many-keys": small + "".join(f"k{i}: {i}\n" for i in range(20_000)),
        "dup-key": small + "seed: 1\nseed: 2\n",
        "unknown-key": small + "colour: blue\n",
        "seed-2^64": small + f"seed: {2**64}\n",
        "negative-leaves": small.replace("leaves: 2", "leaves: -2"),
        "float-leaves": small.replace("leaves: 2", "leaves: 2.5"),
        "huge-hosts": "name: h\nfabric: {kind: leaf-spine, leaves: 16, hosts_per_leaf: 62500}\n",
        "fat-tree-180": "name: f\nfabric: {kind: fat-tree, k: 180}\n",
        "fat-tree-odd": "name: f\nfabric: {kind: fat-tree, k: 7}\n",
        "uplinks-1e5": small.replace("hosts_per_leaf: 2}", "hosts_per_leaf: 2, uplinks_per_spine: 100000}"),
        "tiny-rate": small.replace("hosts_per_leaf: 2}", "hosts_per_leaf: 2, host_link: 1e-300Gbps}"),
        "inf-rate": small.replace("hosts_per_leaf: 2}", "hosts_per_leaf: 2, uplink: 1e400Gbps}"),
        "no-unit": small.replace("hosts_per_leaf: 2}", "hosts_per_leaf: 2, latency: 5}"),
        "size-1e400": small + "workload: {size: 1e400GiB}\n",
        "shift-101": small + "workload: {pattern: shift, shift: 101}\n",
        "one-vni": small + "tenants: [{name: a, vni: 7, hosts: '0-1'}, {name: b, vni: 7, hosts: '2-3'}]\n",
        "host-outside": small + "tenants: [{name: a, vni: 7, hosts: '0-99'}]\n",
        "capacity-100%": small + "faults: [{kind: link, target: leaf0-spine1, capacity: 100%}]\n",
        "capacity-150%": small + "faults: [{kind: link, target: leaf0-spine1, capacity: 150%}]\n",
        "fault-no-link": small + "faults: [{kind: link, target: leaf9-spine9}]\n",
        "strategy-os-abort": small + "routing: {strategy: 'os:abort'}\n",
        "strategy-object": small + "routing: {strategy: 'builtins:object'}\n",
        "alltoall-1024": "name: a\nfabric: {kind: fat-tree, k: 8}\nhosts: {gpus: 8}\n"
        "workload: {kind: collective, op: alltoall}\n",
        "small": small,
    }


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    out: list[tuple[str, list[str], bytes | None]] = []
    for name, text in scenarios(tmp).items():
        path = tmp / f"{name}.yaml"
        path.write_text(text)
        out.append((f"run {name}", ["run", str(path)], None))
    small = str(tmp / "small.yaml")
    for name, sets in {
        "set-no-equals": ["seed"], "set-empty-key": ["=3"], "set-into-scalar": ["name.x=1"],
        "set-list-index": ["tenants.5.name=x"], "set-scalar-tenant": ["tenants=[t1]", "tenants.0.name=x"],
        "set-yaml-flow": ["fabric={"], "set-huge-int": ["fabric.leaves=" + "9" * 400],
        "set-limits": ["limits.memory=1KiB"], "set-nan": ["fabric.latency=nan"],
    }.items():
        argv = ["run", small]
        for item in sets:
            argv += ["--set", item]
        out.append((f"run {name}", argv, None))
    res = str(EX / "resiliency.yaml")
    rs = str(EX / "routing-strategies.yaml")
    out += [
        ("run missing file", ["run", str(tmp / "nope.yaml")], None),
        ("run a folder", ["run", str(tmp)], None),
        ("run out onto folder", ["run", small, "--out", str(tmp)], None),
        ("run out read-only", ["run", small, "--out", "/proc/x.json"], None),
        ("run resiliency (jobs+faults)", ["run", res], None),
        ("compare duplicate", ["compare", small, "--strategies", "ecmp,ecmp"], None),
        ("compare empty list", ["compare", small, "--strategies", ","], None),
        ("compare unknown", ["compare", small, "--strategies", "ecmp,nope"], None),
        ("nccl -b 1", ["nccl-tests", rs, "-b", "1", "--op", "allgather"], None),
        ("nccl -b 0", ["nccl-tests", rs, "-b", "0"], None),
        ("nccl -e < -b", ["nccl-tests", rs, "-b", "1G", "-e", "1M"], None),
        ("nccl -f 1", ["nccl-tests", rs, "-f", "1"], None),
        ("nccl bad op", ["nccl-tests", rs, "--op", "gossip"], None),
        ("nccl alltoall 1024",
         ["nccl-tests", str(tmp / "alltoall-1024.yaml"), "-b", "1M", "-e", "16M"], None),
        ("train bad plot", ["train", str(EX / "vela.yaml"), "--plot", "x.jpg"], None),
        ("train plot read-only", ["train", str(EX / "vela.yaml"), "--plot", "/proc/x.png"], None),
        ("train gpus 0", ["train", str(EX / "vela.yaml"), "--gpus", "0"], None),
        ("train gpus junk", ["train", str(EX / "vela.yaml"), "--gpus", "a,b"], None),
        ("hpl N=1", ["hpl", str(EX / "vela-hpl.yaml"), "--set", "workload.n=1"], None),
        ("evaluate out onto file", ["evaluate", small, "--out", small], None),
        ("evaluate no-op degradation", ["evaluate", str(tmp / "capacity-100%.yaml"), "--strategies",
                                        "ecmp", "--no-store", "--out", str(tmp / "rep")], None),
        ("diagnose no store", ["diagnose", "--db", str(tmp / "none.duckdb")], None),
        ("unknown command", ["frobnicate"], None),
        ("unknown flag", ["run", small, "--frobnicate"], None),
    ]
    db = str(tmp / "ops.duckdb")
    rng = random.Random(7)
    blob = tmp / "blob.bin"
    blob.write_bytes(rng.randbytes(100_000))
    words = tmp / "words.log"
    words.write_text(" ".join(f"w{i}" for i in range(150)) + "\n")
    nested = tmp / "nested.jsonl"
    nested.write_text("[" * 5000 + "]" * 5000 + '\n{"msg": "ok"}\n')
    cut = tmp / "cut.log.gz"
    data = gzip.compress(HDFS.read_bytes())
    cut.write_bytes(data[: len(data) // 2])
    empty = tmp / "empty.log"
    empty.write_text("")
    hdfs = HDFS.read_bytes()
    out += [
        ("logs ingest hdfs", ["logs", "ingest", str(HDFS), "-f", "hdfs", "--db", db], None),
        ("logs ingest again (adds 0)", ["logs", "ingest", str(HDFS), "-f", "hdfs", "--db", db], None),
        ("logs ingest stdin", ["logs", "ingest", "-", "-f", "hdfs", "--db", db], hdfs),
        ("logs ingest /dev/zero", ["logs", "ingest", "/dev/zero", "-f", "hdfs", "--db", db], None),
        ("logs ingest binary", ["logs", "ingest", str(blob), "-f", "hdfs", "--db", db], None),
        ("logs ingest hostile words", ["logs", "ingest", str(words), "-f", "hdfs", "--db", db], None),
        ("logs ingest nested json", ["logs", "ingest", str(nested), "-f", "jsonl", "--db", db], None),
        ("logs ingest cut gzip", ["logs", "ingest", str(cut), "-f", "hdfs", "--db", db], None),
        ("logs ingest empty", ["logs", "ingest", str(empty), "-f", "hdfs", "--db", db], None),
        ("logs ingest folder", ["logs", "ingest", str(tmp), "-f", "hdfs", "--db", db], None),
        ("logs ingest bad format", ["logs", "ingest", str(HDFS), "-f", "<A> <B", "--db", db], None),
        ("logs parse empty mask", ["logs", "parse", str(HDFS), "-f", "hdfs", "--mask", ""], None),
        ("logs parse bad mask", ["logs", "parse", str(HDFS), "-f", "hdfs", "--mask", "("], None),
        ("logs templates --limit 0", ["logs", "templates", "--limit", "0", "--db", db], None),
        ("logs templates --limit -1", ["logs", "templates", "--limit", "-1", "--db", db], None),
        ("logs sql range(1e8)", ["logs", "sql", "SELECT * FROM range(100000000)", "--db", db], None),
        ("logs sql long", ["logs", "sql", "SELECT count(*) FROM range(100000000000)", "--db", db,
                           "--timeout", "5"], None),
        ("logs sql write", ["logs", "sql", "DELETE FROM ops_lines", "--db", db], None),
        ("logs sql two", ["logs", "sql", "SELECT 1; SELECT 2", "--db", db], None),
        ("logs sql file read", ["logs", "sql", "SELECT * FROM read_csv('/etc/passwd')", "--db", db], None),
        ("logs counts 1ms", ["logs", "counts", "--window", "1ms", "--db", db], None),
        ("logs anomalies 1ms", ["logs", "anomalies", "--window", "1ms", "--db", db], None),
        ("logs counts 0s", ["logs", "counts", "--window", "0s", "--db", db], None),
        ("logs counts huge window", ["logs", "counts", "--window", "999999999999d", "--db", db], None),
        ("logs search no text", ["logs", "search", "--db", db], None),
        ("logs search bad since", ["logs", "search", "x", "--since", "yesterday", "--db", db], None),
        ("logs no store", ["logs", "templates", "--db", str(tmp / "none.duckdb")], None),
        ("logs store is a file", ["logs", "templates", "--db", small], None),
    ]
    return out + newer_cases(tmp)


def newer_cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    """federate, migrate, nic, sweep and flow files."""
    out: list[tuple[str, list[str], bytes | None]] = []
    fed = (EX / "intercloud.yaml").read_text()
    for name, text in {
        "sites-scalar": "name: x\nsites: 3\n",
        "hosts-1e8": fed.replace('hosts: "0-1", address: 10.0.0.11/24',
                                 'hosts: "0-99999999", address: 10.0.0.11/24'),
        "net-unknown-site": fed.replace("sites: [east, west, lab]", "sites: [east, mars]"),
        "bad-address": fed.replace("10.0.0.21/24", "10.0.0.300/24"),
        "deep": "a: " + "[" * 20_000 + "]" * 20_000,
    }.items():
        path = tmp / f"fed-{name}.yaml"
        path.write_text(text)
        out.append((f"federate plan {name}", ["federate", "plan", str(path)], None))
    good = tmp / "fed" / "state.json"
    out.append(("federate apply (fresh state)", ["federate", "apply", str(EX / "intercloud.yaml"),
                                                 "--state", str(good)], None))
    for name, data in {
        "empty": b"", "binary": b"\xff\xfe\x00", "deep": b"[" * 100_000 + b"]" * 100_000,
        "version-only": b'{"version": 1}', "sites-null": b'{"version": 1, "generation": 0, "admin": "x", '
        b'"next_gateway": 1, "next_global": 0, "global_pool": "100.64.0.0/10", "sites": null, '
        b'"networks": {}, "segments": {}, "reports": {}}',
    }.items():
        state = tmp / f"state-{name}.json"
        state.write_bytes(data)
        out.append((f"federate status state {name}", ["federate", "status", "--state", str(state)], None))
    tokens = tmp / "tok" / "state.json"
    tokens.parent.mkdir()
    tokens.with_name("state.json.tokens").write_text('{"sites": []}')
    out.append(("federate apply bad tokens", ["federate", "apply", str(EX / "intercloud.yaml"),
                                              "--state", str(tokens)], None))
    mig = str(EX / "migration.yaml")
    plan = ["migrate", "plan", "--memory", "4GiB", "--dirty-rate", "50MiB/s", "--working-set", "1GiB"]
    out += [
        ("migrate plan 1bps", [*plan, "--bandwidth", "1bps"], None),
        ("migrate plan multifd 0", [*plan, "--multifd", "0"], None),
        ("migrate plan memory 1e400", ["migrate", "plan", "--memory", "1e400GiB"], None),
        ("migrate plan scenario + flags", ["migrate", "plan", mig, "--memory", "4GiB"], None),
        ("migrate plan plot read-only", [*plan, "--plot", "/proc/x.png"], None),
        ("migrate run twice one VM", ["migrate", "run", mig, "--set", "mobility.migrations="
                                      "[{vm: web1, to: west}, {vm: web1, to: west}]"], None),
        ("migrate run unknown VM", ["migrate", "run", mig, "--set", "mobility.migrations.0.vm=nope"], None),
        ("migrate run out onto folder", ["migrate", "run", mig, "--out", str(tmp)], None),
        ("migrate run hosts 1e8",
         ["migrate", "run", mig, "--set", "mobility.clouds.0.hosts=0-99999999"], None),
    ]
    p4 = EX / "p4"
    frames = str(p4 / "host-frames.pcap")
    nic = ["nic", "run", str(p4 / "vxlan_gateway.p4"), "--pcap", frames, "--from", "host"]
    entries = {
        "scalar": "tables: 3\n", "deep": "tables: " + "[" * 20_000 + "]" * 20_000,
        "huge": "# " + "x" * 5_000_000 + "\n", "dup-key": "tables: {}\ntables: {}\n",
    }
    for name, text in entries.items():
        path = tmp / f"entries-{name}.yaml"
        path.write_text(text)
        out.append((f"nic run entries {name}", [*nic, "--entries", str(path)], None))
    rng = random.Random(11)
    for name, data in {"empty": b"", "binary": rng.randbytes(10_000),
                       "pcapng": b"\x0a\x0d\x0d\x0a" + bytes(200),
                       "cut": (p4 / "host-frames.pcap").read_bytes()[:70]}.items():
        path = tmp / f"cap-{name}.pcap"
        path.write_bytes(data)
        out.append((f"nic run pcap {name}",
                    ["nic", "run", str(p4 / "parse_only.p4"), "--pcap", str(path)], None))
    program = tmp / "nomain.p4"
    program.write_text((p4 / "vxlan_gateway.p4").read_text().replace("main", "mian"))
    out += [
        ("nic run program binary", ["nic", "run", str(blob_file(tmp)), "--pcap", frames], None),
        ("nic run program undeclared type", ["nic", "run", str(program), "--pcap", frames], None),
        ("nic run port 2^70", [*nic, "--port", str(2**70)], None),
        ("nic run out onto folder", [*nic, "--out", str(tmp)], None),
        ("nic offload hosts 1e8", ["nic", "offload", str(EX / "smartnic.yaml"), "--set",
                                   "nic.groups.0.hosts=0-99999999"], None),
    ]
    small = str(tmp / "small.yaml")
    sweep = ["sweep", small, "--executor", "serial", "--db", str(tmp / "sweep.duckdb")]
    out += [
        ("sweep 20,000 listed values", [*sweep, "--vary", "seed=" + ",".join(map(str, range(20_000)))], None),
        ("sweep backwards range", [*sweep, "--vary", "seed=5..1"], None),
        ("sweep step 0", [*sweep, "--vary", "seed=1..5:0"], None),
        ("sweep range 1e11", [*sweep, "--vary", "seed=1..99999999999"], None),
        ("sweep deep value", [*sweep, "--vary", "seed=" + "[" * 5000], None),
        ("sweep unknown key", [*sweep, "--vary", "colour=1,2"], None),
        ("sweep strategy twice",
         [*sweep, "--vary", "seed=1,2", "-c", "compare", "--strategies", "ecmp,ecmp"], None),
    ]
    head = "source,destination,bytes,start\n"
    flow_files: dict[str, str | None] = {
        "empty": "", "binary": None, "bad-host": head + "a,1,100,0\n", "late": head + "0,1,100,1e300\n",
        "long-field": head + "0,1,100," + "0" * 200_000 + "\n", "many": head + "0,1,1000,0\n" * 400_000,
        "dev-zero": "/dev/zero", "folder": ".",
    }
    for name, content in flow_files.items():
        file = f"flows-{name}.csv"
        if name in ("dev-zero", "folder"):
            file = str(content)
        elif content is None:
            (tmp / file).write_bytes(rng.randbytes(5000))
        else:
            (tmp / file).write_text(content)
        scenario = tmp / f"flows-{name}.yaml"
        scenario.write_text("name: f\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
                            f"workload: {{kind: flows, file: '{file}'}}\n")
        out.append((f"run flow file {name}", ["run", str(scenario)], None))
    pairs = str(EX / "leaf-spine-pairs.yaml")
    out.append(("run --flows-out onto folder", ["run", pairs, "--flows-out", str(tmp)], None))
    return out


def blob_file(tmp: Path) -> Path:
    path = tmp / "blob.p4"
    path.write_bytes(random.Random(5).randbytes(20_000))
    return path


def run_one(argv: list[str], stdin: bytes | None) -> tuple[str, float, int, str]:
    """Run one input in its own session; the outcome, seconds, peak KiB and last stderr line.

    The peak is the child's own (from wait4), and a process the command leaves behind in its
    session counts as a failure ("left running") and is killed.
    """
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([str(CLOUDTWIN), *argv], stdin=subprocess.PIPE, stdout=out,
                                 stderr=err, env={**os.environ, "COLUMNS": "120"},
                                 start_new_session=True)
        assert child.stdin is not None
        try:
            child.stdin.write(stdin or b"")
            child.stdin.close()
        except BrokenPipeError:
            pass
        timer = threading.Timer(LIMIT_S, _kill_group, (child.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        hung = time.perf_counter() - start >= LIMIT_S
        left = _kill_group(child.pid)
        elapsed = time.perf_counter() - start
        peak_kb = usage.ru_maxrss
        out.seek(0)
        err.seek(0)
        stdout, text = out.read(), err.read().decode("utf-8", "replace")
    if hung:
        kind = "hang"
    elif "Traceback" in text:
        kind = "traceback"
    elif peak_kb > BIG_KB:
        kind = "big"
    elif left:
        kind = "left running"
    elif child.returncode == 0:
        kind = "ok"
    elif child.returncode == 2 and text.count("\n") == 1 and not stdout:
        kind = "clean"
    else:
        kind = f"exit {child.returncode}"
    return kind, elapsed, peak_kb, text.strip().splitlines()[-1] if text.strip() else ""


def _kill_group(pgid: int) -> bool:
    """Kill whatever is left in a case's session; whether anything was."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def hostile_modules() -> list[ModuleType]:
    """The per-room catalogues in benchmarks/hostile/, in name order."""
    folder = Path(__file__).resolve().parent / "hostile"
    modules = []
    for path in sorted(folder.glob("[!_]*.py")):
        spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only inputs whose label contains this text")
    args = parser.parse_args()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chdir(tmp)
        runs: list[tuple[str, Callable[[], tuple[str, float, str]]]] = []
        groups = [("", cases(tmp), [])]
        for module in hostile_modules():
            room = tmp / module.__name__
            room.mkdir()
            probes = module.probes(room) if hasattr(module, "probes") else []
            groups.append((module.__name__.removeprefix("hostile_") + ": ", module.cases(room), probes))
        for prefix, listed, probes in groups:
            for label, argv, stdin in listed:
                runs.append((prefix + label, functools.partial(_cli, argv, stdin)))
            for label, probe in probes:
                runs.append((prefix + label, functools.partial(_probe, probe)))
        for label, run in runs:
            if args.only not in label:
                continue
            kind, elapsed, last = run()
            counts[kind] = counts.get(kind, 0) + 1
            flag = "" if kind in ("ok", "clean") else "  <--"
            print(f"{kind:12} {elapsed:6.1f}s  {label}: {last[:110]}{flag}", flush=True)
    failures = sum(n for kind, n in counts.items() if kind not in ("ok", "clean"))
    print(json.dumps(counts, sort_keys=True))
    print(f"{failures} failures")


def _cli(argv: list[str], stdin: bytes | None) -> tuple[str, float, str]:
    kind, elapsed, _, last = run_one(argv, stdin)
    return kind, elapsed, last


def _probe(probe: Callable[[], tuple[str, str]]) -> tuple[str, float, str]:
    start = time.perf_counter()
    try:
        kind, last = probe()
    except Exception as error:  # a probe that breaks is a failure to report, not a crash
        kind, last = "probe error", f"{type(error).__name__}: {error}"
    return kind, time.perf_counter() - start, last


if __name__ == "__main__":
    main()
