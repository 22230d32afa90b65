"""The HTTP API: one router per resource, all under /api."""

from cloudtwin.service.api import diagnosis, jobs, logs, runs

#: The API's routers, in the order the OpenAPI schema lists them.
ROUTERS = (runs.router, jobs.router, logs.router, diagnosis.router)

__all__ = ["ROUTERS"]
