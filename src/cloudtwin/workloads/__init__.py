"""Workloads: the traffic a scenario puts on the fabric."""

from cloudtwin.workloads.perftest import TenantHosts, host_pairs, perftest_flows, qp_flows

__all__ = ["TenantHosts", "host_pairs", "perftest_flows", "qp_flows"]
