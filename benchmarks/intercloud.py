"""Planning a large federation: 500 sites, 10,000 federated networks, 128,000 endpoints.

Every network spans 4 sites; a third are l2-stretch (one subnet, distinct addresses), a
third l3-routed (unique prefixes) and a third global-nat (the same range everywhere).
Prints the time to validate the scenario and to plan it (segments, endpoints, VNIs,
global blocks, overlap and duplicate checks), and the peak memory of the process.

Run:  python benchmarks/intercloud.py [--sites 500] [--networks 10000]
"""

from __future__ import annotations

import argparse
import resource
import time

from cloudtwin.intercloud.plan import plan_federation
from cloudtwin.scenario.federation import FederationScenario

MODES = ("l2-stretch", "l3-routed", "global-nat")
SITES_PER_NETWORK = 4


def scenario(sites: int, networks: int) -> dict:
    """The scenario as a mapping (what YAML would give)."""
    tenants: list[list[dict]] = [[] for _ in range(sites)]
    specs = []
    stride = sites // SITES_PER_NETWORK
    for k in range(networks):
        mode = MODES[k % 3]
        members = [(k * 7 + j * stride) % sites for j in range(SITES_PER_NETWORK)]
        for j, s in enumerate(members):
            i = len(tenants[s])
            count = 3 + (k % 5 == 0)
            if mode == "l2-stretch":
                address = f"172.16.0.{1 + 8 * j}/24"
            elif mode == "l3-routed":
                address = f"10.{s % 256}.{i + 100 * (s // 256)}.1/24"
            else:
                address = "192.168.0.1/24"
            tenants[s].append(
                {"name": f"t{k}", "vni": 1000 + i, "hosts": [], "address": address, "count": count}
            )
        specs.append({"name": f"n{k}", "tenant": f"t{k}", "mode": mode, "sites": [f"s{s}" for s in members]})
    site_list = []
    for s, held in enumerate(tenants):
        host = 0
        for tenant in held:
            count = tenant.pop("count")
            tenant["hosts"] = f"{host}-{host + count - 1}"
            host += count
        site_list.append(
            {
                "name": f"s{s}",
                "fabric": {"kind": "leaf-spine", "leaves": 16, "spines": 8, "hosts_per_leaf": 20},
                "tenants": held,
            }
        )
    return {"name": "large", "sites": site_list, "networks": specs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=500)
    parser.add_argument("--networks", type=int, default=10_000)
    args = parser.parse_args()
    data = scenario(args.sites, args.networks)
    start = time.perf_counter()
    validated = FederationScenario.model_validate(data)
    validated_s = time.perf_counter() - start
    plan = plan_federation(validated)
    total_s = time.perf_counter() - start
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    summary = plan.summary()
    print(
        f"{summary['sites']:,} sites, {summary['federated_networks']:,} federated networks, "
        f"{summary['federated_segments']:,} segments, {summary['endpoints']:,} endpoints, "
        f"{summary['tunnels']:,} tunnels; modes {summary['modes']}"
    )
    print(
        f"validated in {validated_s:.1f} s, planned in {total_s:.1f} s (target < 60 s); "
        f"peak memory {peak_gib:.2f} GiB (target < 4 GiB)"
    )


if __name__ == "__main__":
    main()
