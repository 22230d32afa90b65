"""`cloudtwin serve`: the command that starts the HTTP API and the web pages over a store.

It lives here, beside the service, and the CLI loads it by name (cli/ and service/ are
peers that do not import each other). Nothing heavy is imported until it runs.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path

import typer

from cloudtwin.errors import ServiceError, StoreError, needs_extra
from cloudtwin.store.defaults import DEFAULT_DB

__all__ = ["serve"]

_DB = typer.Option(
    DEFAULT_DB, "--db", help="The store (DuckDB) to serve; created by the first job that stores."
)
_HOST = typer.Option(
    "127.0.0.1", "--host", help="Address to listen on. Other than this machine's only with an existing token."
)
_PORT = typer.Option("8000", "--port", metavar="<port>", help="TCP port to listen on (0 to 65535).")
_TOKEN = typer.Option(
    None, "--token-file", help="Where the bearer token is kept (default: beside the store, DB.token)."
)


def parse_port(text: str) -> int:
    """A TCP port from its text: a whole number from 0 to 65535; ServiceError naming `port`.

    >>> parse_port("8000")
    8000
    """
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) > 65535:
        raise ServiceError(f"port: {text!r} is not a TCP port (a whole number from 0 to 65535)")
    return int(value)


def serve(db: Path = _DB, host: str = _HOST, port: str = _PORT, token_file: Path | None = _TOKEN) -> None:
    """Serve the runs, jobs, logs and diagnoses of a store: an HTTP API and web pages.

    Open http://127.0.0.1:8000/ for the pages; the API's schema is at /openapi.json. Reading is open to
    this machine; every change (starting a job, cancelling one) needs the bearer token,
    made at the first start, kept mode 0600 beside the store and printed that once.
    Pages read a copy of the store, so a CLI ingest or sweep writing it meanwhile never
    makes them fail (they show the last copy until the writer is done). The federation
    controller's endpoints are under /api/federation, its state kept beside the store.

    Example:  cloudtwin serve --db cloudtwin.duckdb --port 8000
    """
    number = parse_port(port)
    from cloudtwin.store.database import check_store_file

    check_store_file(db)  # before anything is written beside it
    new_store = not db.exists()
    with needs_extra("web", "serve"):  # fastapi, uvicorn, jinja2, plotly
        import uvicorn

        from cloudtwin.service.app import create_app
    from cloudtwin.service.examples import default_examples_dir
    from cloudtwin.service.settings import ServiceSettings, federation_path_for, is_loopback, token_path_for
    from cloudtwin.service.token import load_or_create_token

    path = token_file if token_file is not None else token_path_for(db)
    if not is_loopback(host) and not path.exists():
        raise StoreError(
            f"host: {host} is reachable from other machines; start once on 127.0.0.1 to make the "
            f"token ({path}), then every request from elsewhere needs it"
        )
    listener = _listen(host, number)
    number = int(listener.getsockname()[1])
    token, created = load_or_create_token(path)
    if created:
        typer.echo(f"cloudtwin: new bearer token for changes (kept in {path}, shown only now):\n{token}")
    else:
        typer.echo(f"cloudtwin: changes need the bearer token kept in {path}")
    settings = ServiceSettings(
        db=db, token=token, examples_dir=default_examples_dir(), host=host,
        federation_state=federation_path_for(db),
    )
    app = create_app(settings)
    if new_store:  # a mistyped --db would otherwise serve an empty store without a word
        typer.echo(
            f"cloudtwin: {db} did not exist: serving a new, empty store (runs appear as jobs or "
            f"`cloudtwin evaluate ... --db {db}` store them)",
            err=True,
        )
    typer.echo(f"cloudtwin: serving {db} on http://{host}:{number}/ (API schema at /openapi.json)")
    # a request or a job still running a second after SIGTERM does not hold the exit up
    config = uvicorn.Config(app, host=host, port=number, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    server.run(sockets=[listener])
    if not app.state.jobs.stopped:
        # A job still inside a store write or a computation: leave without it (each write is
        # a transaction) rather than let the interpreter's exit abort inside DuckDB.
        sys.stdout.flush()
        os._exit(0)


#: Connections the kernel accepts and holds until the server takes them.
_BACKLOG = 2048


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on (host, port) before the server starts, so that a port in use is
    one line naming it, port 0 is told as the port the system picked, and a client that
    reads the printed URL is accepted at once (the server answers once it runs)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as err:
        raise ServiceError(f"host: {host!r} is not an address of this machine ({err})") from None
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(_BACKLOG)  # accepting from now on: the URL printed next can be opened
    except OSError as err:
        listener.close()
        if err.errno == errno.EADDRNOTAVAIL:
            raise ServiceError(f"host: {host} is not an address of this machine") from None
        reason = "is in use" if err.errno == errno.EADDRINUSE else f"cannot be used ({err.strerror})"
        raise ServiceError(f"port: {port} on {host} {reason}") from None
    return listener
