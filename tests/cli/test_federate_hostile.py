"""`cloudtwin federate` against hostile input: tokens others can read, bad adapter command lines."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO
from tests.cli.test_new_commands_bad_input import TOKEN_ENV, one_line_error

from cloudtwin.cli.app import main

EXAMPLE = str(REPO / "examples" / "intercloud.yaml")


@pytest.fixture
def state(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A controller state made by `federate apply` (the admin token read from its tokens file)."""
    path = tmp_path / "state.json"
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.setattr("os.umask", lambda _: 0)  # the widest umask: the file must be 0600 anyway
    assert main(["federate", "apply", EXAMPLE, "--state", str(path), "--json"]) == 0
    capsys.readouterr()
    return path


def test_the_tokens_file_is_made_0600(state: Path) -> None:
    tokens = state.with_name("state.json.tokens")
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    assert set(json.loads(tokens.read_text())) == {"admin", "sites"}


@pytest.mark.parametrize(
    ("mode", "command"),
    [(mode, ["status"]) for mode in (0o644, 0o640, 0o666, 0o604)]
    + [(0o640, ["apply", EXAMPLE]), (0o644, ["serve", "--port", "1"])],
)
def test_a_tokens_file_others_can_read_is_refused_by_every_command(
    state: Path, capsys: pytest.CaptureFixture[str], mode: int, command: list[str]
) -> None:
    tokens = state.with_name("state.json.tokens")
    before = tokens.read_bytes()
    tokens.chmod(mode)
    err = one_line_error(capsys, "federate", *command, "--state", str(state))
    assert f"mode {mode:o} lets other users read it; chmod 600 it" in err
    assert tokens.read_bytes() == before


def test_a_tokens_file_that_is_not_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    (tmp_path / "state.json.tokens").mkdir(mode=0o700)
    err = one_line_error(capsys, "federate", "apply", EXAMPLE, "--state", str(tmp_path / "state.json"))
    assert "not a regular file" in err


@pytest.mark.parametrize("command", ["'unclosed", 'adapter "half', ""])
def test_an_adapter_command_line_that_does_not_split_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Refused before the controller is asked anything (no controller listens at port 1)."""
    monkeypatch.setenv("CLOUDTWIN_SITE_TOKEN", "t" * 16)
    err = one_line_error(capsys, "federate", "agent", "east", "--controller", "http://127.0.0.1:1",
                         "--adapter", "command", "--adapter-command", command, "--once")
    assert "adapter_command" in err


def test_serve_prints_its_url_once_the_socket_accepts(tmp_path: Path) -> None:
    """Port 0: the URL printed names the port the system chose, and answers at once."""
    import os
    import select
    import subprocess

    import httpx
    from tests.cli.cli_helpers import CLOUDTWIN

    env = {**os.environ, TOKEN_ENV: "a" * 24}
    server = subprocess.Popen(
        [str(CLOUDTWIN), "federate", "serve", "--state", str(tmp_path / "s.json"), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert server.stdout is not None
        # the server says where it is once it listens (a generous bound for a loaded machine)
        assert select.select([server.stdout], [], [], 300)[0], "no URL printed"
        line = server.stdout.readline()
        assert line.startswith("cloudtwin: federation controller on http://127.0.0.1:"), line
        url = line.split(" on ", 1)[1].split()[0]
        assert httpx.get(f"{url}federation/status", timeout=60).json() == []
    finally:
        server.terminate()
        server.wait(timeout=60)
