"""An HTTP client of the federation controller for agents (same calls as the Python API)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import httpx
from pydantic import JsonValue
from typing_extensions import TypedDict

from cloudtwin.errors import AccessError, FederationError
from cloudtwin.intercloud.objects import SiteDesired, SiteReport

__all__ = ["FederationClient", "Message"]


class Message(TypedDict):
    """A body sent to the controller or received from it, for the record."""

    direction: Literal["sent", "received"]
    path: str
    body: JsonValue


def _error_of(content: JsonValue) -> tuple[str, str | None]:
    """The field and message of the service's `{"error": {"field", "message"}}` body."""
    error = content.get("error") if isinstance(content, dict) else None
    if not isinstance(error, dict):
        return "request", None
    field, message = error.get("field"), error.get("message")
    return (field if isinstance(field, str) and field else "request"), (
        message if isinstance(message, str) and message else None
    )


class FederationClient:
    """Speaks to `/federation` on `base_url`; `messages` records every body sent and received."""

    def __init__(
        self, base_url: str, transport: httpx.BaseTransport | None = None, timeout_s: float = 10.0
    ) -> None:
        self.http = httpx.Client(base_url=base_url, transport=transport, timeout=timeout_s)
        self.messages: list[Message] = []

    def _call(
        self, method: str, path: str, token: str | None, body: Mapping[str, JsonValue] | None = None
    ) -> JsonValue:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        sent = dict(body) if body is not None else None
        self.messages.append({"direction": "sent", "path": path, "body": sent})
        answer = self.http.request(method, f"/federation{path}", json=sent, headers=headers)
        content: JsonValue = answer.json() if answer.content else None
        self.messages.append({"direction": "received", "path": path, "body": content})
        if answer.status_code >= 400:
            field, reason = _error_of(content)
            error = AccessError if answer.status_code in (401, 403) else FederationError
            raise error(field, reason or answer.reason_phrase, answer.status_code)
        return content

    def desired(self, token: str | None, site: str) -> SiteDesired:
        """The site's desired state."""
        return SiteDesired.model_validate(self._call("GET", f"/sites/{site}/desired", token))

    def report(self, token: str | None, site: str, report: SiteReport) -> None:
        """Report what the site holds."""
        self._call("PUT", f"/sites/{site}/report", token, report.model_dump(mode="json"))

    def post(self, path: str, token: str | None, body: Mapping[str, JsonValue]) -> JsonValue:
        """Any POST under /federation."""
        return self._call("POST", path, token, body)

    def get(self, path: str) -> JsonValue:
        """Any GET under /federation."""
        return self._call("GET", path, None)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()
