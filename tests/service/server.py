"""`cloudtwin serve` started as a user starts it, on a free local port, stopped afterwards."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.cli.cli_helpers import CLOUDTWIN, REPO


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    output: Path
    process: subprocess.Popen[bytes]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    db: Path, folder: Path, args: list[str] | None = None, port: int | None = None,
    cwd: Path = REPO, token_file: Path | None = None,
) -> Iterator[Server]:
    """Start `cloudtwin serve` (by default `--db DB --port P --token-file FOLDER/token`)
    and wait until it answers; always stop it. With `port=0` the port is read from the
    line the server prints."""
    port = free_port() if port is None else port
    token_file = token_file or folder / "token"
    output = folder / "serve.log"
    env = {**os.environ, "COLUMNS": "200"}
    words = args or ["--db", str(db), "--port", str(port), "--token-file", str(token_file)]
    with output.open("w") as log:
        process = subprocess.Popen(
            [str(CLOUDTWIN), "serve", *words], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            said = re.search(r"on http://127\.0\.0\.1:(\d+)/", output.read_text())
            url = f"http://127.0.0.1:{port or (said.group(1) if said else 0)}"
            try:
                if (port or said) and httpx.get(url + "/api/runs", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"cloudtwin serve did not start:\n{output.read_text()}")
            time.sleep(0.2)
        yield Server(url, token_file.read_text().strip(), output, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
