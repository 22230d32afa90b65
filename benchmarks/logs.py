"""Benchmark of log template mining: cloudtwin's miner against drain3, side by side.

Prints, for the eight Loghub-2k systems, grouping accuracy (GA) and mining throughput
of both tools, then end-to-end throughput, peak memory and CPU per line on 1,000,000
lines (HDFS_2k repeated), and with --ten-million also on 10,000,000 lines: drain3,
cloudtwin mining and ingesting into the store in one process, on a local process pool
of 1 and 2 workers, and on a local Ray cluster of 2.

Both tools get the same messages: each line split by the Loghub header format of its
system. cloudtwin then runs with its defaults, the same for every system ("format
only"). drain3 runs three ways: with its defaults (depth 4, sim_th 0.4, max_children
100) and no masks; with the Loghub benchmark's per-system masking regexes, depth and
similarity threshold (LOGHUB_DRAIN, "Loghub-tuned"); and with those masks and its
defaults ("masks+defaults"). "drain3 tuned" is the better of the last two, per system.
Every measurement runs in a child process; single-threaded ones (GA, mining in one
process, drain3) are pinned to one CPU with Arrow limited to one thread.

Usage:  python benchmarks/logs.py [--ten-million] [--skip-ray] [--scale-only]
        [--drain3-ten-million]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOGHUB = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "loghub-2k"
SYSTEMS = ["HDFS", "Hadoop", "Spark", "Zookeeper", "BGL", "OpenSSH", "Apache", "Linux"]


@dataclass(frozen=True)
class DrainSettings:
    """Per-system settings of the Loghub benchmark for Drain (Zhu et al., ICSE 2019)."""

    masks: tuple[str, ...]
    sim_threshold: float
    depth: int


_IPV4 = r"(\d+\.){3}\d+"
#: The Loghub benchmark's Drain settings per system, for the tuned drain3 baselines.
LOGHUB_DRAIN: dict[str, DrainSettings] = {
    "HDFS": DrainSettings((r"blk_-?\d+", r"(\d+\.){3}\d+(:\d+)?"), 0.5, 4),
    "Hadoop": DrainSettings((_IPV4,), 0.5, 4),
    "Spark": DrainSettings((_IPV4, r"\b[KGTM]?B\b", r"([\w-]+\.){2,}[\w-]+"), 0.5, 4),
    "Zookeeper": DrainSettings((r"(/|)(\d+\.){3}\d+(:\d+)?",), 0.5, 4),
    "BGL": DrainSettings((r"core\.\d+",), 0.5, 4),
    "OpenSSH": DrainSettings((_IPV4, r"([\w-]+\.){2,}[\w-]+"), 0.6, 5),
    "Apache": DrainSettings((_IPV4,), 0.5, 4),
    "Linux": DrainSettings((_IPV4, r"\d{2}:\d{2}:\d{2}"), 0.39, 6),
}
#: drain3's own defaults.
DRAIN3_DEFAULTS = DrainSettings((), 0.4, 4)


def _one_core() -> None:
    import pyarrow as pa

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    logging.disable(logging.CRITICAL)  # drain3 logs every new cluster at INFO


def _drain3(settings: DrainSettings) -> Any:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    config = TemplateMinerConfig()
    config.drain_depth = settings.depth
    config.drain_sim_th = settings.sim_threshold
    config.drain_max_children = 100
    config.profiling_enabled = False
    config.masking_instructions = []
    return TemplateMiner(config=config)


def _contents(system: str) -> list[str]:
    from cloudtwin.ops import PRESETS

    fmt = PRESETS[system.lower()].format
    text = (LOGHUB / system / f"{system}_2k.log").read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        fields = fmt.parse(line)
        assert fields is not None, line
        out.append(fields["Content"].strip())
    return out


def _truth(system: str) -> list[str]:
    path = LOGHUB / system / f"{system}_2k.log_structured.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        return [row["EventId"] for row in csv.DictReader(handle)]


def _drain3_settings(system: str, tool: str) -> DrainSettings:
    loghub = LOGHUB_DRAIN[system]
    if tool == "drain3-defaults":
        return DRAIN3_DEFAULTS
    if tool == "drain3-loghub":
        return loghub
    return DrainSettings(loghub.masks, DRAIN3_DEFAULTS.sim_threshold, DRAIN3_DEFAULTS.depth)


def accuracy_worker(system: str, tool: str, repeat: int) -> dict[str, Any]:
    """GA on the 2k lines, and mining lines/s over ``repeat`` passes of fresh miners.

    ``tool`` is ``cloudtwin`` (its defaults, the preset's format only), or
    ``drain3-defaults``, ``drain3-loghub`` or ``drain3-masks`` (see the module doc).
    """
    from cloudtwin.ops import PRESETS, Masker, TemplateMiner, grouping_accuracy

    contents = _contents(system)
    best = float("inf")
    predicted: list[int] = []
    for _ in range(repeat):  # miners are built outside the timed part
        if tool == "cloudtwin":
            miner = TemplateMiner(PRESETS[system.lower()].miner_config())
            start = time.perf_counter()
            predicted = miner.add_batch(contents).tolist()
        else:
            settings = _drain3_settings(system, tool)
            masker = Masker(settings.masks)
            d3 = _drain3(settings)
            start = time.perf_counter()
            predicted = [d3.add_log_message(masker.mask(c))["cluster_id"] for c in contents]
        best = min(best, time.perf_counter() - start)
    ga = grouping_accuracy(_truth(system), predicted)
    return {"ga": ga, "lines_per_s": len(contents) / best}


class _Repeat(io.RawIOBase):
    """A byte stream that is one file's bytes repeated until ``lines`` lines were given."""

    def __init__(self, data: bytes, lines: int) -> None:
        if not data.endswith(b"\n"):
            data += b"\n"
        per_copy = data.count(b"\n")
        self._data = data
        self._left = lines // per_copy
        self._tail = b"".join(data.splitlines(keepends=True)[: lines % per_copy])
        self._buffer = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        if not self._buffer:
            if self._left > 0:
                self._left -= 1
                self._buffer = memoryview(self._data)
            elif self._tail:
                self._buffer, self._tail = memoryview(self._tail), b""
            else:
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (all CPUs, every process) so far."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _session_cpu_s() -> float:
    """CPU seconds of this session's processes: this one, pool workers and their server
    (each process's own time and that of the children it has waited for). Unlike the
    machine's busy time, other users' work does not count; Ray's processes that start
    sessions of their own do not count either."""
    sid, total = os.getsid(0), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[3]) == sid:  # fields from the state on: session, utime .. cstime
            total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def _executor(kind: str, workers: int) -> Any:
    if kind == "serial":
        return None
    if kind == "process":
        from cloudtwin.sweep import PoolExecutor

        return PoolExecutor(workers, ("cloudtwin.ops.columnar", "cloudtwin.store.ops_segments"))
    from cloudtwin.sweep.ray_executor import RayExecutor

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return RayExecutor(None, workers)


def scale_worker(tool: str, kind: str, workers: int, lines: int, db: str | None) -> dict[str, Any]:
    """Read, split, mask and mine ``lines`` HDFS lines end to end (and store them, for
    ``ingest``); lines/s, peak RSS of this (driving) process, busy CPU of the machine."""
    from cloudtwin.ops import PRESETS, Masker, log_stream

    preset = PRESETS["hdfs"]
    data = (LOGHUB / "HDFS" / "HDFS_2k.log").read_bytes().replace(b"\r\n", b"\n")
    stream = io.BufferedReader(_Repeat(data, lines), buffer_size=1 << 20)
    executor = _executor(kind, workers) if tool != "drain3" else None  # imports: not per line
    load = os.getloadavg()[0]
    cpu0, own0 = _busy_cpu_s(), _session_cpu_s()
    start = time.perf_counter()
    process0 = time.process_time()
    done = 0
    roles = {"mine": 0.0, "driver": 0.0, "writer": 0.0}
    if tool == "ingest":
        from cloudtwin.store import Store, ingest_stream
        from cloudtwin.store.ops_ingest import INGEST_MEMORY_LIMIT, IngestCpu

        with Store(db or ":memory:", memory_limit=INGEST_MEMORY_LIMIT) as store:
            store.connection.execute("SET threads = 1")
            meter = IngestCpu()
            summary = ingest_stream(
                store, log_stream(stream, "bench"), preset, executor=executor,
                cpu=meter,
            )
            done = summary.lines + summary.unparsed
            roles = {"mine": meter.mine_s, "driver": meter.driver_s, "writer": meter.writer_s}
    elif tool == "compact":  # fold the segments of the pool of two's store into its table
        from cloudtwin.store import Store
        from cloudtwin.store.ops_ingest import INGEST_MEMORY_LIMIT
        from cloudtwin.store.ops_segments import compact

        with Store(db or ":memory:", memory_limit=INGEST_MEMORY_LIMIT) as store:
            store.connection.execute("SET threads = 1")
            done = compact(store).lines
        roles["writer"] = time.process_time() - process0
    elif tool == "mine":
        from cloudtwin.ops.chunks import read_chunks
        from cloudtwin.ops.columnar import ChunkMiner, merge_chunk
        from cloudtwin.ops.executors import mine_in_order
        from cloudtwin.ops.miner import TemplateMiner

        miner = TemplateMiner(preset.miner_config())
        job = ChunkMiner(preset.format, miner.snapshot())
        for mined in mine_in_order(job, read_chunks(stream, "bench"), executor):
            merge_chunk(miner, mined, 0)
            done += mined.lines.num_rows + mined.unparsed.num_rows
            roles["mine"] += mined.cpu_s
        in_process = roles["mine"] if kind == "serial" else 0.0
        roles["driver"] = time.process_time() - process0 - in_process
    else:
        from cloudtwin.ops import read_batches

        roles["driver"] = float("nan")
        settings = _drain3_settings("HDFS", "drain3-masks")
        masker, d3, fmt = Masker(settings.masks), _drain3(settings), preset.format
        for batch in read_batches(stream, "bench"):
            for text in batch.texts:
                fields = fmt.parse(text)
                if fields is not None:
                    d3.add_log_message(masker.mask(fields["Content"].strip()))
                    done += 1
        roles["mine"] = time.process_time() - process0
    elapsed = time.perf_counter() - start
    cpu, own = _busy_cpu_s() - cpu0, _session_cpu_s() - own0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"lines": done, "seconds": elapsed, "lines_per_s": done / elapsed,
            "peak_rss_mib": peak_kib / 1024, "cpu_s_per_m": cpu / done * 1e6,
            "own_cpu_s_per_m": own / done * 1e6, "load": load,
            "load_end": os.getloadavg()[0],
            **{f"{role}_us": seconds / max(done, 1) * 1e6 for role, seconds in roles.items()}}


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run(  # a session of its own: its CPU is counted by _session_cpu_s
        [sys.executable, __file__, "--worker", *args], check=True, capture_output=True, text=True,
        start_new_session=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ten-million", action="store_true", help="also run 10,000,000 lines")
    parser.add_argument("--repeat", type=int, default=3, help="passes per 2k system (best)")
    parser.add_argument("--skip-ray", action="store_true", help="leave out the Ray rows")
    parser.add_argument("--drain3-ten-million", action="store_true",
                        help="also run drain3 on 10,000,000 lines (about 10 minutes)")
    parser.add_argument("--scale-only", action="store_true", help="only the end-to-end table")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "accuracy" or rest[1:2] == ["serial"] and rest[0] not in ("ingest", "compact"):
            _one_core()  # single-threaded work on one CPU; ingest stores from a second thread
        if kind == "accuracy":
            result = accuracy_worker(rest[0], rest[1], int(rest[2]))
        else:
            result = scale_worker(rest[0], rest[1], int(rest[2]), int(rest[3]),
                                  rest[4] if len(rest) > 4 else None)
        print(json.dumps(result))
        return
    if not args.scale_only:
        _accuracy_table(args.repeat)
    _scale_table(args.ten_million, args.skip_ray, args.drain3_ten_million)


def _accuracy_table(repeat: int) -> None:
    print("Grouping accuracy and mining throughput on Loghub-2k (same input, one core)")
    print("cloudtwin: its defaults, header format only; drain3: its defaults and no masks,")
    print("Loghub-tuned (per-system masks, depth, sim), masks+defaults (per-system masks,")
    print("depth 4, sim 0.4); tuned = the better of the last two per system")
    tools = ["cloudtwin", "drain3-defaults", "drain3-loghub", "drain3-masks"]
    header = f"{'system':<10} {'cloudtwin':>10} {'d3 default':>10} {'d3 Loghub':>10} "
    header += f"{'d3 masks':>9} {'d3 tuned':>9} {'lines/s cloudtwin':>18} "
    header += f"{'lines/s d3 masks':>17} {'speed-up':>9}"
    print(header)
    sums = [0.0] * 5
    for system in SYSTEMS:
        runs = {tool: _child("accuracy", system, tool, str(repeat)) for tool in tools}
        ga = [runs[tool]["ga"] for tool in tools]
        ga.append(max(ga[2], ga[3]))
        sums = [a + b for a, b in zip(sums, ga, strict=True)]
        ours, theirs = runs["cloudtwin"]["lines_per_s"], runs["drain3-masks"]["lines_per_s"]
        print(f"{system:<10} {ga[0]:>10.4f} {ga[1]:>10.4f} {ga[2]:>10.4f} {ga[3]:>9.4f} "
              f"{ga[4]:>9.4f} {ours:>18,.0f} {theirs:>17,.0f} {ours / theirs:>8.1f}x")
    n = len(SYSTEMS)
    means = " ".join(f"{v / n:>{w}.4f}" for v, w in zip(sums, [10, 10, 10, 9, 9], strict=True))
    print(f"{'mean':<10} {means}")
    print()


#: The end-to-end runs: (label, tool, executor, workers, lines in millions).
_SCALE_RUNS = [
    ("drain3, mine", "drain3", "serial", 1, 1),
    ("cloudtwin, mine", "mine", "serial", 1, 1),
    ("cloudtwin, ingest", "ingest", "serial", 1, 1),
    ("process x1, mine", "mine", "process", 1, 1),
    ("process x2, mine", "mine", "process", 2, 1),
    ("process x1, ingest", "ingest", "process", 1, 1),
    ("process x2, ingest", "ingest", "process", 2, 1),
    ("process x2, compact", "compact", "serial", 1, 1),
    ("ray x2, mine", "mine", "ray", 2, 1),
    ("ray x2, ingest", "ingest", "ray", 2, 1),
]


def _scale_table(ten_million: bool, skip_ray: bool, drain3_ten_million: bool = False) -> None:
    print("End to end on HDFS_2k repeated: read, split header, mask, mine (and store, for")
    print("ingest, DuckDB capped as the CLI caps it). Serial runs mine in one process and")
    print("store from a writer thread; pools mine in N worker processes. CPU per line by")
    print("role (us): 'mine' is the mining job's own thread time, wherever it ran (in pools:")
    print("the workers, without handing chunks over); 'driver' is the driving process apart")
    print("from its writer thread and its own mining (reading, handing out, receiving,")
    print("merging); 'writer' the DuckDB writer thread. 'machine' is the machine's busy CPU")
    print("per million lines (other users' work too). load: the 1-minute load average at the")
    print("start and end of the run (on this 2-core machine, above ~0.5 other work shared")
    print("the CPUs, and wall-clock figures understate an idle machine's; CPU per line does not).")
    header = (f"{'run':<22} {'lines':>11} {'seconds':>8} {'lines/s':>9} {'RSS MiB':>8} "
              f"{'machine':>8} {'mine':>6} {'driver':>6} {'writer':>6} {'load':>11}")
    print(header)
    runs = [r for r in _SCALE_RUNS if not (skip_ray and r[2] == "ray")]
    sizes = [1, 10] if ten_million else [1]
    import tempfile

    results: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for millions in sizes:
            for label, tool, kind, workers, _ in runs:
                if tool == "drain3" and millions > 1 and not drain3_ten_million:
                    print(f"{label:<22} {'(10M: about 10 min; --drain3-ten-million runs it)':>40}")
                    continue
                stored = "process x2, ingest" if tool == "compact" else label
                db = [str(Path(tmp) / f"{stored}-{millions}.duckdb".replace(" ", ""))]
                r = _child("scale", tool, kind, str(workers), str(millions * 1_000_000), *db)
                results[(label, millions)] = r
                print(f"{label:<22} {r['lines']:>11,} {r['seconds']:>8.1f} {r['lines_per_s']:>9,.0f} "
                      f"{r['peak_rss_mib']:>8.0f} {r['cpu_s_per_m']:>8.2f} {r['mine_us']:>6.2f} "
                      f"{r['driver_us']:>6.2f} {r['writer_us']:>6.2f} "
                      f"{r['load']:>5.2f} {r['load_end']:>5.2f}",
                      flush=True)
    print()
    for millions in sizes:
        _arithmetic(results, millions)
    if ten_million:
        for label in ("cloudtwin, mine", "cloudtwin, ingest"):
            ratio = results[(label, 10)]["peak_rss_mib"] / results[(label, 1)]["peak_rss_mib"]
            print(f"{label}: peak RSS at 10M lines {ratio:.2f}x that at 1M")


def _arithmetic(results: dict[tuple[str, int], dict[str, Any]], millions: int) -> None:
    """The measured ratios, and the ceilings that the CPU per line sets on two idle CPUs
    (a run can stay below its ceiling: pipeline stalls, chunks in flight)."""
    mine = results[("cloudtwin, mine", millions)]
    ingest = results[("cloudtwin, ingest", millions)]
    thread = ingest["mine_us"] + ingest["driver_us"]
    alone = mine["mine_us"] + mine["driver_us"]
    ceiling = 1e6 / max(thread, ingest["writer_us"])
    print(f"{millions}M lines: ingest takes {mine['lines_per_s'] / ingest['lines_per_s']:.2f}x "
          f"the time of mining alone (load {mine['load']:.2f}, {ingest['load']:.2f}); its "
          f"mining thread costs {thread:.2f} us/line and its writer thread "
          f"{ingest['writer_us']:.2f}, against {alone:.2f} for mining alone: CPU ceilings on "
          f"two idle CPUs {ceiling:,.0f} and {1e6 / alone:,.0f} lines/s "
          f"({max(thread, ingest['writer_us']) / alone:.2f}x)")
    for tool in ("mine", "ingest"):
        one = results.get((f"process x1, {tool}", millions))
        two = results.get((f"process x2, {tool}", millions))
        if not (one and two):
            continue
        worker = two["mine_us"]
        serial = two["driver_us"] + two["writer_us"]
        one_ceiling = 1e6 / max(worker, serial)
        two_ceiling = 1e6 / max((worker + serial) / 2, serial)
        print(f"{millions}M lines, {tool}: 2 workers {two['lines_per_s'] / one['lines_per_s']:.2f}x "
              f"the lines/s of 1 (load {one['load']:.2f}, {two['load']:.2f}); a worker mines a "
              f"line in {worker:.2f} us and the driver and writer take {serial:.2f}: CPU "
              f"ceilings on two idle CPUs {one_ceiling:,.0f} and {two_ceiling:,.0f} lines/s "
              f"({two_ceiling / one_ceiling:.2f}x)")


if __name__ == "__main__":
    main()
