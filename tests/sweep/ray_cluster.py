"""A throw-away local Ray head for tests: on 127.0.0.1, two CPUs, a small object store,
its own token and temporary directory; always stopped, with every process it started."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def ray_head(timeout_s: float = 180.0) -> Iterator[tuple[str, dict[str, str]]]:
    """Start a head; yield its address and the environment a driver needs to join it."""
    folder = Path(tempfile.mkdtemp(prefix="ctray", dir="/tmp"))  # short: Ray's socket paths
    token = folder / "token"
    token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    port = _free_port()
    log = folder / "head.log"
    command = [
        str(RAY), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
        "--num-cpus=2", "--object-store-memory=80000000", "--include-dashboard=false",
        "--disable-usage-stats", f"--temp-dir={folder / 'ray'}",
    ]
    with log.open("w") as out:
        head = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + timeout_s
        while "Ray runtime started" not in log.read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", env
    finally:
        if head.poll() is None:
            head.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
            with suppress(subprocess.TimeoutExpired):
                head.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _alive(head.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if _alive(head.pid):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
