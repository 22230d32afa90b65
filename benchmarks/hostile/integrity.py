"""Hostile input for what must be neither lost nor wrong: the federation state under many
writers, one site's token against another's consent, log segments swapped or linked, a
migration's timeout, `abort_at` and gateway failures, P4 compound assignment and includes.

`cases` are single CLI runs for `benchmarks/bad_inputs.py` (ok or clean is a pass). `probes`
judge what an exit code cannot: that every acknowledged change is in the state file after a
restart, that a refusal changes nothing, that the numbers are right.

    python benchmarks/hostile/integrity.py      # runs them all and prints one line each
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / ".." / "shared" / "datasets"
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
MIGRATION = str(REPO / "examples" / "migration.yaml")
ONE_CLOUD = str(REPO / "examples" / "one-cloud.yaml")
COMPOUND = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct H { h_t h; h_t[2] s; }
struct M { }
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t sm) {
    state start { p.extract(h.h); p.extract(h.s.next); p.extract(h.s.next); transition accept; }
}
bit<8> post(inout bit<8> x) { bit<8> was = x; x += 1; return was; }
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    apply { h.s[post(h.h.a) & 1].b += 1; h.s[post(h.h.a) & 1].b |= 0x0f; sm.egress_spec = 1; }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out p, in H h) { apply { p.emit(h.h); p.emit(h.s); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
#: s[0].b 0x20 + 1, s[1].b 0x40 | 0x0f, a incremented twice: each index evaluated once
COMPOUND_STF = "packet 0 00 00 10 20 30 40\nexpect 1 02 00 10 21 30 4f $\n"


def _cloudtwin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLOUDTWIN), *args], capture_output=True, text=True, timeout=120)


def _segmented_store(tmp: Path, name: str) -> Path:
    """A store of two Loghub samples ingested by a pool (their lines in segments)."""
    db = tmp / f"{name}.duckdb"
    for system, fmt in (("HDFS", "hdfs"), ("Hadoop", "hadoop")):
        log = DATASETS / "loghub-2k" / system / f"{system}_2k.log"
        _cloudtwin("logs", "ingest", str(log), "-f", fmt, "--db", str(db), "--executor", "process",
                   "--workers", "2")
    return db


def _segments(db: Path) -> list[Path]:
    return sorted(Path(str(db) + ".segments").glob("seg-*.parquet"))


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    program, script = tmp / "compound.p4", tmp / "compound.stf"
    program.write_text(COMPOUND)
    script.write_text(COMPOUND_STF)
    out: list[tuple[str, list[str], bytes | None]] = [
        ("migrate run, abort_at before start", ["migrate", "run", MIGRATION, "--set",
         "mobility.migrations.0.start=2s", "--set", "mobility.migrations.0.abort_at=1s"], None),
        ("migrate run, abort_at at start", ["migrate", "run", MIGRATION, "--set",
         "mobility.migrations.0.abort_at=0s"], None),
        ("nic stf, v1model include found nowhere", ["nic", "stf", str(program), str(script),
         "-I", str(tmp)], None),
    ]
    if (DATASETS / "loghub-2k").is_dir():
        swapped = _segmented_store(tmp, "swapped")
        files = _segments(swapped)
        if len(files) >= 2:
            parked = files[0].with_name("parked")
            files[0].rename(parked)
            files[1].rename(files[0])
            parked.rename(files[1])
        linked = _segmented_store(tmp, "linked")
        files = _segments(linked)
        if len(files) >= 2:
            files[0].unlink()
            files[0].symlink_to(files[1])
        for db, what in ((swapped, "two segments swapped"), (linked, "a segment linked to another")):
            out += [
                (f"logs sql, {what}",
                 ["logs", "sql", "SELECT count(*) FROM ops_lines", "--db", str(db)], None),
                (f"logs compact, {what}", ["logs", "compact", "--db", str(db)], None),
            ]
    return out


class _Service:
    """`cloudtwin serve` over a store in `tmp`, started and stopped by a probe."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = tmp / "fed.duckdb"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = self.token = ""

    def __enter__(self) -> _Service:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = self.tmp / "fed.token"
        log = (self.tmp / "fed-serve.log").open("ab")
        self.process = subprocess.Popen(
            [str(CLOUDTWIN), "serve", "--db", str(self.db), "--port", str(port), "--token-file", str(token)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if token.exists() and self.request("GET", "/api/runs", None, "")[0] == 200:
                self.token = token.read_text().strip()
                return self
            time.sleep(0.2)
        raise RuntimeError("cloudtwin serve did not start")

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=30)

    def request(self, method: str, path: str, body: object, token: str | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        bearer = self.token if token is None else token
        headers = {"Content-Type": "application/json"}
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")
        except (OSError, TimeoutError):
            return 0, {}


def _concurrent_sites(tmp: Path) -> tuple[str, str]:
    room = tmp / "concurrent"
    room.mkdir(exist_ok=True)
    with _Service(room) as service:
        def post(k: int) -> tuple[str, int]:
            body = {"name": f"site-{k:03d}", "token": f"site-token-{k:03d}-0123456789"}
            return body["name"], service.request("POST", "/api/federation/sites", body)[0]

        with ThreadPoolExecutor(max_workers=100) as pool:
            answers = list(pool.map(post, range(100)))
    acknowledged = {name for name, status in answers if status == 201}
    with _Service(room) as again:
        _, listed = again.request("GET", "/api/federation/sites", None)
    kept = {site["name"] for site in listed} if isinstance(listed, list) else set()
    lost = acknowledged - kept
    kind = "ok" if not lost and acknowledged else "lost"
    return kind, f"{len(acknowledged)} acknowledged, {len(lost)} lost after a restart"


def _site_deletes_shared_network(tmp: Path) -> tuple[str, str]:
    room = tmp / "consent"
    room.mkdir(exist_ok=True)
    tokens = {"a": "site-a-token-0123456789", "b": "site-b-token-0123456789"}
    with _Service(room) as service:
        for site, token in tokens.items():
            service.request("POST", "/api/federation/sites", {"name": site, "token": token})
        net = {"name": "shared", "tenant": "red", "mode": "l3-routed", "sites": ["a", "b"]}
        service.request("POST", "/api/federation/networks", net)
        segment = {"network": "shared", "tenant": "red", "vni": 1001, "address": "10.1.0.10/24"}
        service.request("POST", "/api/federation/sites/a/segments", segment, tokens["a"])
        status, _ = service.request("DELETE", "/api/federation/networks/shared", None, tokens["b"])
        _, after = service.request("GET", "/api/federation/status", None)
    consented = after[0]["consented"] if isinstance(after, list) and after else []
    kind = "ok" if status == 403 and consented == ["a"] else "wrong"
    return kind, f"site b's DELETE answered {status}; consented afterwards: {consented}"


def _migration(*overrides: str, scenario: str = MIGRATION) -> list[dict[str, object]]:
    args = ["migrate", "run", scenario, "--json"]
    for override in overrides:
        args += ["--set", override]
    done = _cloudtwin(*args)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[:200])
    return list(json.loads(done.stdout)["migrations"])


def _timeout_holds() -> tuple[str, str]:
    worst = 0.0
    for override in ("mobility.wan.bandwidth=1bps", "mobility.wan.latency=1000000s"):
        worst = max(worst, *(float(m["total_time_s"]) for m in _migration(override)))  # type: ignore[arg-type]
    return ("ok" if worst <= 3600.0 else "wrong"), f"longest aborted migration: {worst:g} s (timeout 3600 s)"


def _late_migration_sees_no_old_failover() -> tuple[str, str]:
    [m] = _migration("mobility.migrations=[{vm: shop, to: west, start: 1000000000s}]", scenario=ONE_CLOUD)
    events = m["path_events"]
    return ("ok" if events == [] else "wrong"), f"path events: {events}"


def _overlapping_gateway_faults() -> tuple[str, str]:
    both = "federation.gateway_faults=[{site: east, at: 1.5s}, {site: west, at: 2s}]"
    one, two = _migration(scenario=ONE_CLOUD), _migration(both, scenario=ONE_CLOUD)
    later = [float(m["total_time_s"]) > float(o["total_time_s"]) for m, o in zip(two, one, strict=True)]  # type: ignore[arg-type]
    return ("ok" if all(later) else "wrong"), f"the second failure delays every migration: {later}"


def _compound_assignment(tmp: Path) -> tuple[str, str]:
    program, script = tmp / "compound-ok.p4", tmp / "compound-ok.stf"
    program.write_text(COMPOUND)
    script.write_text(COMPOUND_STF)
    done = _cloudtwin("nic", "stf", str(program), str(script), "-I", str(DATASETS / "p4c-stf" / "include"))
    return ("ok" if done.returncode == 0 else "wrong"), (done.stdout or done.stderr).strip()[:200]


def probes(tmp: Path) -> list[tuple[str, Callable[[], tuple[str, str]]]]:
    return [
        ("100 concurrent POST /api/federation/sites, all kept after a restart",
         lambda: _concurrent_sites(tmp)),
        ("site b deletes the network it shares with a: 403, a's consent kept",
         lambda: _site_deletes_shared_network(tmp)),
        ("migration timeout holds inside a round (1 bps WAN, 1e6 s latency)", _timeout_holds),
        ("a migration starting at 1e9 s reports no earlier failover", _late_migration_sees_no_old_failover),
        ("a second gateway failure during the first failover is applied", _overlapping_gateway_faults),
        ("P4 compound assignment evaluates a run-time index once", lambda: _compound_assignment(tmp)),
    ]


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bad_inputs import run_one  # type: ignore[import-not-found]

    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chdir(tmp)
        results = [(label, *run_one(argv, stdin)[::3]) for label, argv, stdin in cases(tmp)]
        results += [(label, *probe()) for label, probe in probes(tmp)]
        for label, kind, last in results:
            counts[kind] = counts.get(kind, 0) + 1
            flag = "" if kind in ("ok", "clean") else "  <--"
            print(f"{kind:9} {label}: {str(last)[:110]}{flag}", flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(counts, sort_keys=True))


if __name__ == "__main__":
    main()
