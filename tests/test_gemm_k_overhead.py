"""The GEMM constants of the node profiles come out of `benchmarks/gemm_k_overhead.py`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cloudtwin.cluster.profiles import H100_80G_8, NODE_PROFILES

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gemm_k_overhead.py"


def _fit(capsys: pytest.CaptureFixture[str]) -> dict:
    spec = importlib.util.spec_from_file_location("gemm_k_overhead", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_profiles_carry_the_fitted_tile_cost_and_loop_rate(capsys: pytest.CaptureFixture[str]) -> None:
    fit = _fit(capsys)
    assert round(fit["gemm_k_overhead"]) == H100_80G_8.gemm_k_overhead
    assert {p.gemm_k_overhead for p in NODE_PROFILES.values()} == {H100_80G_8.gemm_k_overhead}
    assert round(fit["loop_rate_flops"] / H100_80G_8.peak_bf16_flops, 3) == H100_80G_8.gemm_efficiency_max
    # The three-constant fit holds every measured point within 10 %, and k = 4096 within 2 %.
    assert all(abs(p["error"]) < 0.10 for p in fit["points"])
    assert all(abs(p["error"]) < 0.02 for p in fit["points"] if p["k"] == 4096)
