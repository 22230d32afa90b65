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
        kinds = schema.get("oneOf") or [schema]  # a stored run: a fabric's or a cloud's
        assert isinstance(kinds, list)
        for kind in (_resolved(k, components) for k in kinds):
            assert kind.get("type") == "object" and kind.get("properties"), f"{where}: {kind}"
            assert kind.get("additionalProperties") is not True or kind.get("properties"), where


def _properties(name: str, components: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    properties = components[name]["properties"]
    assert isinstance(properties, dict)
    return properties


def test_a_run_and_a_job_result_are_documented_down_to_each_figure(client: TestClient) -> None:
    """The results' own types are the answer: a stored run (of a fabric or a cloud) and a
    finished job's result show every figure, not "an object"."""
    spec = client.get("/openapi.json").json()
    components = spec["components"]["schemas"]
    run = _schema_of(spec["paths"]["/api/runs/{run_id}"]["get"])
    assert [k["$ref"].rsplit("/", 1)[-1] for k in run["oneOf"]] == ["StoredEvaluation", "StoredCloud"]
    stored = _properties("StoredEvaluation", components)
    assert list(stored)[:4] == ["run_id", "created_at", "flow_rows", "scenario"]
    strategy = stored["strategies"]["additionalProperties"]["$ref"].rsplit("/", 1)[-1]
    assert strategy == "StrategyResult"
    performance = _properties("Performance", components)
    assert {"aggregate_gbps", "per_flow_gbps", "ratio_to_first"} <= set(performance)
    cloud = _properties("CloudMigration", components)
    assert list(cloud)[:3] == ["vm", "from", "to"] and "faulted_timeline" in cloud
    result = _properties("JobDetail", components)["result"]
    members = {m["$ref"].rsplit("/", 1)[-1] for m in result["anyOf"][0]["anyOf"]}
    assert members == {"Comparison", "NcclSweep", "RecordedResults", "RecordedCloud", "IngestSummary"}
    assert set(_properties("RunSummary", components)) >= {"aggregate_gbps", "fct_s", "utilization"}
