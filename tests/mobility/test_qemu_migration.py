"""One small real live migration between two local QEMU processes, next to the model's plan."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.cli.measure import qemu_guest as qg

sys.path.insert(0, str(REPO / "benchmarks"))
import qemu_migration as bench  # noqa: E402

REASON = qg.missing_reason()


def _our_qemus(workdir: str) -> list[str]:
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if line.startswith(qg.QEMU) and workdir in line]


@pytest.mark.slow
@pytest.mark.usefixtures("sigterm_cleans_up")  # both QEMU processes are stopped even on SIGTERM
@pytest.mark.skipif(REASON is not None, reason=f"real QEMU migrations cannot run here: {REASON}")
def test_a_small_guest_migrates_for_real_and_the_model_agrees_it_converges() -> None:
    trial = qg.Trial(memory_mib=128, dirty_mib=16, rate_mib_s=4, bandwidth_mib_s=64, give_up_s=60)
    with qg.workspace() as work:
        initrd = qg.build_initramfs(work)
        accel = qg.pick_accel(work, initrd)
        stats = qg.migrate(work, initrd, accel, trial)
        leftovers = _our_qemus(str(work))
    assert leftovers == []  # both QEMU processes were stopped
    assert stats["status"] == "completed" and not stats["cancelled"]
    ram = stats["ram"]
    assert 128 << 20 <= ram["total"] < 129 << 20  # guest RAM plus the firmware ROMs
    assert ram["normal"] * 4096 >= 16 << 20  # at least the dirtier's buffer went over as data
    assert ram["dirty-sync-count"] >= 2
    # the dirtier said where its buffer sits: one mean frame per 64 pages, frames in use
    # per run of 256 covering the guest's memory and at least the buffer
    layout = stats["layout"]
    assert layout["slice_pages"] == 64 and len(layout["slices"]) == 16 * 256 // 64
    assert all(0 < frame < 128 * 256 for frame in layout["slices"])
    assert layout["run_frames"] == 256 and len(layout["in_use"]) >= 128
    assert sum(layout["in_use"]) >= 16 * 256
    assert stats["write_lead_s"] >= 0.5  # the benchmark waits half a second after READY
    # the model, given this run's inputs and its own statistics as the idle calibration
    plan = bench.predict(trial.__dict__, stats)
    assert plan["converged"]
    assert bench.predict(trial.__dict__, stats, run=stats)["converged"]
