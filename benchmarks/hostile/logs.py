"""Hostile inputs of `cloudtwin logs ingest` at scale (issue 23, room `logs`).

An ingest commits whole chunks in transactions of about half a million lines, so these
cases are about that many lines and more: a log of more lines than one transaction
takes, with unparsed, empty, binary and over-long lines scattered through it, read
serially and on a process pool of two; the same log again (adds nothing); a line of
64 MiB and binary input. The probes kill an ingest in the middle of a transaction and
resume it, shrink the file while it is read, and kill a pool worker in the middle of a
chunk: the store must end with every line once. `cases(tmp)` and `probes(tmp)` are read
by benchmarks/bad_inputs.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
#: More lines than one ingest transaction takes (COMMIT_LINES, 491,520).
LINES = 600_000
#: Lines of the log that are not HDFS lines (stored as unparsed).
_BAD_EVERY = 997

Case = tuple[str, list[str], bytes | None]
Probe = tuple[str, Callable[[], tuple[str, str]]]


def _hdfs_log(path: Path, lines: int = LINES) -> Path:
    """An HDFS log of ``lines`` lines; one in _BAD_EVERY is empty, binary or no HDFS line."""
    if path.exists():
        return path
    bad = [b"", b"\x00\x01\xff\xfe garbage \x80", b"no header here at all", b"   "]
    with path.open("wb") as out:
        for i in range(lines):
            if i % _BAD_EVERY == 0:
                out.write(bad[(i // _BAD_EVERY) % len(bad)] + b"\n")
                continue
            out.write(b"081109 %06d %d INFO dfs.DataNode$PacketResponder: PacketResponder %d "
                      b"for block blk_%d terminating\n" % (i % 240000, 100 + i % 50, i % 3, i))
    return path


def _long_line(path: Path) -> Path:
    if not path.exists():
        head = b"081109 203615 148 INFO dfs.DataNode: a line before\n"
        path.write_bytes(head + b"081109 203615 148 INFO dfs.X: " + b"x" * (64 << 20) + b"\n" + head)
    return path


def cases(tmp: Path) -> list[Case]:
    big = _hdfs_log(tmp / "logs-big.log")
    db, pool_db = str(tmp / "logs-big.duckdb"), str(tmp / "logs-big-pool.duckdb")
    long_line = _long_line(tmp / "logs-64mib-line.log")
    binary = tmp / "logs-binary.log"
    binary.write_bytes(bytes(range(256)) * 4096)
    ingest = ["logs", "ingest", "-f", "hdfs", "--db"]
    return [
        ("600k lines, more than one transaction", [*ingest, db, str(big)], None),
        ("the same 600k lines again (adds 0)", [*ingest, db, str(big)], None),
        ("600k lines on a pool of 2", [*ingest, pool_db, "-e", "process", "-w", "2", str(big)],
         None),
        ("600k lines on stdin under the same source", [*ingest, db, "-"], big.read_bytes()),
        ("a 64 MiB line between two lines", [*ingest, db, str(long_line)], None),
        ("a 64 MiB line on a pool of 2",
         [*ingest, pool_db, "-e", "process", "-w", "2", str(long_line)], None),
        ("1 MiB of every byte value", [*ingest, db, str(binary)], None),
    ]


def _fresh(db: Path) -> Path:
    """``db`` with no store there (a probe run before left one)."""
    for path in (db, db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)
    return db


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLOUDTWIN), *argv], capture_output=True, text=True, timeout=600)


def _stored(db: Path) -> int:
    sql = "SELECT (SELECT count(*) FROM ops_lines) + (SELECT count(*) FROM ops_unparsed) AS n"
    out = _cli("logs", "sql", sql, "--db", str(db), "--json")
    return int(out.stdout.split('"n":')[1].split("}")[0]) if out.returncode == 0 else -1


def _started(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(CLOUDTWIN), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def probes(tmp: Path) -> list[Probe]:
    big = _hdfs_log(tmp / "logs-big.log")

    def killed_then_resumed() -> tuple[str, str]:
        db = _fresh(tmp / "logs-killed.duckdb")
        proc = _started(["logs", "ingest", "-f", "hdfs", "--db", str(db), str(big)])
        _wait_read(proc.pid, big, big.stat().st_size * 9 // 10)  # a transaction is open
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        again = _cli("logs", "ingest", "-f", "hdfs", "--db", str(db), str(big))
        if again.returncode != 0:
            return "traceback" if "Traceback" in again.stderr else "failed", _last_line(again.stderr)
        n = _stored(db)
        return ("ok" if n == LINES else "lost or doubled"), f"{n} of {LINES} lines stored"

    def shrunk_while_read() -> tuple[str, str]:
        log, db = tmp / "logs-shrinking.log", _fresh(tmp / "logs-shrinking.duckdb")
        log.write_bytes(big.read_bytes())
        size = log.stat().st_size
        proc = _started(["logs", "ingest", "-f", "hdfs", "--db", str(db), str(log)])
        _wait_read(proc.pid, log, size // 2)  # then cut it to a third: bytes read are gone
        os.truncate(log, size // 3)
        _, err = proc.communicate(timeout=600)
        if proc.returncode == 0:
            return "ok", "read whole before the change"
        if proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1:
            return "clean", _last_line(err)
        return "traceback" if "Traceback" in err else f"exit {proc.returncode}", _last_line(err)

    def worker_killed() -> tuple[str, str]:
        db = _fresh(tmp / "logs-worker-killed.duckdb")
        proc = _started(["logs", "ingest", "-f", "hdfs", "--db", str(db), "-e", "process", "-w", "2",
                         str(big)])
        victim = _a_worker(proc.pid, wait_s=20)
        if victim is not None:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:  # it ended between being seen and the kill
                victim = None
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            return "traceback" if "Traceback" in err else f"exit {proc.returncode}", _last_line(err)
        n = _stored(db)
        what = "a worker killed" if victim else "no worker seen"
        return ("ok" if n == LINES else "lost or doubled"), f"{what}; {n} of {LINES} lines stored"

    def pool_killed_then_resumed() -> tuple[str, str]:
        # the pool's segments are written before the transaction that registers them:
        # killed in between, the next ingest deletes the unregistered ones
        db = _fresh(tmp / "logs-pool-killed.duckdb")
        proc = _started(["logs", "ingest", "-f", "hdfs", "--db", str(db), "-e", "process", "-w", "2",
                         str(big)])
        _wait_read(proc.pid, big, big.stat().st_size * 9 // 10)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        folder = Path(str(db) + ".segments")
        written = len(list(folder.glob("seg-*.parquet"))) if folder.is_dir() else 0
        again = _cli("logs", "ingest", "-f", "hdfs", "--db", str(db), "-e", "process", "-w", "2", str(big))
        if again.returncode != 0:
            return "traceback" if "Traceback" in again.stderr else "failed", _last_line(again.stderr)
        n = _stored(db)
        files = len(list(folder.glob("*")))
        registered = _cli("logs", "sql", "SELECT count(*) AS n FROM ops_segments", "--db", str(db),
                          "--json").stdout
        same = f'"n": {files}' in registered
        verdict = "ok" if n == LINES and same else "lost, doubled or left over"
        return verdict, f"{written} segments when killed; {n} of {LINES} lines stored; {files} files"

    def segments_damaged() -> tuple[str, str]:
        # a registered segment deleted, then another one corrupted: one line, exit 2
        db = _fresh(tmp / "logs-damaged.duckdb")
        done = _cli("logs", "ingest", "-f", "hdfs", "--db", str(db), "--segments", str(big))
        files = sorted(Path(str(db) + ".segments").glob("seg-*.parquet"))
        if done.returncode != 0 or len(files) < 2:
            return "failed", _last_line(done.stderr)
        files[0].write_bytes(b"PAR1 not parquet")
        broken = _cli("logs", "sql", "SELECT count(*) FROM ops_lines", "--db", str(db))
        files[1].unlink()
        missing = _cli("logs", "search", "--db", str(db))
        for out in (broken, missing):
            if out.returncode != 2 or "Traceback" in out.stderr or len(out.stderr.strip().splitlines()) != 1:
                what = "traceback" if "Traceback" in out.stderr else f"exit {out.returncode}"
                return what, _last_line(out.stderr)
        return "clean", f"{_last_line(broken.stderr)} / {_last_line(missing.stderr)}"

    return [
        ("a pool's ingest killed mid-run, then run again", pool_killed_then_resumed),
        ("a segment corrupted, then one deleted", segments_damaged),
        ("ingest killed mid-transaction, then run again", killed_then_resumed),
        ("the file shrinks while it is read", shrunk_while_read),
        ("a pool worker killed mid-chunk", worker_killed),
    ]


def _wait_read(pid: int, path: Path, at_least: int, wait_s: float = 120) -> None:
    """Wait until process ``pid`` has read ``at_least`` bytes of ``path`` (or ended)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                    if int(info.split("pos:")[1].split()[0]) >= at_least:
                        return
        except (OSError, IndexError, ValueError):  # ended, or the fd closed meanwhile
            return
        time.sleep(0.05)


def _a_worker(driver: int, wait_s: float) -> int | None:
    """A pool worker of the ingest whose driver is ``driver`` (a grandchild in its session)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == driver:
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == driver and int(fields[1]) != driver:  # same session, not a child
                found.append(int(entry))
        if found:
            time.sleep(1)  # let it take a chunk
            return max(found)
        time.sleep(0.2)
    return None
