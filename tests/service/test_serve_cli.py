"""`cloudtwin serve` as a user starts it: the token, the address it accepts, reads from afar."""

from __future__ import annotations

import os
import re
import socket
import stat
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.cli.cli_helpers import cloudtwin
from tests.service.conftest import TOKEN
from tests.service.server import running_server

from cloudtwin.service import ServiceSettings, create_app, is_loopback, load_or_create_token


def test_the_token_is_made_once_with_mode_600_and_printed_once(db: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with running_server(db, first) as server:
        assert server.token in server.output.read_text()
    token_file = first / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    (second / "token").write_text(token_file.read_text())
    (second / "token").chmod(0o600)
    with running_server(db, second) as again:
        assert again.token == server.token
        assert server.token not in again.output.read_text()
        bearer = {"Authorization": f"Bearer {again.token}"}
        answer = httpx.post(again.url + "/api/jobs/1/cancel", headers=bearer)
        assert answer.status_code == 404  # past the token: no such job


def test_token_files_are_private_and_not_overwritten(tmp_path: Path) -> None:
    token, created = load_or_create_token(tmp_path / "t")
    assert created and len(token) >= 40
    assert load_or_create_token(tmp_path / "t") == (token, False)
    (tmp_path / "t").chmod(0o644)
    with pytest.raises(Exception, match="chmod 600"):
        load_or_create_token(tmp_path / "t")


def test_a_non_local_address_without_a_token_is_refused(tmp_path: Path) -> None:
    done = cloudtwin("serve", "--db", str(tmp_path / "x.duckdb"), "--host", "0.0.0.0",
                     "--token-file", str(tmp_path / "none"))
    assert done.returncode == 2
    assert done.stderr.startswith("cloudtwin: error: host: 0.0.0.0 is reachable from other machines")
    assert not (tmp_path / "none").exists() and not (tmp_path / "x.duckdb").exists()


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "abc", "¹", "", "80.5"])
def test_a_bad_port_is_one_line_naming_the_field(tmp_path: Path, port: str) -> None:
    done = cloudtwin("serve", "--db", str(tmp_path / "x.duckdb"), "--token-file", str(tmp_path / "token"),
                     f"--port={port}")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"cloudtwin: error: port: {port!r} is not a TCP port (a whole number from 0 to 65535)"
    ]
    assert done.stdout == "" and not (tmp_path / "token").exists() and not (tmp_path / "x.duckdb").exists()


def test_a_port_in_use_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cloudtwin("serve", "--db", str(tmp_path / "x.duckdb"), "--token-file", str(tmp_path / "token"),
                         "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"cloudtwin: error: port: {port} on 127.0.0.1 is in use"]
    assert done.stdout == "" and not (tmp_path / "token").exists() and not (tmp_path / "x.duckdb").exists()


def test_port_0_serves_on_the_port_the_system_picked_and_says_which(db: Path, tmp_path: Path) -> None:
    args = ["--db", str(db), "--port", "0", "--token-file", str(tmp_path / "token")]
    with running_server(db, tmp_path, args=args, port=0) as server:
        said = re.search(r"on http://127\.0\.0\.1:(\d+)/", server.output.read_text())
        assert said is not None and int(said.group(1)) > 0
        assert server.url.endswith(f":{said.group(1)}")


@pytest.mark.parametrize(("host", "local"), [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                             ("127.3.2.1", True), ("0.0.0.0", False), ("10.1.2.3", False),
                                             ("example.org", False), ("", False)])
def test_loopback_addresses(host: str, local: bool) -> None:
    assert is_loopback(host) is local


def test_reads_from_another_machine_need_the_token(db: Path, tmp_path: Path) -> None:
    settings = ServiceSettings(db=db, token=TOKEN, snapshot_dir=tmp_path)
    with TestClient(create_app(settings), client=("192.0.2.7", 40000)) as remote:
        assert remote.get("/api/runs").status_code == 401
        assert remote.get("/").status_code == 401
        answer = remote.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200 and answer.json()["total"] == 3


def test_a_foreign_host_name_on_this_machine_needs_the_token(db: Path, tmp_path: Path) -> None:
    with running_server(db, tmp_path) as server:
        assert httpx.get(server.url + "/api/runs").status_code == 200
        port = server.url.rsplit(":", 1)[1]
        assert httpx.get(f"http://localhost:{port}/api/runs").status_code == 200
        rebound = httpx.get(server.url + "/api/runs", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 401
        bearer = {"Host": f"attacker.example:{port}", "Authorization": f"Bearer {server.token}"}
        assert httpx.get(server.url + "/api/runs", headers=bearer).status_code == 200


def test_the_socket_accepts_connections_before_the_url_is_printed() -> None:
    """`serve` prints its URL right after `_listen`: a client reading it must get in."""
    from cloudtwin.service.command import _listen

    listener = _listen("127.0.0.1", 0)
    try:
        with socket.create_connection(listener.getsockname()[:2], timeout=10):
            pass
    finally:
        listener.close()


def test_a_db_that_is_not_duckdb_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    notes = tmp_path / "notes.duckdb"
    notes.write_text("not a database\n" * 10)
    token = tmp_path / "token"
    done = cloudtwin("serve", "--db", str(notes), "--token-file", str(token), "--port", "0")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"cloudtwin: error: db: {notes} is not a DuckDB database"]
    assert not token.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["notes.duckdb"]


def test_a_db_that_is_a_folder_or_a_fifo_is_refused_naming_db(tmp_path: Path) -> None:
    from cloudtwin.errors import StoreError
    from cloudtwin.store.database import check_store_file

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        with pytest.raises(StoreError, match="^db: .* is not a regular file") as caught:
            check_store_file(path)
        assert caught.value.field == "db"
    check_store_file(tmp_path / "missing.duckdb")  # a store yet to be made


def test_a_store_that_does_not_exist_is_said_to_be_new(db: Path, tmp_path: Path) -> None:
    """A mistyped --db serves a new, empty store, and says so; an existing one is not new."""
    typo = tmp_path / "typo.duckdb"
    with running_server(typo, tmp_path):
        pass
    said = (tmp_path / "serve.log").read_text()
    assert f"{typo} did not exist: serving a new, empty store" in said
    again = tmp_path / "again"
    again.mkdir()
    with running_server(db, again):
        pass
    assert "did not exist" not in (again / "serve.log").read_text()
