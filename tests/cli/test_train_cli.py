"""`cloudtwin train` and `cloudtwin hpl` end to end: JSON, the plot, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.cli_helpers import cloudtwin

SCENARIO = """
fabric: {kind: leaf-spine, leaves: 4, spines: 16, hosts_per_leaf: 2}
hosts: {nics: 8}
workload: {kind: training, layers: 8, hidden: 2048, heads: 16, sequence: 1024, vocabulary: 32000,
           global_batch: 32, tensor: 8, pipeline: 2}
"""


def test_train_scaling_json_and_plot(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(SCENARIO)
    plot = tmp_path / "scaling.png"
    done = cloudtwin("train", str(path), "--gpus", "16,32,64", "--json", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [r["gpus"] for r in results] == [16, 32, 64]
    for r in results:
        assert set(r) >= {"gpus", "iteration_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                          "scaling_efficiency", "breakdown_s"}
        assert set(r["breakdown_s"]) == {"compute", "exposed_comm", "bubble"}
    assert results[0]["scaling_efficiency"] == 1.0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert done.stderr.splitlines() == [f"wrote {plot}"]


def test_train_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(SCENARIO)
    done = cloudtwin("train", str(path), "--gpus", "24")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cloudtwin: error: gpus: 24 GPUs is not a multiple of tensor x pipeline = 16"
    ]
