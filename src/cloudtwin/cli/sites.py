"""Per-site commands on a one-cloud file: each site of `federation.sites` read as the
single-fabric scenario of that site (its fabric, tenants, cluster, NICs, jobs and faults),
so that `train`, `hpl`, `nccl-tests`, `run`, `compare` and `nic` run on it as on any
scenario file, one site (`--site NAME`) or every site whose workload the command takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cloudtwin.cli import output
from cloudtwin.cli.output import emit_json, is_cloud_file, read_cloud, read_scenario, write_json
from cloudtwin.errors import ScenarioError

if TYPE_CHECKING:
    from cloudtwin.scenario.cloud import CloudScenario, CloudSite
    from cloudtwin.scenario.model import Scenario

__all__ = ["SITE", "SiteScenario", "for_each_site", "refuse_cloud", "site_scenarios"]

SITE = typer.Option(
    None,
    "--site",
    help="On a one-cloud file (federation.sites): the site to run (default: every site whose "
    "workload this command takes).",
)

#: The command that runs each workload kind of a site.
COMMAND_OF_KIND = {
    "training": "train",
    "hpl": "hpl",
    "collective": "nccl-tests",
    "perftest": "run",
    "flows": "run",
}


@dataclass(frozen=True)
class SiteScenario:
    """A scenario to run: a site of a cloud (`site` its name) or a single-fabric file (`site` None)."""

    site: str | None
    scenario: Scenario


def _kind(site: CloudSite) -> str:
    return site.workload.kind if site.workload is not None else ("jobs" if site.workloads else "none")


def _hint(path: Path, sites: Sequence[CloudSite]) -> str:
    runs = []
    for s in sites:
        kind = _kind(s)
        command = COMMAND_OF_KIND.get(kind)
        how = f" (cloudtwin {command} {path} --site {s.name})" if command else ""
        runs.append(f"{s.name} runs {kind}{how}")
    return "; ".join(runs)


def _chosen(
    cloud: CloudScenario, path: Path, site: str | None, command: str, kinds: Sequence[str] | None
) -> list[CloudSite]:
    sites = list(cloud.federation.sites)
    if site is not None:
        names = [s.name for s in sites]
        if site not in names:
            raise ScenarioError(f"--site: no site named {site!r} in {path} (sites: {', '.join(names)})")
        return [sites[names.index(site)]]
    chosen = [s for s in sites if kinds is None or _kind(s) in kinds]
    if not chosen:
        raise ScenarioError(
            f"{command}: no site of {cloud.name} runs workload.kind {' or '.join(kinds or ())}; "
            f"{_hint(path, sites)}"
        )
    return chosen


def site_scenarios(
    path: Path,
    overrides: list[str] | None,
    site: str | None,
    command: str,
    kinds: Sequence[str] | None = None,
) -> list[SiteScenario]:
    """The scenarios a per-site command runs: the file itself, or the chosen sites of a cloud
    (`site`, else every site whose workload kind is in `kinds`; every site when None)."""
    if not is_cloud_file(path):
        if site is not None:
            raise ScenarioError(
                f"--site: {path} is a single-fabric scenario; --site names a site of a one-cloud file"
            )
        return [SiteScenario(None, read_scenario(path, overrides))]
    cloud = read_cloud(path, overrides)
    targets = []
    for s in _chosen(cloud, path, site, command, kinds):
        scenario = s.site_scenario(cloud.seed, cloud.routing, cloud.reaction, cloud.limits)
        targets.append(SiteScenario(s.name, scenario.model_copy(update={"name": f"{cloud.name}/{s.name}"})))
    return targets


def refuse_cloud(path: Path, command: str, instead: str) -> None:
    """One line naming the command that does what `command` would on a one-cloud file."""
    if is_cloud_file(path):
        raise ScenarioError(f"{command}: {path} is one cloud of federated sites (federation:); {instead}")


def for_each_site(
    targets: list[SiteScenario],
    one: Callable[[Scenario], object],
    as_json: bool,
    out: Path | None = None,
) -> None:
    """Run `one` (which prints its own tables unless `as_json`, and returns its JSON document)
    on every target; JSON: the document, or for a cloud `{"sites": {name: document}}`."""
    document: object
    if targets[0].site is None:
        document = one(targets[0].scenario)
    else:
        sites: dict[str, object] = {}
        for target in targets:
            if not as_json and len(targets) > 1:
                output.stdout.print(f"site {target.site}", style="bold", highlight=False)
            sites[str(target.site)] = one(target.scenario)
        document = {"sites": sites}
    if out is not None:
        write_json(out, document)
    if as_json:
        emit_json(document)
