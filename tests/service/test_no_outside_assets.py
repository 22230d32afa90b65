"""No page of either server (`cloudtwin serve`, `cloudtwin federate serve`) loads anything from
outside the machine: every HTML page each serves, and FastAPI's /docs and /redoc if they answer,
name no script, style, image or link on another host."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from cloudtwin.intercloud.api import federation_app
from cloudtwin.intercloud.controller import FederationController, MemoryStore
from cloudtwin.service.web import pages

#: Pages FastAPI makes unless told not to (their scripts come from a CDN).
FASTAPI_PAGES = ("/docs", "/docs/oauth2-redirect", "/redoc")
#: A value for each path parameter, and the query a page needs, to fetch every page with data.
PATH_VALUES = {"run_id": "1"}
QUERIES = {"/compare": "?runs=1,2"}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1", "testserver"}

_REFERENCE = re.compile(r"""\b(?:src|href|action|poster|data)\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)""", re.IGNORECASE)


def outside_references(html: str) -> list[str]:
    """Every src=/href=/url(...) in `html` that points at http(s):// or // on another host."""
    found = []
    for url in [*_REFERENCE.findall(html), *_CSS_URL.findall(html)]:
        parts = urlsplit(url)
        if (parts.scheme in ("http", "https") or url.startswith("//")) and parts.hostname not in LOCAL_HOSTS:
            found.append(url)
    return found


def _get_paths(app: FastAPI) -> list[str]:
    """The GET paths of the app: its OpenAPI schema's, and the service's pages (left out of it).

    Read from the schema and the page router rather than `app.routes`, whose shape changes
    between FastAPI versions (included routers may stay unexpanded there).
    """
    schema = [path for path, operations in app.openapi()["paths"].items() if "get" in operations]
    hidden = [r.path for r in pages.router.routes if isinstance(r, APIRoute) and "GET" in r.methods]
    is_service = any(path.startswith("/api/runs") for path in schema)
    return ["/openapi.json", *schema, *(hidden if is_service else [])]


def html_pages(app: FastAPI) -> list[str]:
    """The URL of every GET route the app serves, its parameters filled in, and FastAPI's pages."""
    urls = []
    for path in _get_paths(app):
        url = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES.get(m.group(1), "1"), path)
        urls.append(url + QUERIES.get(path, ""))
    return [*urls, *FASTAPI_PAGES]


def check_every_page(client: TestClient) -> list[str]:
    """Fetch every page; assert none refers outside; the HTML pages seen."""
    seen = []
    for url in html_pages(client.app):  # type: ignore[arg-type]
        answer = client.get(url)
        if "text/html" not in answer.headers.get("content-type", ""):
            continue
        assert answer.status_code == 200, (url, answer.status_code)
        assert outside_references(answer.text) == [], url
        seen.append(url)
    return seen


def test_the_check_sees_fastapis_cdn_pages() -> None:
    with TestClient(FastAPI()) as client:
        assert outside_references(client.get("/docs").text)
        assert outside_references(client.get("/redoc").text)
    assert outside_references('<link href="//cdn.example.org/x.css">') == ["//cdn.example.org/x.css"]
    assert outside_references('<script src="http://127.0.0.1:8000/static/app.js"></script>') == []
    assert outside_references("<div style=\"background: url('https://example.org/a.png')\">") != []


def test_no_page_of_serve_loads_from_outside(client: TestClient) -> None:
    seen = check_every_page(client)
    assert {"/", "/runs/1", "/compare?runs=1,2", "/logs", "/diagnosis"} <= set(seen)
    for path in FASTAPI_PAGES:
        assert client.get(path).status_code == 404
    for asset in ("/static/app.js", "/static/style.css"):
        text = client.get(asset).text
        assert not re.search(r"https?://(?!(localhost|127\.0\.0\.1)[:/])", text), asset


def test_no_page_of_federate_serve_loads_from_outside(tmp_path: Path) -> None:
    app = federation_app(FederationController(MemoryStore(), "admin-token"))
    with TestClient(app) as client:
        check_every_page(client)
        for path in FASTAPI_PAGES:
            assert client.get(path).status_code == 404, path
        assert client.get("/openapi.json").status_code == 200


def test_every_fastapi_app_of_cloudtwin_turns_its_cdn_pages_off() -> None:
    """Each `FastAPI(...)` in the sources says docs_url=None and redoc_url=None."""
    src = Path(__file__).resolve().parents[2] / "src" / "cloudtwin"
    made = []
    for source in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FastAPI":
                off = {k.arg for k in node.keywords if isinstance(k.value, ast.Constant)
                       and k.value.value is None}
                made.append(source.name)
                assert {"docs_url", "redoc_url"} <= off, f"{source}:{node.lineno}"
    assert {"app.py", "api.py"} <= set(made)
