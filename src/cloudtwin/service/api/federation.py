"""The federation controller's endpoints in the service, under /api/federation.

The controller's admin token is the service's, so the token `cloudtwin serve` printed
grants every change; a site's own token (made when the admin registers the site) grants
what the controller lets a site do: give its consent, pull its desired state, report.
Every change needs a bearer token (401 without one, as every change of the service);
reads are open to this machine, and from elsewhere need the service's or a site's token.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, Depends, Request

from cloudtwin.errors import FederationError
from cloudtwin.intercloud.api import federation_router
from cloudtwin.intercloud.controller import FederationController, MemoryStore, StateStore
from cloudtwin.service.auth import bearer, require_bearer, require_read
from cloudtwin.service.settings import ServiceSettings
from cloudtwin.store.federation import JsonFileStore

__all__ = ["PREFIX", "federation_controller", "federation_routes"]

#: Where the endpoints live: `/api` + the router's own `/federation`.
PREFIX = "/api"

_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def federation_controller(settings: ServiceSettings) -> FederationController:
    """The service's controller: its state in `settings.federation_state` (in memory when
    None), its admin token the service's."""
    path = settings.federation_state
    store: StateStore = MemoryStore() if path is None else _FileOnFirstChange(path)
    try:
        return FederationController(store, settings.token)
    except FederationError as err:
        if path is None:
            raise
        raise FederationError(err.field, f"{err.reason} (in {path})", err.status) from err


class _FileOnFirstChange(JsonFileStore):
    """The state file, written from the first change on: a service nobody federates through
    leaves no file beside its store (an empty state is generation 0)."""

    def save(self, state: Mapping[str, object]) -> None:
        if state.get("generation", 0) != 0 or self.path.exists():
            super().save(state)


def federation_routes(controller: FederationController) -> APIRouter:
    """The controller's router under PREFIX, behind the service's token rule."""

    def access(request: Request) -> None:
        if request.method not in _READS:
            require_bearer(request)
        elif not controller.knows(bearer(request)):
            require_read(request)

    router = APIRouter(prefix=PREFIX, dependencies=[Depends(access)])
    router.include_router(federation_router(controller))
    return router

