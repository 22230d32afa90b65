"""The federation controller's HTTP API: a FastAPI router that the service (`cloudtwin serve`)
mounts and `cloudtwin federate serve` serves alone (FastAPI comes with the `web` extra).

Every request but the reads carries `Authorization: Bearer TOKEN` (the admin's, or the
site's own for what a site consents to, pulls and reports). Bad input answers 4xx with a
JSON body `{"error": {"field": ..., "message": ...}}` naming the field (the service's
shape); nothing is stored then.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, FastAPI, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import Field

from cloudtwin import __version__
from cloudtwin.errors import FederationError, status_of
from cloudtwin.intercloud.controller import (
    FederationController,
    NetworkView,
    SegmentView,
    SiteCreated,
    SiteView,
)
from cloudtwin.intercloud.objects import (
    NetworkRequest,
    NetworkStatus,
    SegmentRequest,
    SiteDesired,
    SiteReport,
    SiteRequest,
)

__all__ = ["federation_app", "federation_router"]


class SiteCreate(SiteRequest):
    """A site to register; `token` is the site's own (one is made when absent and returned once)."""

    token: str | None = Field(None, min_length=16)


def _error(status: int, field: str | None, reason: str) -> JSONResponse:
    # the service's error shape, so that the router reads the same mounted or alone
    return JSONResponse(status_code=status, content={"error": {"field": field, "message": reason}})


class _FederationRoute(APIRoute):
    """Turns a FederationError or a request that does not validate into a 4xx JSON body with the field."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except FederationError as err:
                return _error(status_of(err), err.field, err.reason)
            except RequestValidationError as err:
                first = err.errors()[0]
                loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "header", "path", "query")]
                return _error(
                    422,
                    ".".join(loc) or "body",
                    str(first.get("msg", "invalid")).removeprefix("Value error, "),
                )

        return route


def _bearer(authorization: str | None) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip() or None
    return None


def federation_router(controller: FederationController) -> APIRouter:
    """The controller's endpoints under /federation."""
    api = APIRouter(prefix="/federation", tags=["federation"], route_class=_FederationRoute)
    Auth = Header(None, description="Bearer TOKEN (the admin's or the site's)")  # noqa: N806

    @api.get("/sites")
    def list_sites() -> list[SiteView]:
        """Every site (name, flavour, gateway address)."""
        return controller.sites()

    @api.post("/sites", status_code=201)
    def add_site(body: SiteCreate, authorization: str | None = Auth) -> SiteCreated:
        """Register a site (admin); the answer holds the site's token, shown this once."""
        token = body.token or secrets.token_urlsafe(24)
        request = SiteRequest(name=body.name, flavour=body.flavour, gateway=body.gateway)
        return {**controller.add_site(_bearer(authorization), request, token), "token": token}

    @api.get("/networks")
    def list_networks() -> list[NetworkView]:
        """Every federated network."""
        return controller.networks()

    @api.post("/networks", status_code=201)
    def create_network(body: NetworkRequest, authorization: str | None = Auth) -> NetworkView:
        """A federated network (the admin, or a site of it)."""
        return controller.create_network(_bearer(authorization), body)

    @api.delete("/networks/{name}", status_code=204)
    def delete_network(name: str, authorization: str | None = Auth) -> Response:
        """Remove a federated network and its segments."""
        controller.delete_network(_bearer(authorization), name)
        return Response(status_code=204)

    @api.post("/sites/{site}/segments", status_code=201)
    def add_segment(site: str, body: SegmentRequest, authorization: str | None = Auth) -> SegmentView:
        """The site's consent: its tenant network joins a federated network."""
        return controller.add_segment(_bearer(authorization), site, body)

    @api.delete("/sites/{site}/segments/{network}", status_code=204)
    def delete_segment(site: str, network: str, authorization: str | None = Auth) -> Response:
        """The site withdraws its consent."""
        controller.delete_segment(_bearer(authorization), site, network)
        return Response(status_code=204)

    @api.get("/sites/{site}/desired")
    def desired(site: str, authorization: str | None = Auth) -> SiteDesired:
        """What the site's agent is to realise (the site's token only)."""
        return controller.desired(_bearer(authorization), site)

    @api.put("/sites/{site}/report", status_code=204)
    def report(site: str, body: SiteReport, authorization: str | None = Auth) -> Response:
        """The site's agent reports what the site holds."""
        controller.report(_bearer(authorization), site, body)
        return Response(status_code=204)

    @api.get("/status")
    def status() -> list[NetworkStatus]:
        """Each federated network and each interconnection: ACTIVE or PENDING."""
        return controller.status()

    return api


def federation_app(controller: FederationController) -> FastAPI:
    """The router alone in an app (`cloudtwin federate serve`); OpenAPI at /openapi.json.

    No /docs or /redoc: FastAPI's pages for them load their scripts from a CDN, and no page
    of cloudtwin loads anything from outside the machine.
    """
    app = FastAPI(
        title="cloudtwin federation controller", version=__version__, docs_url=None, redoc_url=None
    )
    app.include_router(federation_router(controller))
    return app
