"""docs/cloud-reference.md is what the models generate now, and every key has a type, a
default, a unit where it takes one, and a meaning."""

from __future__ import annotations

from pydantic import Field
from tests.cli.cli_helpers import REPO

from cloudtwin.scenario.cloud import CloudScenario, CloudSite
from cloudtwin.scenario.reference import missing_meanings, reference_markdown, sections

PAGE = REPO / "docs" / "cloud-reference.md"


def test_the_page_is_what_the_models_generate() -> None:
    assert PAGE.read_text() == reference_markdown(), (
        "regenerate: python -c 'from cloudtwin.scenario.reference import reference_markdown as r; "
        "print(r(), end=\"\")' > docs/cloud-reference.md"
    )


def test_every_key_has_a_meaning() -> None:
    assert missing_meanings() == []


def test_a_new_key_without_a_meaning_is_caught() -> None:
    class Widened(CloudSite):
        racks: int = Field(1, ge=1)

    class Cloud(CloudScenario):
        federation_sites: tuple[Widened, ...] = ()

    assert "Widened.racks" in missing_meanings(Cloud)


def _row(section: str, key: str):  # type: ignore[no-untyped-def]
    found = {s.name: s for s in sections()}[section]
    return next(r for r in found.rows if r.key == key)


def test_types_defaults_and_units_come_from_the_models() -> None:
    wan = _row("WanLink", "bandwidth")
    assert (wan.type, wan.default, wan.unit.split()[0]) == ("number", "10Gbps", "bit/s")
    assert _row("WanLink", "latency").default == "10ms"
    memory = _row("CloudVm", "memory")
    assert (memory.default, memory.unit.split()[0]) == ("required", "bytes")
    assert _row("FederatedTraffic", "size").default == "1GiB"
    assert _row("GatewaySpec", "detection").unit.startswith("s ")
    assert _row("FederatedNetworkSpec", "mode").type == "one of `l2-stretch`, `l3-routed`, `global-nat`"
    paths = {s.name: s.paths for s in sections()}
    assert paths["NicFunction"][0] == "federation.sites[].nic.functions[]"
    assert paths["CloudVm"] == ("mobility.vms[]",)
