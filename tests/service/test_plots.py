"""The figures of the pages (plain plotly dicts): every title below the toolbar's strip,
every legend outside its plot area, the fabric's nodes named and suspect nodes marked."""

from __future__ import annotations

import pytest

from cloudtwin.service.models import Fabric, FabricNode, Suspect, Timeline
from cloudtwin.service.web import plots


def _suspect(component: str, kind: str, rank: int) -> Suspect:
    return Suspect(rank=rank, component=component, kind=kind, score=1.0 / rank, tomography=0.0, logs=0.0,
                   degraded_samples=0, healthy_samples=0, messages={}, evidence="")


def _fabric(nics: int) -> Fabric:
    nodes = [FabricNode(name=f"host{i}/nic0", kind="nic", x=i + 0.5, y=1) for i in range(nics)]
    nodes += [FabricNode(name="leaf0", kind="leaf", x=1.0, y=2),
              FabricNode(name="spine0", kind="spine", x=1.0, y=3)]
    cables = [(f"host{i}/nic0", "leaf0") for i in range(nics)] + [("leaf0", "spine0")]
    return Fabric(nodes=nodes, cables=cables)


def test_every_node_is_named_and_a_suspect_node_is_marked_in_rank_order() -> None:
    suspects = [_suspect("leaf0-spine0", "link", 1), _suspect("spine0", "switch", 2),
                _suspect("host1/nic0", "nic", 3)]
    figure = plots.fabric_figure(_fabric(4), suspects)
    nodes = figure["data"][-1]
    assert nodes["mode"] == "markers+text"
    assert nodes["text"] == [f"host{i}<br>nic0" for i in range(4)] + ["leaf0", "spine0"]
    listed = [t for t in figure["data"] if t.get("showlegend", True)]
    assert sorted((t["legendrank"], t["name"]) for t in listed) == [
        (1, "#1 leaf0-spine0"), (2, "#2 spine0"), (3, "#3 host1/nic0")]
    assert listed[-1]["name"] == "#1 leaf0-spine0"  # drawn last: on top of the others
    ring = next(t for t in listed if t["name"] == "#2 spine0")
    assert ring["marker"]["symbol"] == "circle-open-dot" and (ring["x"], ring["y"]) == ([1.0], [3])


def test_a_crowded_tier_names_only_its_suspects() -> None:
    many = plots.LABELLED_PER_TIER + 1
    figure = plots.fabric_figure(_fabric(many), [_suspect("host7/nic0", "nic", 1)])
    named = [t for t in figure["data"][-1]["text"] if t]
    assert named == ["host7<br>nic0", "leaf0", "spine0"]


@pytest.mark.parametrize(
    "figure",
    [
        plots.timeline_figure({"ecmp": Timeline(t_s=[0.0, 0.1], faulted_gbps=[1, 2], baseline_gbps=[1, 2])}),
        plots.bar_figure("Aggregate throughput", {"ecmp": 1.0, "pinning": 2.0}, "Gbps"),
        plots.fabric_figure(_fabric(2), []),
    ],
)
def test_titles_sit_under_the_toolbar_and_legends_outside_the_plot(figure: plots.Figure) -> None:
    layout = figure["layout"]
    title, legend = layout["title"], layout["legend"]
    assert isinstance(title, dict) and isinstance(legend, dict)
    assert title["yref"] == "container" and title["pad"]["t"] >= plots.TOOLBAR_PX
    assert layout["margin"]["t"] > title["pad"]["t"] + 20  # type: ignore[index]
    assert legend["x"] >= 1 or legend["y"] >= 1  # right of or above the plot area, never on it
