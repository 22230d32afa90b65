"""Hostile input for `cloudtwin sweep`, `migrate plan` and `evaluate` (issue 24).

`cases` are single CLI runs for `benchmarks/bad_inputs.py` (ok or clean is a pass): sweeps
of 10^6 and 10^7 points, a seed-only `--plot`, downtimes at and over the limit, evaluate
without a store or a report folder. `probes` run what one exit code cannot judge: that a
sweep leaves no worker running (after an out-of-memory point with the process pool, a
seed-only plot, a driver killed with SIGKILL), and that `evaluate --no-store` writes
nothing to the disk.

    python benchmarks/hostile/cli.py      # runs them all and prints one line each
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
LIMIT_S = 60
SMALL = "name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
MIGRATE = ["migrate", "plan", "--memory", "1GiB", "--bandwidth", "1Gbps"]


def _small(tmp: Path) -> str:
    path = tmp / "cli-small.yaml"
    path.write_text(SMALL)
    return str(path)


def _sweep(tmp: Path, *more: str) -> list[str]:
    return ["sweep", _small(tmp), "--db", str(tmp / f"cli-sweep-{uuid.uuid4().hex[:8]}.duckdb"), *more]


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    million = ["--vary", "fabric.spines=1..1000", "--vary", "fabric.leaves=1..1000"]
    resiliency = str(REPO / "examples" / "resiliency.yaml")
    return [
        # 10^6 points: checked per varied value in seconds, not point by point for minutes
        ("sweep 10^6 points, a bad value", _sweep(tmp, "--vary", "fabric.spines=0..999",
                                                  "--vary", "fabric.leaves=1..1000"), None),
        ("sweep 10^6 points, the largest over limits.memory",
         _sweep(tmp, *million, "--set", "limits.memory=1MiB"), None),
        ("sweep 10^6 points, a bad strategy",
         _sweep(tmp, *million, "--vary", "routing.strategy=ecmp,nonsense"), None),
        # its four checks (one per range end, and the largest point) take about 0.1 ms each,
        # so the limit is far below their estimate on any machine, loaded or not
        ("sweep 10^6 points, checks above --check-limit",
         _sweep(tmp, *million, "--check-limit", "0.000001"), None),
        ("sweep 10^6 points, --check-limit -1", _sweep(tmp, *million, "--check-limit", "-1"), None),
        ("sweep 10^6 points zipped, a bad value", _sweep(tmp, "--zip", "--vary", "fabric.spines=0..999999",
                                                        "--vary", "fabric.leaves=1..1000000"), None),
        ("sweep 10^7 points",
         _sweep(tmp, "--vary", "fabric.spines=1..10000", "--vary", "fabric.leaves=1..1000"), None),
        ("sweep 10^7 seeds", _sweep(tmp, "--vary", "seed=1..10000000"), None),
        ("sweep seed-only --plot (serial)",
         _sweep(tmp, "--vary", "seed=1..3", "--executor", "serial", "--plot", str(tmp / "cli-seeds.png")),
         None),
        ("sweep seed-only --plot --x seed with another key", _sweep(
            tmp, "--vary", "seed=1,2", "--vary", "fabric.spines=1,2", "--executor", "serial", "--x", "seed",
            "--plot", str(tmp / "cli-seeds-x.svg")), None),
        ("sweep seed-only --plot --zip", _sweep(
            tmp, "--zip", "--vary", "seed=1,2", "--vary", "fabric.spines=1,2", "--vary", "fabric.leaves=2,3",
            "--executor", "serial", "--x", "seed", "--plot", str(tmp / "cli-seeds-zip.pdf")), None),
        ("sweep --plot onto a folder", _sweep(tmp, "--vary", "seed=1,2", "--executor", "serial",
                                              "--plot", str(tmp)), None),
        ("sweep --plot without a suffix", _sweep(tmp, "--vary", "seed=1,2", "--executor", "serial",
                                                 "--plot", str(tmp / "cli-plot")), None),
        # 300 ms limit: a pause just over it is "yes, over the limit", not plainly converged
        ("migrate plan idle VM (300.5 ms pause)", MIGRATE, None),
        ("migrate plan 309 ms pause", [*MIGRATE, "--dirty-rate", "100MiB/s", "--working-set", "36MiB"], None),
        ("migrate plan --downtime-limit 1ms", [*MIGRATE, "--downtime-limit", "1ms"], None),
        ("migrate plan --downtime-limit 0", [*MIGRATE, "--downtime-limit", "0"], None),
        ("migrate plan --downtime-limit 1e400ms", [*MIGRATE, "--downtime-limit", "1e400ms"], None),
        ("migrate plan --json over the limit", [*MIGRATE, "--downtime-limit", "5ms", "--json"], None),
        ("migrate plan --plot", [*MIGRATE, "--plot", str(tmp / "cli-rounds.png")], None),
        ("evaluate --no-store --json, no --out",
         ["evaluate", resiliency, "--strategies", "ecmp", "--no-store", "--json"], None),
        ("evaluate --no-store --out under a file",
         ["evaluate", resiliency, "--strategies", "ecmp", "--no-store", "--out",
          str(tmp / "cli-small.yaml" / "r")], None),
    ]


def _marked(marker: str) -> list[int]:
    """Processes (not zombies) whose environment carries `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def _leftovers(marker: str) -> list[int]:
    """What is still running 10 s after the command ended (a pool takes a moment to stop)."""
    deadline = time.monotonic() + 10
    while (left := _marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:  # the probe cleans up after a failure
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


def _judge(code: int, err: str, left: list[int]) -> tuple[str, str]:
    last = err.strip().splitlines()[-1] if err.strip() else ""
    if "Traceback" in err:
        return "traceback", last
    if left:
        return f"left {len(left)} processes running", last
    if code == 2 and last.startswith("cloudtwin: error: "):
        return "clean", last
    return ("ok", last) if code == 0 else (f"exit {code}", last)


def _cli(argv: list[str], cwd: Path) -> tuple[str, str]:
    """Run the CLI; judge it by its exit code and last line, and by what it leaves running."""
    marker = f"CLOUDTWIN_PROBE={uuid.uuid4().hex}"
    key, _, value = marker.partition("=")
    process = subprocess.Popen([str(CLOUDTWIN), *argv], cwd=cwd, env={**os.environ, key: value},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        _, err = process.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        _leftovers(marker)
        return "hang", ""
    return _judge(process.returncode, err, _leftovers(marker))


def _killed_driver(tmp: Path) -> tuple[str, str]:
    """SIGKILL a sweep's driver while its pool runs points: no worker may keep computing."""
    marker = uuid.uuid4().hex
    argv = _sweep(tmp, "--vary", "seed=1..400", "--workers", "2", "--set", "fabric.leaves=16")
    process = subprocess.Popen([str(CLOUDTWIN), *argv], env={**os.environ, "CLOUDTWIN_PROBE": marker},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "/400 points" in line and not line.rsplit(": ", 1)[1].startswith("0/"):
            break
    process.kill()
    process.wait()
    left = _leftovers(marker)
    return ("ok", "no worker outlived the killed driver") if not left else (
        f"left {len(left)} processes running", "workers outlived the killed driver")


def _evaluate_writes_nothing(tmp: Path) -> tuple[str, str]:
    where = tmp / f"cli-evaluate-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    scenario = str(REPO / "examples" / "resiliency.yaml")
    argv = ["evaluate", scenario, "--strategies", "ecmp", "--no-store", "--json"]
    outcome, last = _cli(argv, where)
    written = sorted(p.name for p in where.iterdir())
    return (outcome, last) if not written else (f"wrote {', '.join(written)}", last)


def probes(tmp: Path) -> list[tuple[str, Callable[[], tuple[str, str]]]]:
    small = _small(tmp)
    memory = ["--set", "limits.memory=1000TiB", "--set", "fabric.leaves=100000", "--workers", "2"]
    return [
        ("sweep limits.memory=1000TiB, process pool, nothing left running",
         lambda: _cli(_sweep(tmp, "--vary", "seed=1,2", *memory), tmp)),
        ("sweep limits.memory=1000TiB, 6 points on 2 workers, nothing left running",
         lambda: _cli(_sweep(tmp, "--vary", "seed=1..6", *memory), tmp)),
        ("sweep seed-only --plot, process pool, nothing left running",
         lambda: _cli(["sweep", small, "--vary", "seed=1..4", "--workers", "2", "--db",
                       str(tmp / "cli-plot.duckdb"), "--plot", str(tmp / "cli-plot.png")], tmp)),
        ("sweep driver killed mid-run, nothing left running", lambda: _killed_driver(tmp)),
        ("evaluate --no-store --json writes nothing", lambda: _evaluate_writes_nothing(tmp)),
    ]


def main() -> None:
    import tempfile

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bad_inputs import run_one

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chdir(tmp)
        for label, argv, stdin in cases(tmp):
            kind, elapsed, _, last = run_one(argv, stdin)
            flag = "" if kind in ("ok", "clean") else "  <--"
            print(f"{kind:9} {elapsed:6.1f}s  {label}: {last[:110]}{flag}", flush=True)
        for label, probe in probes(tmp):
            start = time.perf_counter()
            kind, last = probe()
            flag = "" if kind in ("ok", "clean") else "  <--"
            print(f"{kind:9} {time.perf_counter() - start:6.1f}s  {label}: {last[:110]}{flag}", flush=True)


if __name__ == "__main__":
    main()
