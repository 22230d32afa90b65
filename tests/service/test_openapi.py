"""/openapi.json documents the answer of every API route: a schema, not "anything"."""

from __future__ import annotations

from fastapi.testclient import TestClient


def _schema_of(operation: dict[str, object]) -> dict[str, object]:
    responses = operation["responses"]
    assert isinstance(responses, dict)
    ok = next(code for code in responses if code.startswith("2"))
    content = responses[ok].get("content", {})
    return dict(content.get("application/json", {}).get("schema", {}))


def _resolved(schema: dict[str, object], components: dict[str, dict[str, object]]) -> dict[str, object]:
    ref = schema.get("$ref")
    return components[str(ref).rsplit("/", 1)[-1]] if ref else schema


def test_every_api_route_documents_its_answer(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    components = spec["components"]["schemas"]
    routes = [(path, method, op) for path, ops in spec["paths"].items() if path.startswith("/api")
              for method, op in ops.items()]
    assert len(routes) >= 15
    for path, method, operation in routes:
        if "204" in operation["responses"]:
            continue  # no content, by design (a DELETE)
        schema = _resolved(_schema_of(operation), components)
        where = f"{method.upper()} {path}"
        assert schema, f"{where}: no response schema"
        if schema.get("type") == "array":  # a list of documented objects (the federation's views)
            items = schema.get("items")
            assert isinstance(items, dict), f"{where}: {schema}"
            schema = _resolved(items, components)
        assert schema.get("type") == "object" and schema.get("properties"), f"{where}: {schema}"
        assert schema.get("additionalProperties") is not True or schema.get("properties"), where
