"""The one place errors become HTTP answers: JSON naming the field and the reason."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from cloudtwin.errors import CloudtwinError

__all__ = ["ApiError", "error_body", "install_error_handlers"]

_FIELD = re.compile(r"^([\w.\[\]-]+):\s")


class ApiError(Exception):
    """A request the service refuses: its HTTP status, the field at fault and why."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


def error_body(field: str | None, message: str) -> dict[str, Any]:
    """`{"error": {"field": ..., "message": ...}}`."""
    return {"error": {"field": field, "message": message}}


def _field_of(message: str) -> str | None:
    match = _FIELD.match(message)
    return match.group(1) if match else None


def _validation_field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


async def _api_error(_: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
    return JSONResponse(error_body(err.field, err.message), err.status, headers=headers)


async def _cloudtwin_error(_: Request, err: Exception) -> JSONResponse:
    message = str(err)
    return JSONResponse(error_body(_field_of(message), message), 400)


async def _validation_error(_: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, RequestValidationError)
    first = err.errors()[0] if err.errors() else {"loc": (), "msg": "invalid request"}
    field = _validation_field(tuple(first.get("loc", ())))
    return JSONResponse(error_body(field, f"{field}: {first.get('msg', 'invalid')}"), 422)


async def _http_error(_: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, HTTPException)
    return JSONResponse(error_body(None, str(err.detail)), err.status_code, headers=err.headers)


async def _internal_error(_: Request, err: Exception) -> JSONResponse:
    return JSONResponse(error_body(None, f"internal error: {type(err).__name__}"), 500)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to its JSON answer."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(CloudtwinError, _cloudtwin_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
