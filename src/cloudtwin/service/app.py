"""The FastAPI application: the API routers, the pages, the snapshot reader and the job queue.

The federation controller's endpoints are mounted under /api/federation (its state in
`settings.federation_state`). Other parts add their own routers through
`create_app(settings, extra_routers=[...])`; they protect their changes with
`Depends(require_token)` and read the store with `Depends(read_store)`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI

from cloudtwin import __version__
from cloudtwin.service.api import ROUTERS
from cloudtwin.service.api.federation import federation_controller, federation_routes
from cloudtwin.service.errors import install_error_handlers
from cloudtwin.service.jobs import JobQueue
from cloudtwin.service.settings import ServiceSettings
from cloudtwin.service.snapshot import Snapshots
from cloudtwin.service.web import mount_web

__all__ = ["create_app"]

_DESCRIPTION = (
    "The runs, jobs, logs and diagnoses of one cloudtwin store. Reading is open to this "
    "machine; every change needs `Authorization: Bearer TOKEN` (the token `cloudtwin serve` "
    "printed at its first start). Errors are `{\"error\": {\"field\", \"message\"}}`."
)


def create_app(settings: ServiceSettings, extra_routers: Sequence[APIRouter] = ()) -> FastAPI:
    """The service over `settings.db`, with any extra routers mounted beside the API."""
    federation = federation_routes(federation_controller(settings))  # refuses a foreign state first
    owned = settings.snapshot_dir is None
    folder = Path(tempfile.mkdtemp(prefix="cloudtwin-serve-")) if owned else settings.snapshot_dir
    assert folder is not None
    snapshots = Snapshots(settings.db, folder, settings.snapshot_interval_s)
    snapshots.refresh()
    jobs = JobQueue(after=snapshots.refresh)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        jobs.close()
        snapshots.close()
        if owned:
            shutil.rmtree(folder, ignore_errors=True)

    # no /docs or /redoc: FastAPI's pages for them load their scripts from a CDN
    app = FastAPI(
        title="cloudtwin", version=__version__, description=_DESCRIPTION, lifespan=lifespan,
        docs_url=None, redoc_url=None,
    )
    app.state.settings, app.state.snapshots, app.state.jobs = settings, snapshots, jobs
    install_error_handlers(app)
    for router in (*ROUTERS, federation, *extra_routers):
        app.include_router(router)
    mount_web(app)
    return app
