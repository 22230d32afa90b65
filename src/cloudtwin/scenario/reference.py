"""The reference of a one-cloud scenario file, generated from its models: every key with its
type, default, unit and meaning, section by section (`docs/cloud-reference.md` is this
module's output; a test checks that it is current and that no key lacks a meaning).

Types, defaults and units come from the pydantic models themselves; the meanings are
written here, keyed by the model that declares the field, so a new key without one fails
the test instead of going undocumented.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from cloudtwin.scenario.cloud import CloudScenario

__all__ = [
    "MEANINGS",
    "ReferenceRow",
    "Section",
    "field_type",
    "missing_meanings",
    "owner",
    "reference_markdown",
    "sections",
]

_CLUSTER = "the GPU node model"
MEANINGS: dict[str, str] = {
    # the cloud
    "CloudScenario.name": "the cloud's name: its runs, report folder and stored runs are named after it",
    "CloudScenario.seed": "seed of every random choice (same seed, same numbers bit for bit)",
    "CloudScenario.routing": "how every site's fabric routes flows",
    "CloudScenario.reaction": "how fast each strategy notices a failure and repairs (every site)",
    "CloudScenario.federation": "the sites, the WAN, federated networks, gateway faults, traffic",
    "CloudScenario.mobility": "the VMs on the sites and their live migrations",
    "CloudScenario.limits": "bounds checked before a run starts",
    "CloudScenario.telemetry": "what the operations data samples (`evaluate --db`, `diagnose`)",
    "Telemetry.sample": "every flow's rate is sampled this often (stored when it changes)",
    "CloudFederation.sites": "the sites (independent clouds), each with its own fabric and jobs",
    "FederationScenario.name": "name of the federation part (a cloud's runs take the cloud's name)",
    "FederationScenario.seed": "seed of the federation part (a cloud uses its own seed)",
    "FederationScenario.encapsulation": "tunnel encapsulation between the gateways",
    "FederationScenario.underlay_mtu": "MTU between gateways; the inner MTU is this less the headers",
    "FederationScenario.mss_clamping": "clamp TCP's MSS to the inner MTU (no fragmentation)",
    "FederationScenario.global_pool": "address pool of `global-nat` networks",
    "FederationScenario.reconcile_period": "how often each site's agent reconciles with the controller",
    "FederationScenario.sites": "the sites",
    "FederationScenario.wan": "WAN links between sites' gateways (default: one between every pair)",
    "FederationScenario.networks": "federated networks: a tenant's networks at several sites joined",
    "FederationScenario.gateway_faults": "active gateways that fail (the standby takes over)",
    "FederationScenario.wan_faults": "WAN links cut, degraded or flapping",
    "CloudFederation.wan_faults": "WAN links cut, degraded or flapping",
    "FederationScenario.traffic": "traffic inside federated networks, between the sites' endpoints",
    "FederationScenario.limits": "refused in a cloud: a cloud's limits are the top-level `limits`",
    # a site
    "Site.name": "the site's name (lower case, up to 15 characters): hosts and logs are named after it",
    "Site.flavour": "its cloud manager and network virtualization (its adapter)",
    "Site.fabric": "the site's fabric",
    "Site.hosts": "what every host of the site brings",
    "Site.tenants": "the site's tenants, each with its hosts, VNI and subnet",
    "Site.gateway": "the site's HA gateway pair",
    "CloudSite.cluster": "the GPU nodes on the site's hosts (one VM per host)",
    "CloudSite.nic": "every host's NIC (basic or a smartNIC profile)",
    "CloudSite.workload": "the site's job (perftest, collective, training, hpl, flows)",
    "CloudSite.workloads": "several named jobs instead of one `workload`",
    "CloudSite.faults": "faults of the site's fabric (host numbers local to the site)",
    "SiteTenant.address": "first endpoint's address / prefix length; host i gets the address i above",
    "Tenant.name": "tenant name",
    "Tenant.vni": "VXLAN network identifier of the tenant's overlay",
    "Tenant.hosts": "the tenant's hosts (ranges like `0-5,8`)",
    "GatewaySpec.capacity": "what one gateway forwards",
    "GatewaySpec.crypto": "throughput of one gateway's encryption engine (none: no limit)",
    "GatewaySpec.crypto_latency": "latency added per packet by encryption",
    "GatewaySpec.border_leaf": "the leaf the gateway pair hangs off",
    "GatewaySpec.detection": "time to detect the active gateway's failure",
    "GatewaySpec.election": "time for the standby to take over",
    "GatewaySpec.route_propagation": "time for the remote sites to learn the new next hop",
    "WanLink.between": "the two sites it joins",
    "WanLink.bandwidth": "its bandwidth each way",
    "WanLink.latency": "its one-way latency",
    "FederatedNetworkSpec.name": "the federated network's name",
    "FederatedNetworkSpec.tenant": "the tenant whose networks it joins",
    "FederatedNetworkSpec.mode": "address mode: one subnet stretched (l2), routed subnets, or global NAT",
    "FederatedNetworkSpec.sites": "the sites it joins",
    "FederatedNetworkSpec.vni": "federation-wide tunnel identifier (default: assigned)",
    "GatewayFault.site": "the site whose active gateway fails",
    "GatewayFault.at": "when it fails",
    "GatewayFault.until": "when it is repaired (it stays the standby; default: never)",
    "GatewayFault.flap": "fail and repair repeatedly: period, count, down (one failover each)",
    "WanFault.between": "the two sites of the WAN link",
    "WanFault.at": "when it is cut or degraded",
    "WanFault.until": "when it is back (a cut needs until or flap)",
    "WanFault.capacity": "degraded instead of cut: a fraction (0.3, 30%) or a rate",
    "WanFault.flap": "cut repeatedly: period, count, down",
    "FederatedTraffic.network": "the federated network it runs in",
    "FederatedTraffic.pattern": "every ordered pair of endpoints, or each to the next in site order",
    "FederatedTraffic.size": "bytes each flow sends",
    "FederatedTraffic.start": "when the flows start",
    # fabric and hosts
    "LeafSpineFabric.kind": "two-level Clos",
    "LeafSpineFabric.leaves": "leaf switches",
    "LeafSpineFabric.spines": "spine switches",
    "LeafSpineFabric.hosts_per_leaf": "hosts under each leaf",
    "LeafSpineFabric.host_link": "host-to-leaf link rate",
    "LeafSpineFabric.uplink": "leaf-to-spine link rate",
    "LeafSpineFabric.uplinks_per_spine": "parallel links between a leaf and each spine",
    "LeafSpineFabric.latency": "latency of every link",
    "RailOptimizedFabric.kind": "leaf-spine where NIC i of a group's hosts sits on rail leaf i",
    "FatTreeFabric.kind": "three-tier k-ary fat-tree",
    "FatTreeFabric.k": "switch radix: k pods, (k/2)^2 cores, k^3/4 hosts",
    "FatTreeFabric.host_link": "host-to-edge link rate",
    "FatTreeFabric.link": "rate of the links between switches",
    "FatTreeFabric.latency": "latency of every link",
    "Hosts.nics": "NICs per host",
    "Hosts.nic_rate": "each NIC's rate (default: the host link's)",
    "Hosts.udp_sport": "RoCE UDP source port per queue pair, or one fixed port (no entropy)",
    "Hosts.gpus": "GPUs per host",
    "Hosts.nvlink": "NVLink rate between a host's GPUs",
    "Routing.strategy": "ecmp, ecmp-qp, adaptive, spray, pinning, dmodk, or package.module:Class",
    "Routing.hash": "ECMP hash function",
    "Routing.per_switch_seed": "each switch hashes with its own seed (no polarisation)",
    "Reaction.local_detect": "a switch drops its own dead port from the group after this",
    "Reaction.bfd_detect": "BFD detection time (data-plane strategies, remote failures)",
    "Reaction.bgp_convergence": "BGP convergence after BFD",
    "Reaction.controller_detect": "pinning's controller notices a failure after this",
    "Reaction.controller_compute": "pinning's controller recomputes paths in this",
    "Reaction.rule_install": "time to install one changed rule",
    "Reaction.pinning_repair": "pinning moves only the flows a failure broke, or all",
    "Reaction.pinning_install": "pinning installs per-flow switch rules, or steers by UDP source port",
    # cluster and workloads
    "Cluster.node": f"{_CLUSTER}: GPUs, memory, NICs, measured kernel efficiencies",
    "Cluster.virtualization": "KVM VMs with GPU passthrough and SR-IOV, or bare metal",
    "Cluster.overheads": "virtualization overheads (default: the node's documented ones)",
    "Overheads.compute": "fraction of GPU throughput lost in the VM",
    "Overheads.nic_bandwidth": "fraction of NIC bandwidth lost through the SR-IOV virtual function",
    "Overheads.nic_latency": "latency added per message",
    "PerftestWorkload.kind": "ib_write_bw-style RoCE test traffic (`cloudtwin run`)",
    "PerftestWorkload.pattern": "who sends to whom within each tenant",
    "PerftestWorkload.size": "bytes per connection",
    "PerftestWorkload.qps": "queue pairs per connection",
    "PerftestWorkload.shift": "`shift` pattern: host i sends to host i + shift",
    "PerftestWorkload.incast_senders": "`incast` pattern: senders per receiver",
    "PerftestWorkload.start": "when the traffic starts",
    "CollectiveWorkload.kind": "an NCCL collective (`cloudtwin nccl-tests`)",
    "CollectiveWorkload.op": "the collective",
    "CollectiveWorkload.algorithm": "ring, double binary tree, or NCCL's choice",
    "CollectiveWorkload.size": "bytes per rank (nccl-tests' size)",
    "CollectiveWorkload.ranks": "global GPU indices in rank order (default: every GPU of each tenant)",
    "CollectiveWorkload.channels": "NCCL channels (each its own queue pair)",
    "CollectiveWorkload.qps_per_connection": "queue pairs per connection",
    "CollectiveWorkload.host_order": "hosts in topology order, or seeded random (as a scheduler places VMs)",
    "CollectiveWorkload.root": "root rank of broadcast",
    "CollectiveWorkload.net_hop_latency": "latency of a step across the network",
    "CollectiveWorkload.nvlink_hop_latency": "latency of a step over NVLink",
    "CollectiveWorkload.chunk": "pipelining chunk",
    "CollectiveWorkload.rounds": "pipelined rounds simulated per step sequence (default: as many as fit)",
    "CollectiveJob.start": "when the job starts",
    "_JobFields.name": "the job's name (default: its kind and index)",
    "_JobFields.tenants": "the tenants it runs in (default: all)",
    "TrainingWorkload.kind": "an LLM training iteration (`cloudtwin train`)",
    "TrainingWorkload.layers": "transformer layers",
    "TrainingWorkload.hidden": "hidden size",
    "TrainingWorkload.heads": "attention heads",
    "TrainingWorkload.kv_heads": "key/value heads (grouped-query attention; default: heads)",
    "TrainingWorkload.ffn_hidden": "FFN width (default: 4 x hidden, or 8/3 x hidden for SwiGLU)",
    "TrainingWorkload.activation": "FFN activation",
    "TrainingWorkload.norm": "normalisation layer",
    "TrainingWorkload.position": "learned position embeddings or RoPE",
    "TrainingWorkload.tied_embeddings": "input and output embeddings shared",
    "TrainingWorkload.attention": "standard, or fused flash attention (no s^2 scores kept)",
    "TrainingWorkload.kernels": "fused (one kernel per norm, activation, RoPE) or eager (one per operator)",
    "TrainingWorkload.sequence": "sequence length in tokens",
    "TrainingWorkload.vocabulary": "vocabulary size",
    "TrainingWorkload.global_batch": "sequences per iteration",
    "TrainingWorkload.micro_batch": "sequences per micro-batch",
    "TrainingWorkload.precision": "training precision",
    "TrainingWorkload.tensor": "tensor-parallel degree",
    "TrainingWorkload.pipeline": "pipeline-parallel degree (1F1B)",
    "TrainingWorkload.virtual_stages": "model chunks per GPU (interleaved 1F1B when above 1)",
    "TrainingWorkload.stage_layers": "layers of each pipeline stage (uneven stages)",
    "TrainingWorkload.context": "context-parallel degree (the sequence split over GPUs)",
    "TrainingWorkload.sequence_parallel": "Megatron's sequence parallelism inside the tensor group",
    "TrainingWorkload.gpus": "GPUs used (default: every GPU of the cluster)",
    "TrainingWorkload.layout": "rank order of the parallel dimensions",
    "TrainingWorkload.data_parallel": "ddp, zero1, zero2, fsdp or hsdp (default: ddp)",
    "TrainingWorkload.sharding_group": "hsdp: GPUs a model is sharded over",
    "TrainingWorkload.sharded_optimizer": "same as data_parallel: zero1",
    "TrainingWorkload.recompute": "activation recompute: none, full or selective",
    "TrainingWorkload.recompute_layers": "with recompute full: layers per stage that recompute (default all)",
    "TrainingWorkload.overlap_grad_reduce": "overlap the gradient reduction with the backward pass",
    "TrainingWorkload.grad_reduce_dtype": "precision of the reduced gradients",
    "TrainingWorkload.channels": "NCCL channels per GPU of a ring (each its own queue pair)",
    "HplWorkload.kind": "High-Performance Linpack (`cloudtwin hpl`)",
    "HplWorkload.n": "matrix order N",
    "HplWorkload.nb": "block size NB",
    "HplWorkload.p": "process grid rows P",
    "HplWorkload.q": "process grid columns Q",
    "HplWorkload.channels": "NCCL channels per GPU of a ring (each its own queue pair)",
    "FlowsWorkload.kind": "flows listed one by one",
    "FlowsWorkload.rows": "inline flows",
    "FlowsWorkload.file": "CSV or Parquet file of flows, relative to the scenario file",
    "FlowsWorkload.qps": "queue pairs per flow unless a row says",
    "FlowRow.source": "sending host (number or name)",
    "FlowRow.destination": "receiving host (number or name)",
    "FlowRow.bytes": "bytes it sends (a number or a size like 1GiB)",
    "FlowRow.start": "when it starts (a number of seconds or a time like 5ms)",
    "FlowRow.tenant": "the tenant it belongs to",
    "FlowRow.qps": "its queue pairs",
    "FlowRow.path": "a fixed path (switch names), bypassing the strategy",
    # faults
    "Fault.kind": "what fails: a link (cable), switch, NIC, or random targets",
    "Fault.target": "the link, switch or NIC (names as the topology gives them)",
    "Fault.at": "when it fails",
    "Fault.until": "when it comes back (none: never)",
    "Fault.capacity": "a degradation instead: the fraction or rate the link keeps",
    "Fault.flap": "repeat the failure",
    "Fault.count": "`random`: how many targets fail",
    "Fault.of": "`random`: the kind of target drawn",
    "Flap.period": "time between failures",
    "Flap.count": "how many times it goes down",
    "Flap.down": "how long each time (default: half the period)",
    # NICs
    "Nic.profile": "basic (no datapath cost) or a smartNIC profile (e.g. janus-100g)",
    "Nic.functions": "the chain of functions and the tier each runs on (default: the profile's)",
    "Nic.packet_size": "packet size of the traffic",
    "Nic.packet_mix": "a mix of packet sizes and their shares instead",
    "Nic.new_flows_per_s": "new flows per second per host (slow-path load)",
    "Nic.groups": "hosts whose NIC differs from the default",
    "Nic.boot_faults": "NIC boot stages altered after signing (measured boot fails, host quarantined)",
    "Nic.storm": "a connection storm",
    "Nic.pipeline_swaps": "new pipeline programs loaded into NICs",
    "NicFunction.name": "the function (overlay, security-groups, rate-limiter, ...)",
    "NicFunction.tier": "where it runs: pipeline, NIC cores or host (default: the profile's choice)",
    "NicGroup.hosts": "the hosts",
    "NicGroup.profile": "their NIC profile",
    "NicGroup.functions": "their chain",
    "BootFault.hosts": "the hosts whose NIC fails",
    "BootFault.stage": "the boot stage altered",
    "BootFault.kind": "altered after signing, or never signed",
    "Storm.new_flows_per_s": "new flows per second per host above the usual rate",
    "Storm.duration": "how long it lasts",
    "Storm.start": "when it starts",
    "Storm.flow_lifetime": "how long each new flow lives",
    "PipelineSwap.hosts": "the hosts",
    "PipelineSwap.at": "when the new program is loaded",
    # mobility
    "CloudMobility.vms": "the VMs that live on the sites",
    "CloudMobility.migrations": "live migrations of VMs between sites",
    "CloudMobility.admission": "per destination site: what it admits",
    "CloudMobility.allow_renumbering": "let a VM on an `l3-routed` network get a new address when it moves",
    "CloudVm.network": "the federated network it is attached to (its identity travels with it)",
    "VmSpec.name": "the VM's name",
    "VmSpec.cloud": "the site it runs at",
    "VmSpec.host": "its host at that site (a host of the network's tenant)",
    "VmSpec.memory": "its memory",
    "VmSpec.vcpus": "its virtual CPUs",
    "VmSpec.working_set": "memory it writes (the pages it dirties)",
    "VmSpec.dirty_rate": "how fast it dirties its working set",
    "VmSpec.resident": "memory holding data (default: all; the rest are zero pages)",
    "VmSpec.cold_set": "a second, colder writable set",
    "VmSpec.cold_rate": "how fast it dirties the cold set",
    "VmSpec.trace": "a repeating dirty-rate trace instead of one rate",
    "VmSpec.trace_interval": "length of each trace step",
    "VmSpec.working_set_at": "where the working set sits in the migration's scan (an assumption)",
    "VmSpec.write_order": "the order it writes its working set in",
    "VmSpec.disk": "local disk to copy (storage: block or remote-then-local)",
    "VmSpec.disk_dirty_rate": "how fast it writes its disk",
    "VmSpec.labels": "labels a destination's admission checks",
    "VmSpec.mac": "its MAC address (kept across the move)",
    "VmSpec.ip": "its IP address (default: from its network)",
    "VmSpec.clients": "hosts that send it data during the move (refused across sites)",
    "VmSpec.client_bytes": "bytes each client sends",
    "MigrationJob.vm": "the VM that moves",
    "MigrationJob.to": "the destination site",
    "MigrationJob.start": "when the migration starts",
    "MigrationJob.abort_at": "the destination withdraws consent then",
    "MigrationOptionsSpec.downtime_limit": "longest pause allowed (QEMU's downtime-limit)",
    "MigrationOptionsSpec.max_bandwidth": "cap of the live rounds (QEMU's max-bandwidth; default: none)",
    "MigrationOptionsSpec.final_bandwidth": "rate of first-time pages in the pause (default: the path's)",
    "MigrationOptionsSpec.resent_bandwidth": "rate of re-sent pages in the pause (default: final_bandwidth)",
    "MigrationOptionsSpec.socket_buffer": "bytes the path's socket buffers take at once in the pause",
    "MigrationOptionsSpec.resume": "fixed part of a pause (stop, sync, device state, resume; default 10 ms)",
    "MigrationOptionsSpec.setup_time": "set-up before the first page (dirty log on, first sync; default 0)",
    "MigrationOptionsSpec.sync_time": "time one dirty-log sync of a live round holds the sender (default 0)",
    "MigrationOptionsSpec.overlay_update": "time to re-point the VM's address in the overlay",
    "MigrationOptionsSpec.device_state": "device state sent in the pause",
    "MigrationOptionsSpec.stall_rounds": "rounds in a row without shrinking before it gives up",
    "MigrationOptionsSpec.max_downtime": "`raise-downtime`: the highest limit (default 2 s)",
    "MigrationOptionsSpec.downtime_step": "`raise-downtime`: the step (default: the limit)",
    "MigrationOptionsSpec.throttle_initial": "auto-converge: first vCPU throttle",
    "MigrationOptionsSpec.throttle_increment": "auto-converge: throttle added per step",
    "MigrationOptionsSpec.throttle_max": "auto-converge: highest throttle",
    "MigrationOptionsSpec.throttle_trigger": "auto-converge: dirtied share of what was sent that throttles",
    "MigrationOptionsSpec.xbzrle_cache": "XBZRLE cache size",
    "MigrationOptionsSpec.xbzrle_ratio": "share of a page a cached page costs",
    "MigrationOptionsSpec.stream_bandwidth": "what one protected stream can encrypt",
    "MigrationOptionsSpec.sync_period": "QEMU's rate-limit period between checks of the pending set",
    "MigrationOptionsSpec.auto_converge": "throttle the vCPUs when the migration does not converge",
    "MigrationOptionsSpec.postcopy": "switch to post-copy after the first round",
    "MigrationOptionsSpec.xbzrle": "send changed pages as XBZRLE deltas",
    "MigrationOptionsSpec.multifd_channels": "parallel streams",
    "MigrationOptionsSpec.policy": "what happens when it does not converge",
    "MigrationOptionsSpec.storage": "shared storage, block copy, or remote then local",
    "MigrationOptionsSpec.max_rounds": "rounds before it gives up",
    "MigrationOptionsSpec.timeout": "time before it gives up",
    "MigrationOptionsSpec.protected": "the stream is encrypted (its CPU cost and throughput modelled)",
    "MigrationOptionsSpec.syncs": "read the dirty log as QEMU does, or once per whole round (textbook)",
    "Admission.max_vms": "most VMs it admits",
    "Admission.max_memory": "most memory of the VMs it admits, in all",
    "Admission.host_memory": "memory of each of its hosts",
    "Admission.allowed_labels": "labels a VM must carry one of (default: any)",
    "Calibrated.calibration": "a migration profile (`cloudtwin calibrate`), relative to the scenario",
    # limits
    "Limits.memory": "most memory the run's arrays may take (estimated before it starts)",
    "Limits.flows": "most flows one simulation holds",
    "Limits.migrations": "most live migrations",
    "Limits.sites": "most sites",
}

_UNITS = {
    "parse_rate": ("bit/s", "100Gbps, 50MiB/s"),
    "_rate": ("bit/s", "100Gbps, 50MiB/s"),
    "_rate_or_zero": ("bit/s", "0, 50MiB/s"),
    "parse_time": ("s", "5ms, 1.5s"),
    "_positive_time": ("s", "300ms"),
    "parse_size": ("bytes", "1GiB"),
    "_size": ("bytes", "8GiB"),
    "_size_or_zero": ("bytes", "0, 1GiB"),
}


@dataclass(frozen=True)
class ReferenceRow:
    """One key of a section: its name, type, default, unit and meaning."""

    key: str
    type: str
    default: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class Section:
    """One model: where its keys sit in the file, what it is, and its keys."""

    name: str
    paths: tuple[str, ...]
    doc: str
    rows: tuple[ReferenceRow, ...]


def owner(model: type[BaseModel], name: str) -> str:
    """The class that declares the field `name` of `model` (the key of its meaning)."""
    for cls in model.__mro__:
        if name in getattr(cls, "__annotations__", {}):
            return cls.__name__
    return model.__name__


def _models(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models(arg)]


def _is_list(tp: Any) -> bool:
    """Whether a field holds a list (of models), alone or as an alternative to none."""
    if typing.get_origin(tp) in (tuple, list):
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(tp))
    return False


def _validators(tp: Any) -> Iterator[str]:
    for meta in getattr(tp, "__metadata__", ()):
        func = getattr(meta, "func", None)
        if func is not None:
            yield func.__name__
    for arg in typing.get_args(tp):
        yield from _validators(arg)


def _unit(field: FieldInfo) -> tuple[str, str]:
    names = [getattr(m, "func", None) for m in field.metadata]
    found = [n.__name__ for n in names if n is not None] + list(_validators(field.annotation))
    for name in found:
        if name in _UNITS:
            return _UNITS[name]
    return ("", "")


def field_type(tp: Any) -> str:
    """A field's type in words: `text`, `one of `a`, `b``, `list of [Model](#model)`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return field_type(args[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        text = " or ".join(field_type(a) for a in kinds)
        return text + (" or none" if len(kinds) < len(args) else "")
    if origin in (tuple, list):
        inner = [a for a in args if a is not Ellipsis]
        return "list of " + (
            field_type(inner[0]) if len(inner) == 1 else "(" + ", ".join(field_type(a) for a in inner) + ")"
        )
    if origin is dict:
        return f"map of {field_type(args[0])} to {field_type(args[1])}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    return {int: "integer", float: "number", str: "text", bool: "true/false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _number(value: float, unit: str) -> str:
    if unit == "bit/s":
        return f"{value / 1e9:g}Gbps" if value >= 1e9 else f"{value / 1e6:g}Mbps"
    if unit == "s":
        return f"{value * 1e3:g}ms" if 0 < value < 1 else f"{value:g}s"
    if unit == "bytes" and value:
        for size, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= size and value % size == 0:
                return f"{int(value // size)}{name}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default(field: FieldInfo, unit: str) -> str:
    if field.default_factory is not None:
        made = field.default_factory()  # type: ignore[call-arg]
        if isinstance(made, BaseModel):
            return "its section's defaults"
        return "empty" if not made else str(made)
    value = field.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value, unit)
    if isinstance(value, tuple):
        return "empty" if not value else ", ".join(str(v) for v in value)
    return f"`{value}`"


def sections(root: type[BaseModel] = CloudScenario) -> list[Section]:
    """Every model a one-cloud file reaches, in order of first appearance, with its keys."""
    paths: dict[type[BaseModel], list[str]] = {}
    order: list[type[BaseModel]] = []

    def visit(model: type[BaseModel], path: str) -> None:
        if model not in paths:
            paths[model] = []
            order.append(model)
        if path in paths[model] or len(paths[model]) >= 6:
            return
        paths[model].append(path)
        for name, field in model.model_fields.items():
            many = _is_list(field.annotation)
            for sub in _models(field.annotation):
                visit(sub, f"{path}.{name}{'[]' if many else ''}".lstrip("."))

    visit(root, "")
    out = []
    for model in order:
        rows = []
        for name, field in model.model_fields.items():
            unit, example = _unit(field)
            meaning = MEANINGS.get(f"{owner(model, name)}.{name}", "")
            rows.append(
                ReferenceRow(
                    name,
                    field_type(field.annotation),
                    _default(field, unit),
                    f"{unit} (e.g. {example})" if unit else "-",
                    meaning,
                )
            )
        doc = " ".join((model.__doc__ or "").split())
        out.append(Section(model.__name__, tuple(p or "(top level)" for p in paths[model]), doc, tuple(rows)))
    return out


def missing_meanings(root: type[BaseModel] = CloudScenario) -> list[str]:
    """Keys that have no meaning written (a test keeps this empty)."""
    return [f"{s.name}.{r.key}" for s in sections(root) for r in s.rows if not r.meaning]


def reference_markdown() -> str:
    """The reference page (`docs/cloud-reference.md`)."""
    lines = [
        "# One-cloud scenario reference",
        "",
        "Every key of a one-cloud scenario file (`federation:` with sites that carry their own jobs,",
        "`mobility:` with VMs that move between them), generated from the models that validate it",
        "(`cloudtwin.scenario.reference`; a test checks that this page is current). Rates are",
        "written with a unit (`100Gbps`, `50MiB/s`) and read as bit/s, times as `5ms` or `1.5s`,",
        "sizes as `1GiB`. A mistyped key is refused with the nearest valid one. Run the example:",
        "",
        "```console",
        "$ cloudtwin evaluate examples/one-cloud.yaml --strategies ecmp --no-store",
        "```",
        "",
        "How the parts compose and what a run reports: [one-cloud.md](one-cloud.md).",
        "",
    ]
    for section in sections():
        lines += [f"## {section.name}", ""]
        lines += ["Keys at: " + ", ".join(f"`{p}`" for p in section.paths) + ".", ""]
        if section.doc:
            lines += [section.doc, ""]
        lines += ["| key | type | default | unit | meaning |", "|---|---|---|---|---|"]
        for row in section.rows:
            cells = [f"`{row.key}`", row.type, row.default, row.unit, row.meaning]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
