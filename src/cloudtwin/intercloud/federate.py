"""Use cases of a federation: put a planned scenario into a controller, and run the sites' agents."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from cloudtwin.intercloud.adapters.base import Adapter
from cloudtwin.intercloud.adapters.dove import DoveLikeAdapter
from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter
from cloudtwin.intercloud.agent import Agent, ControllerClient, ReconcileResult
from cloudtwin.intercloud.controller import FederationController
from cloudtwin.intercloud.objects import NetworkRequest, SegmentRequest, SiteRequest
from cloudtwin.intercloud.plan import FederationPlan, ip_text

__all__ = ["apply_plan", "modelled_adapter", "new_token", "run_agents", "segment_requests"]


def new_token() -> str:
    """A fresh random token (secrets, not the scenario seed: tokens must not be guessable)."""
    return secrets.token_urlsafe(24)


def segment_requests(plan: FederationPlan) -> list[tuple[str, SegmentRequest]]:
    """(site, request) for every federated segment, in (network, site) order."""
    rows = sorted(
        (int(n), int(plan.seg_site[s]), int(s)) for s, n in enumerate(plan.seg_network.tolist()) if n >= 0
    )
    found = []
    for n, site_index, s in rows:
        site = plan.scenario.sites[site_index]
        tenant = site.tenants[int(plan.seg_tenant[s])]
        prefix = tenant.network.prefixlen
        found.append(
            (
                site.name,
                SegmentRequest(
                    network=plan.network_names[n],
                    tenant=tenant.name,
                    vni=tenant.vni,
                    address=f"{ip_text(int(plan.seg_first[s]))}/{prefix}",
                    endpoints=int(plan.seg_count[s]),
                ),
            )
        )
    return found


def apply_plan(
    controller: FederationController, plan: FederationPlan, admin_token: str, site_tokens: Mapping[str, str]
) -> None:
    """Register the plan's sites, networks and every site's consent, in one transaction."""
    scenario = plan.scenario
    with controller.transaction():
        for site in scenario.sites:
            controller.add_site(
                admin_token, SiteRequest(name=site.name, flavour=site.flavour), site_tokens[site.name]
            )
        for n, spec in enumerate(scenario.networks):
            controller.create_network(
                admin_token,
                NetworkRequest(
                    name=spec.name,
                    tenant=spec.tenant,
                    mode=spec.mode,
                    sites=spec.sites,
                    vni=int(plan.network_vni[n]),
                ),
            )
        for name, request in segment_requests(plan):
            controller.add_segment(site_tokens[name], name, request)


def modelled_adapter(flavour: str) -> Adapter:
    """An adapter over a modelled site of `flavour` (the linux flavour is modelled as OpenStack-like
    objects here; `cloudtwin federate up` realises it for real)."""
    return DoveLikeAdapter() if flavour == "dove-like" else OpenStackLikeAdapter()


def run_agents(
    controller: ControllerClient, agents: Mapping[str, tuple[str, Adapter]], rounds: int = 2
) -> dict[str, list[ReconcileResult]]:
    """Reconcile every site `rounds` times (the second round sees the peers' reports)."""
    results: dict[str, list[ReconcileResult]] = {site: [] for site in agents}
    for _ in range(rounds):
        for site, (token, adapter) in agents.items():
            results[site].append(Agent(site, token, controller, adapter).reconcile())
    return results
