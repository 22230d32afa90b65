"""A one-cloud file's own checks: a VM sits on a host of its network's tenant, and a
mistyped key is refused with the nearest key the section takes."""

from __future__ import annotations

import pytest
from tests.cli.cli_helpers import REPO

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.cloud import load_cloud
from cloudtwin.scenario.loader import load_scenario

CLOUD = (REPO / "examples" / "one-cloud.yaml").read_text()


def test_a_vm_outside_its_tenants_hosts_is_refused() -> None:
    with pytest.raises(ScenarioError) as bad:
        load_cloud(CLOUD, "one-cloud.yaml", ["mobility.vms.0.host=2"])
    message = str(bad.value)
    assert "mobility.vms.0.host: host 2 of site 'east' is not a host of tenant 'web'" in message
    assert message.endswith("the tenant has hosts 6-7 there")
    assert load_cloud(CLOUD, "one-cloud.yaml", ["mobility.vms.0.host=7"]).mobility.vms[0].host == 7


@pytest.mark.parametrize(
    ("override", "suggested"),
    [
        ("mobility.vms.0.netwrk=web", "mobility.vms.0.netwrk: unknown key (did you mean `network`?)"),
        ("federation.sites.0.gateway.capacty=10Gbps", "(did you mean `capacity`?)"),
        ("federation.wan.0.latncy=1ms", "(did you mean `latency`?)"),
        ("limits.flow=10", "(did you mean `flows`?)"),
    ],
)
def test_a_mistyped_cloud_key_names_the_nearest(override: str, suggested: str) -> None:
    with pytest.raises(ScenarioError) as bad:
        load_cloud(CLOUD, "one-cloud.yaml", [override])
    assert suggested in str(bad.value)


def test_a_mistyped_fabric_key_names_the_nearest_and_a_far_one_lists_the_keys() -> None:
    text = (REPO / "examples" / "leaf-spine-perftest.yaml").read_text()
    with pytest.raises(ScenarioError) as near:
        load_scenario(text, "x.yaml", ["fabric.leafs=4"])
    assert str(near.value).endswith("fabric.leafs: unknown key (did you mean `leaves`?)")
    with pytest.raises(ScenarioError) as far:
        load_scenario(text, "x.yaml", ["routing.zzz=1"])
    assert str(far.value).endswith("routing.zzz: unknown key (keys here: hash, per_switch_seed, strategy)")


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("mobility.migrations=[{vm: shop}]", "migrations.0.to: Field required (text: the destination site)"),
        ("federation.sites.0.tenants=[{vni: 7}]", "tenants.0.name: Field required (text: tenant name)"),
    ],
)
def test_a_missing_key_says_what_it_holds(override: str, said: str) -> None:
    with pytest.raises(ScenarioError) as bad:
        load_cloud(CLOUD, "one-cloud.yaml", [override])
    assert str(bad.value).endswith(said)
