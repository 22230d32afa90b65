"""`cloudtwin serve`: the HTTP API and the web pages over one store, on this machine by default."""

from cloudtwin.service.app import create_app
from cloudtwin.service.auth import require_read, require_token
from cloudtwin.service.deps import job_queue, read_store
from cloudtwin.service.errors import ApiError
from cloudtwin.service.settings import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ServiceSettings,
    is_loopback,
    token_path_for,
)
from cloudtwin.service.token import load_or_create_token

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ApiError",
    "ServiceSettings",
    "create_app",
    "is_loopback",
    "job_queue",
    "load_or_create_token",
    "read_store",
    "require_read",
    "require_token",
    "token_path_for",
]
