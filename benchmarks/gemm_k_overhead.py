"""Fit the GEMM tile pipeline's fixed cost (`NodeProfile.gemm_k_overhead`) on measured cuBLAS runs.

A GEMM's tiles run in waves over the SMs; each wave loops over the reduction depth k and
pays a fixed cost besides (filling the tile pipeline, writing the output tile), and the
kernel a fixed start. So a kernel takes t = t0 + c * waves + k * 2 m n b / R, with
`waves` the whole waves of 256 x 128 tiles over the GPU's SMs and R the rate of the
reduction loop. Least squares over the 15 H100 points of
`benchmarks/data/gemm_h100_xla.yaml` (m = n = 4096, b = 1, 2, 4, k = 256 ... 4096) gives
t0, c and R; the per-wave cost in loop steps is K0 = c R / (2 x tile x SMs), which is what
`workloads.training` divides by: efficiency k / (k + K0).

    python benchmarks/gemm_k_overhead.py          # the fit, and each point against it
    python benchmarks/gemm_k_overhead.py --json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import yaml

DATA = Path(__file__).resolve().parent / "data" / "gemm_h100_xla.yaml"
SMS = 132  # H100 SXM
TILE = 256 * 128


def fit(points: list[dict]) -> dict:
    """(t0, c, R, K0) of the model above, and each point's measured and fitted time."""
    rows, times = [], []
    for p in points:
        tiles = math.ceil(p["m"] / 256) * math.ceil(p["n"] / 128) * p["b"]
        waves = math.ceil(tiles / SMS)
        flops = 2.0 * p["m"] * p["n"] * p["k"] * p["b"]
        rows.append([1.0, waves, flops])
        times.append(flops / p["flops"])
    a, t = np.array(rows), np.array(times)
    (t0, c, inverse_rate), *_ = np.linalg.lstsq(a, t, rcond=None)
    rate = 1.0 / inverse_rate
    k0 = c * rate / (2.0 * TILE * SMS)
    fitted = a @ np.array([t0, c, inverse_rate])
    return {
        "t0_s": float(t0), "per_wave_s": float(c), "loop_rate_flops": float(rate),
        "gemm_k_overhead": float(k0),
        "points": [
            {**p, "measured_s": float(m), "fitted_s": float(f), "error": float(f / m - 1)}
            for p, m, f in zip(points, t, fitted, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the fit as JSON")
    args = parser.parse_args(argv)
    result = fit(yaml.safe_load(DATA.read_text())["points"])
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("| b | k | measured TFLOP/s | fitted TFLOP/s | error |")
    print("|---:|---:|---:|---:|---:|")
    for p in result["points"]:
        flops = 2.0 * p["m"] * p["n"] * p["k"] * p["b"]
        print(f"| {p['b']} | {p['k']} | {flops / p['measured_s'] / 1e12:.0f} | "
              f"{flops / p['fitted_s'] / 1e12:.0f} | {-p['error'] / (1 + p['error']):+.1%} |")
    print(f"\nkernel start {result['t0_s'] * 1e6:.1f} us, per wave {result['per_wave_s'] * 1e6:.2f} us, "
          f"loop rate {result['loop_rate_flops'] / 1e12:.0f} TFLOP/s "
          f"({result['loop_rate_flops'] / 989.4e12:.3f} of the 989.4 TFLOP/s peak)")
    print(f"gemm_k_overhead = {result['gemm_k_overhead']:.0f} loop steps per wave")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
