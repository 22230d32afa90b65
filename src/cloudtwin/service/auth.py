"""Who may do what: reading is open to this machine, every change needs the bearer token."""

from __future__ import annotations

from fastapi import Request

from cloudtwin.service.errors import ApiError
from cloudtwin.service.settings import is_loopback
from cloudtwin.service.token import same_token

__all__ = ["bearer", "require_bearer", "require_read", "require_token"]

_NO_TOKEN = "Authorization: a bearer token is required for changes"


def bearer(request: Request) -> str | None:
    """The request's `Authorization: Bearer TOKEN`, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def require_token(request: Request) -> None:
    """A dependency for every route that changes something: 401 without the right token."""
    given = bearer(request)
    if given is None:
        raise ApiError(401, "Authorization", _NO_TOKEN)
    if not same_token(given, request.app.state.settings.token):
        raise ApiError(401, "Authorization", "Authorization: the bearer token is not this service's")


def require_bearer(request: Request) -> None:
    """For a change whose token a mounted part judges itself (the federation controller: its
    admin token is the service's, a site's own grants that site's part): 401 without any."""
    if bearer(request) is None:
        raise ApiError(401, "Authorization", _NO_TOKEN)


def _host_name(request: Request) -> str:
    host = request.headers.get("host", "")
    if host.startswith("["):  # [::1]:8000
        return host[1:].split("]")[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def require_read(request: Request) -> None:
    """A dependency for reads: open to clients on this machine, others need the token.

    A page on another site that points a name of its own at 127.0.0.1 (DNS rebinding)
    sends that name as the Host: such reads need the token too.
    """
    client = request.client.host if request.client else None
    if client == "testclient":  # an in-process test client
        return
    if client is not None and is_loopback(client) and is_loopback(_host_name(request)):
        return
    require_token(request)
