"""Sweeps on a Ray cluster: a local head started here, joined through --address; the
store holds what a serial run stores."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from tests.cli.cli_helpers import CLOUDTWIN, REPO
from tests.sweep.ray_cluster import ray_head

from cloudtwin.store.database import Store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="ray is not installed (the ray extra)"
    ),
]

VARIES = ["--vary", "seed=1..4", "--vary", "routing.strategy=ecmp,pinning"]


def stored(db: Path) -> list[tuple[object, ...]]:
    with Store(db, read_only=True) as store:
        return store.query(
            "SELECT point_key, task_digest, scenario, command, overrides, version, status, result, error "
            "FROM sweep_points ORDER BY point_key"
        )[1]


def sweep(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    command = [str(CLOUDTWIN), "sweep", "examples/leaf-spine-perftest.yaml", *VARIES, "--json", *args]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_sweep_through_a_ray_address_stores_what_a_serial_sweep_stores(tmp_path: Path) -> None:
    serial = sweep("--executor", "serial", "--db", str(tmp_path / "serial.duckdb"))
    with ray_head() as (address, env):
        on_ray = sweep("--address", address, "--db", str(tmp_path / "ray.duckdb"), env=env)
        again = sweep("--address", address, "--db", str(tmp_path / "ray.duckdb"), env=env)
    assert on_ray["run"]["executed"] == 8  # type: ignore[index]
    assert again["run"]["executed"] == 0 and again["run"]["skipped"] == 8  # type: ignore[index]
    assert stored(tmp_path / "ray.duckdb") == stored(tmp_path / "serial.duckdb")
    assert on_ray["summary"] == serial["summary"]


def test_no_ray_process_outlives_the_harness() -> None:
    with ray_head() as (address, env):
        folder = str(Path(env["RAY_AUTH_TOKEN_PATH"]).parent)
        assert address.startswith("127.0.0.1:")
        assert folder in _commands()
    assert folder not in _commands()


def _commands() -> str:
    return subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
