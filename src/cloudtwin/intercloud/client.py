"""An HTTP client of the federation controller for agents (same calls as the Python API)."""

from __future__ import annotations

from typing import Any

import httpx

from cloudtwin.errors import AccessError, FederationError
from cloudtwin.intercloud.objects import SiteDesired, SiteReport

__all__ = ["FederationClient"]


class FederationClient:
    """Speaks to `/federation` on `base_url`; `messages` records every body sent and received."""

    def __init__(
        self, base_url: str, transport: httpx.BaseTransport | None = None, timeout_s: float = 10.0
    ) -> None:
        self.http = httpx.Client(base_url=base_url, transport=transport, timeout=timeout_s)
        self.messages: list[dict[str, Any]] = []

    def _call(self, method: str, path: str, token: str | None, body: dict[str, Any] | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.messages.append({"direction": "sent", "path": path, "body": body})
        answer = self.http.request(method, f"/federation{path}", json=body, headers=headers)
        content = answer.json() if answer.content else None
        self.messages.append({"direction": "received", "path": path, "body": content})
        if answer.status_code >= 400:
            error_body = (content or {}).get("error") or {}
            field = error_body.get("field") or "request"
            reason = error_body.get("message") or answer.reason_phrase
            error = AccessError if answer.status_code in (401, 403) else FederationError
            raise error(field, reason, answer.status_code)
        return content

    def desired(self, token: str | None, site: str) -> SiteDesired:
        """The site's desired state."""
        return SiteDesired.model_validate(self._call("GET", f"/sites/{site}/desired", token))

    def report(self, token: str | None, site: str, report: SiteReport) -> None:
        """Report what the site holds."""
        self._call("PUT", f"/sites/{site}/report", token, report.model_dump(mode="json"))

    def post(self, path: str, token: str | None, body: dict[str, Any]) -> Any:
        """Any POST under /federation."""
        return self._call("POST", path, token, body)

    def get(self, path: str) -> Any:
        """Any GET under /federation."""
        return self._call("GET", path, None)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()
