"""The one place errors become HTTP answers: JSON naming the field and the reason."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from typing_extensions import TypedDict

from cloudtwin.errors import CloudtwinError, ServiceError, status_of

__all__ = ["ApiError", "ErrorBody", "error_body", "install_error_handlers"]


class ApiError(ServiceError):
    """A request the service refuses: its HTTP status, the field at fault and why."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message, field=field)
        self.status, self.message = status, message


class ErrorDetail(TypedDict):
    """What went wrong: the field at fault (None when no one field is) and the message."""

    field: str | None
    message: str


class ErrorBody(TypedDict):
    """Every error answer: `{"error": {"field": ..., "message": ...}}`."""

    error: ErrorDetail


def error_body(field: str | None, message: str) -> ErrorBody:
    """`{"error": {"field": ..., "message": ...}}`."""
    return {"error": {"field": field, "message": message}}


def _validation_field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


async def _cloudtwin_error(_: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, CloudtwinError)
    status = status_of(err)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(err.field, str(err)), status, headers=headers)


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
    app.add_exception_handler(CloudtwinError, _cloudtwin_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
