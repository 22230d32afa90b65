"""Real QEMU live migrations between two local QEMU processes, read through QMP.

The guest is Debian's cloud kernel with a busybox-static initramfs whose init runs
`dirtier` (dirtier.c beside this module): it fills a buffer with data, then dirties its
pages at a chosen rate. The source QEMU boots the guest; the destination QEMU waits with
`-incoming`; the source migrates over TCP on 127.0.0.1 with QEMU's `max-bandwidth` and
`downtime-limit`, and QEMU's own statistics (`query-migrate`) are returned. A migration
that does not finish within `give_up_s` is cancelled (QEMU never gives up by itself).

Used by `cloudtwin calibrate migration`, benchmarks/qemu_migration.py and
tests/mobility/test_qemu_migration.py.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIRTIER_C = HERE / "dirtier.c"
QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"
BOOT_TIMEOUT_S = 60.0
POLL_S = 0.01
"""How often the serial console is read while waiting for the guest."""
KVM_PROBE_S = 10.0
"""A KVM guest boots to the dirtier in about a second; one that has not after this never will."""
MIB = 1 << 20

INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
for word in $(/bin/busybox cat /proc/cmdline); do
  case "$word" in dirty_mib=*) MIB="${word#dirty_mib=}";; dirty_rate=*) RATE="${word#dirty_rate=}";; esac
done
echo "GUEST-UP"
/dirtier "${MIB:-16}" "${RATE:-0}"
echo "DIRTIER-EXITED"
while true; do /bin/busybox sleep 3600; done
"""


class QemuMissing(RuntimeError):
    """QEMU, busybox-static, a cloud kernel or a C compiler is not installed."""


def kernel_path() -> str:
    """Debian's cloud kernel (linux-image-cloud-amd64), newest first."""
    found = sorted(glob.glob("/boot/vmlinuz-*-cloud-amd64"))
    if not found:
        raise QemuMissing("no /boot/vmlinuz-*-cloud-amd64 (apt-get install linux-image-cloud-amd64)")
    return found[-1]


def missing_reason() -> str | None:
    """Why real migrations cannot run here, or None when they can."""
    for tool in (QEMU, "gcc", "cpio"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install qemu-system-x86 gcc cpio)"
    if not os.path.exists(BUSYBOX):
        return "busybox-static is not installed"
    try:
        kernel_path()
    except QemuMissing as err:
        return str(err)
    return None


def build_initramfs(workdir: Path) -> Path:
    """Compile dirtier statically and pack it with busybox into a gzip'd cpio archive."""
    root = workdir / "root"
    for sub in ("bin", "proc", "dev", "sys"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-O2", "-static", "-o", str(root / "dirtier"), str(DIRTIER_C)],
        check=True,
        capture_output=True,
    )
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    (root / "bin" / "sh").symlink_to("busybox")
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    names = subprocess.run(["find", ".", "-print"], cwd=root, check=True, capture_output=True).stdout
    archive = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names, check=True, capture_output=True
    ).stdout
    image = workdir / "initramfs.cpio.gz"
    image.write_bytes(gzip.compress(archive, compresslevel=1))
    return image


class Qmp:
    """A minimal QMP client over a unix socket: one command, one answer."""

    def __init__(self, path: Path, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(str(path))
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.sock.settimeout(timeout_s)
        self.reader = self.sock.makefile("r")
        json.loads(self.reader.readline())  # greeting
        self.execute("qmp_capabilities")

    def execute(self, command: str, **arguments: object) -> dict:
        message: dict[str, object] = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        self.sock.sendall(json.dumps(message).encode() + b"\n")
        while True:
            reply = json.loads(self.reader.readline())
            if "event" in reply:
                continue
            if "error" in reply:
                raise RuntimeError(f"QMP {command}: {reply['error'].get('desc')}")
            return reply["return"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.reader.close()
            self.sock.close()


@dataclass
class Guest:
    """One QEMU process with its QMP socket and serial log."""

    process: subprocess.Popen
    qmp_path: Path
    serial: Path

    def wait_for(self, text: str, timeout_s: float) -> bool:
        """Whether `text` appears on the serial console within `timeout_s` (looked for every
        `POLL_S`, so it is seen at most that long after the guest wrote it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if self.serial.exists() and text in self.serial.read_text(errors="replace"):
                return True
            time.sleep(POLL_S)
        return False

    def layout(self) -> dict | None:
        """What the dirtier printed about its buffer's place in guest memory: `slice_pages`
        and the mean page frame of each slice in write order (`slices`), `run_frames` and
        the frames in use per run of frames (`in_use`); None when it printed nothing."""
        found: dict[str, list[int]] = {}
        for line in self.serial.read_text(errors="replace").splitlines():
            word, _, rest = line.partition(" ")
            if word in ("LAYOUT", "INUSE"):
                found[word] = [int(x) for x in rest.split()]
        if len(found.get("LAYOUT", [])) < 2 or len(found.get("INUSE", [])) < 2:
            return None
        return {
            "slice_pages": found["LAYOUT"][0],
            "slices": found["LAYOUT"][1:],
            "run_frames": found["INUSE"][0],
            "in_use": found["INUSE"][1:],
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _start(
    workdir: Path,
    name: str,
    accel: str,
    memory_mib: int,
    kernel: str,
    initrd: Path,
    append: str,
    incoming: str | None = None,
    nice: int | None = None,
    prealloc: bool = False,
) -> Guest:
    qmp_path = workdir / f"{name}.qmp"
    serial = workdir / f"{name}.serial"
    for stale in (qmp_path, serial):
        stale.unlink(missing_ok=True)  # a previous guest's "READY" must not count
    command = [
        QEMU,
        "-accel",
        accel,
        "-m",
        str(memory_mib),
        "-smp",
        "1",
        "-nodefaults",
        "-display",
        "none",
        "-kernel",
        kernel,
        "-initrd",
        str(initrd),
        "-append",
        append,
        "-serial",
        f"file:{serial}",
        "-qmp",
        f"unix:{qmp_path},server=on,wait=off",
    ]
    if prealloc:
        command += ["-mem-prealloc"]
    if incoming:
        command += ["-incoming", incoming]
    priority = None if nice is None else (lambda: os.setpriority(os.PRIO_PROCESS, 0, nice))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=priority)
    return Guest(process, qmp_path, serial)


def priority_allowed(nice: int) -> bool:
    """Whether this process may start QEMU at niceness `nice` (below 0 needs root)."""
    return nice >= os.getpriority(os.PRIO_PROCESS, 0) or os.geteuid() == 0


def loopback_buffer_bytes(warm_bytes: int = 64 * MIB) -> int:
    """Bytes the kernel's loopback TCP path holds for a receiver that stops reading.

    A connection is first run at full speed (so the buffers autotune as a migration
    stream's do), then the sender writes without blocking until the kernel refuses more:
    what it took is the send buffer plus the receiver's window. QEMU's downtime ends when
    the last byte of the pause is written into this, not when it arrives.
    """
    chunk = b"\xa5" * (64 << 10)
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
        with sender, receiver:
            received = 0
            sent = 0
            sink = bytearray(len(chunk))
            sender.setblocking(False)
            while received < warm_bytes:
                with contextlib.suppress(BlockingIOError):
                    sent += sender.send(chunk)
                while received < sent:
                    received += receiver.recv_into(sink)
            held = 0
            for _ in range(2):  # a second try after the window update has arrived
                time.sleep(0.2)
                with contextlib.suppress(BlockingIOError):
                    while True:
                        held += sender.send(chunk)
            return held


FIRST_TOUCH_BYTES = 64 * MIB


def first_touch_bps(size_bytes: int = FIRST_TOUCH_BYTES) -> float:
    """How fast this process faults in fresh anonymous memory, bit/s (a byte written into
    each 4 KiB page of a new mapping): the work a destination does for each page it has
    never held. It moves with other work on the machine; each migration records it."""
    import mmap

    with mmap.mmap(-1, size_bytes) as area:
        started = time.perf_counter()
        for at in range(0, size_bytes, 4096):
            area[at] = 1
        return size_bytes * 8 / (time.perf_counter() - started)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A scratch directory holding the initramfs and the guests' sockets; removed after."""
    with tempfile.TemporaryDirectory(prefix="cloudtwin-qemu-") as path:
        yield Path(path)


def _append(dirty_mib: int, rate_mib_s: float) -> str:
    return f"console=ttyS0 quiet panic=-1 dirty_mib={dirty_mib} dirty_rate={rate_mib_s:g}"


def pick_accel(workdir: Path, initrd: Path) -> str:
    """'kvm' if a KVM guest boots to the dirtier here, else 'tcg'."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    guest = _start(workdir, "probe", "kvm", 128, kernel_path(), initrd, _append(4, 0))
    try:
        return "kvm" if guest.wait_for("READY", KVM_PROBE_S) else "tcg"
    finally:
        guest.stop()


@dataclass(frozen=True)
class Trial:
    """One migration to run: guest size, dirtier buffer and rate, QEMU's limits."""

    memory_mib: int
    dirty_mib: int
    rate_mib_s: float
    bandwidth_mib_s: float
    downtime_limit_ms: int = 300
    give_up_s: float = 40.0
    raise_limit_ms: int | None = None
    """When set, the downtime limit is raised to this once `raise_after_syncs` dirty-log
    syncs have happened (the calibration of re-sent pages: the pause then holds the
    dirtied working set, every page of it sent before)."""
    raise_after_syncs: int = 4


def migrate(workdir: Path, initrd: Path, accel: str, trial: Trial, nice: int | None = None,
            prealloc: bool = False) -> dict:
    """Boot a source guest, migrate it to a fresh destination, return QEMU's statistics.

    `nice`: both QEMU processes run at this niceness (None: as this process), so that other
    work on the machine slows the measured migration less (below 0 needs root).
    `prealloc`: both start with their guest memory faulted in (`-mem-prealloc`, as a VM
    whose memory is pinned for device passthrough has it), so that the destination takes
    no page fault for a page it has never held.

    The returned dict is `query-migrate`'s answer plus `cancelled` (True when the
    migration had not finished after `give_up_s` and was cancelled), `accel`,
    `first_touch_bps` (the host's rate of faulting in fresh memory just before), the
    dirtier's `layout` (see `Guest.layout`) and `write_lead_s`: how long the dirtier had
    been writing when the migration started (from "READY" seen, plus half a poll).
    """
    kernel = kernel_path()
    append = _append(trial.dirty_mib, trial.rate_mib_s)
    port = _free_port()
    source = _start(workdir, "source", accel, trial.memory_mib, kernel, initrd, append, nice=nice,
                    prealloc=prealloc)
    target = _start(
        workdir, "target", accel, trial.memory_mib, kernel, initrd, append, incoming=f"tcp:127.0.0.1:{port}",
        nice=nice, prealloc=prealloc,
    )
    qmp = None
    try:
        if not source.wait_for("READY", BOOT_TIMEOUT_S):
            raise RuntimeError(f"the source guest did not boot ({accel}): {source.serial.read_text()[-300:]}")
        ready_s = time.monotonic() - POLL_S / 2
        time.sleep(0.5)  # the dirtier reaches its rate
        qmp = Qmp(source.qmp_path)
        qmp.execute(
            "migrate-set-parameters",
            **{"max-bandwidth": int(trial.bandwidth_mib_s * MIB), "downtime-limit": trial.downtime_limit_ms},
        )
        touch_bps = first_touch_bps()
        lead_s = time.monotonic() - ready_s
        qmp.execute("migrate", uri=f"tcp:127.0.0.1:{port}")
        return _watch(qmp, trial) | {
            "accel": accel,
            "first_touch_bps": touch_bps,
            "load_average": list(os.getloadavg()),
            "layout": source.layout(),
            "write_lead_s": lead_s,
        }
    finally:
        if qmp is not None:
            qmp.close()
        source.stop()
        target.stop()


def _watch(qmp: Qmp, trial: Trial) -> dict:
    started = time.monotonic()
    cancelled = False
    raised = trial.raise_limit_ms is None
    while True:
        state = qmp.execute("query-migrate")
        status = state.get("status")
        if status == "completed":
            return _with_times(qmp, state) | {"cancelled": cancelled}
        if status in ("failed", "cancelled"):
            return state | {"cancelled": cancelled}
        if not raised and state.get("ram", {}).get("dirty-sync-count", 0) >= trial.raise_after_syncs:
            qmp.execute("migrate-set-parameters", **{"downtime-limit": trial.raise_limit_ms})
            raised = True
        if not cancelled and time.monotonic() - started > trial.give_up_s:
            last = state
            qmp.execute("migrate_cancel")
            cancelled = True
            time.sleep(0.2)
            final = qmp.execute("query-migrate")
            return last | {"status": final.get("status", "cancelled"), "cancelled": True}
        time.sleep(0.05)


TIMES_TRIES = 20


def _with_times(qmp: Qmp, state: dict) -> dict:
    """A completed migration's statistics once QEMU has computed its times.

    QEMU 7.2 sets the state to "completed" in `migration_completion` and only then, in
    `migration_iteration_finish`, computes `total-time` and `downtime`: a query in between
    reports both as 0 (grids 2 and 9 each have one such run). Ask again until they are set.
    """
    for _ in range(TIMES_TRIES):
        if state.get("total-time"):
            break
        time.sleep(0.05)
        state = qmp.execute("query-migrate")
    return state
