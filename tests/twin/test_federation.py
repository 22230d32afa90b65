"""A federation's run (`simulate_federation`): refused up front when above its limits."""

from __future__ import annotations

import pytest

from cloudtwin.errors import LimitError
from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import load_federation
from cloudtwin.twin.federation import simulate_federation


def test_a_federation_above_its_limits_is_refused_before_the_sites_are_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_join(*_: object) -> None:
        raise AssertionError("the sites were joined before the estimate")

    monkeypatch.setattr("cloudtwin.twin.federation.join_sites", no_join)
    text = "sites: [{name: a}, {name: b}]\nlimits: {sites: 1}\n"
    with pytest.raises(LimitError) as err:
        simulate_federation(plan_federation(load_federation(text, "f.yaml")))
    assert err.value.field == "limits.sites"
