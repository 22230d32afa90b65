"""`cloudtwin serve`: the HTTP API and the web pages over one store, on this machine by default.

Names are loaded on first use, so that the CLI can list `serve` without importing
FastAPI (the `web` extra) until the command runs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "create_app": "app",
    "require_read": "auth",
    "require_token": "auth",
    "job_queue": "deps",
    "read_store": "deps",
    "ApiError": "errors",
    "DEFAULT_HOST": "settings",
    "DEFAULT_PORT": "settings",
    "ServiceSettings": "settings",
    "is_loopback": "settings",
    "token_path_for": "settings",
    "load_or_create_token": "token",
}

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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'cloudtwin.service' has no attribute {name!r}")
    return getattr(import_module(f"cloudtwin.service.{_WHERE[name]}"), name)
