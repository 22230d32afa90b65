"""Running the installed `cloudtwin` command the way a user does."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")


def cloudtwin(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `cloudtwin ARGS...` and capture its output.

    A PYTHONPATH in `env` goes before the one the tests run with (which may point at a
    work tree's sources rather than the installed package).
    """
    extra = dict(env or {})
    outer = os.environ.get("PYTHONPATH")
    if "PYTHONPATH" in extra and outer:
        extra["PYTHONPATH"] = f"{extra['PYTHONPATH']}{os.pathsep}{outer}"
    full_env = {**os.environ, "COLUMNS": "200", **extra}
    return subprocess.run(
        [str(CLOUDTWIN), *args], cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=600
    )


def run_documented(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a documented `[VAR=value ...] cloudtwin ARGS...` line as a shell would."""
    words = shlex.split(command)
    env = {}
    while "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[0] == "cloudtwin", command
    return cloudtwin(*words[1:], cwd=cwd, env=env)
