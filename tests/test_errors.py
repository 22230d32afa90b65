"""The one error tree: every error names its field, and one mapper gives exit codes and statuses."""

from __future__ import annotations

import pytest

from cloudtwin.errors import (
    AccessError,
    CloudtwinError,
    FederationError,
    LimitError,
    ScenarioError,
    exit_code_of,
    status_of,
)


@pytest.mark.parametrize(
    ("error", "field"),
    [
        (ScenarioError("fabric.leaves: must be > 0"), "fabric.leaves"),
        (ScenarioError("tenants.0.hosts[3]: out of range"), "tenants.0.hosts[3]"),
        (ScenarioError("<scenario>: the scenario is empty"), None),
        (ScenarioError("x.yaml:3: fabric.spinez: unknown key", field="fabric.spinez"), "fabric.spinez"),
        (CloudtwinError(), None),
        (LimitError("limits.memory: 9 GB over 8 GB", "limits.memory"), "limits.memory"),
        (LimitError("the scenario needs 9 GB, above limits.memory", "limits.memory"), "limits.memory"),
        (FederationError("sites.0", "unknown site 'x'"), "sites.0"),
    ],
)
def test_every_error_carries_its_field(error: CloudtwinError, field: str | None) -> None:
    assert error.field == field


def test_the_message_is_kept_as_given() -> None:
    assert str(ScenarioError("x.yaml:3: a: b", field="a")) == "x.yaml:3: a: b"
    assert str(FederationError("vni", "in use", 409)) == "vni: in use"


def test_one_mapper_gives_exit_codes_and_statuses() -> None:
    assert exit_code_of(ScenarioError("a: b")) == 2
    assert exit_code_of(RuntimeError("bug")) == 1
    assert status_of(ScenarioError("a: b")) == 400
    assert status_of(FederationError("name", "exists", 409)) == 409
    assert status_of(AccessError("token", "missing token", 401)) == 401
    assert status_of(RuntimeError("bug")) == 500


def test_a_scenario_validation_error_names_its_key_as_its_field() -> None:
    from pathlib import Path

    from cloudtwin.scenario.federation import load_federation
    from cloudtwin.scenario.loader import load_scenario

    small = Path(__file__).parent / "service" / "small.yaml"
    with pytest.raises(ScenarioError) as bad:
        load_scenario(small.read_text(), "small.yaml", ["fabric.spinez=3"])
    assert (bad.value.field, str(bad.value)) == (
        "fabric.spinez", "small.yaml:4: fabric.spinez: unknown key (did you mean `spines`?)"
    )
    example = Path(__file__).parents[1] / "examples" / "intercloud.yaml"
    with pytest.raises(ScenarioError) as federated:
        load_federation(example.read_text(), "intercloud.yaml", ["underlay_mtuu=9000"])
    assert federated.value.field == "underlay_mtuu"
    expected = "intercloud.yaml: underlay_mtuu: unknown key (did you mean `underlay_mtu`?)"
    assert str(federated.value) == expected


@pytest.mark.parametrize(
    "error",
    [
        FederationError("sites.0", "unknown site 'x'", 404),
        AccessError("token", "not the admin's"),
        LimitError("the scenario needs 9 GB, above limits.memory", "limits.memory"),
        ScenarioError("x.yaml:3: fabric.spinez: unknown key", field="fabric.spinez"),
    ],
)
def test_every_error_survives_pickling_whole(error: CloudtwinError) -> None:
    """A sweep's worker sends its error back pickled; a custom __init__ must not break that."""
    import pickle

    from cloudtwin.intercloud.adapters.base import AdapterError

    for err in (error, AdapterError("the site refused")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err) and vars(back) == vars(err)
