"""Node profiles (GPUs, NVLink, PCIe, NICs) and virtualization overheads, with their sources.

Every number here is a datasheet value or a public measurement; docs/reproducing-vela.md
lists the sources. Nothing is fitted to the Vela results. One number is a fit, and says
so: `dgemm_efficiency_max`, fitted on one TOP500 system (docs/hpl-validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "BARE_METAL",
    "NODE_PROFILES",
    "TOP500_PROFILES",
    "VM_OVERHEADS",
    "NodeProfile",
    "VirtualizationOverheads",
]


@dataclass(frozen=True)
class NodeProfile:
    """One GPU node: what its GPUs, NVLink fabric and host offer.

    Rates are per GPU unless the name says otherwise. `gemm_efficiency_max` is the best
    fraction of the dense-math peak a large matrix multiply reaches (measured);
    `hbm_efficiency` the fraction of HBM bandwidth a streaming kernel reaches.
    `gpu_nics` is how many NICs carry GPU traffic on this kind of node; None leaves it to
    the scenario (`hosts.nics`), a number makes `hosts.nics` match it.
    """

    name: str
    gpus: int
    gpu_memory_bytes: float
    peak_bf16_flops: float
    peak_fp64_flops: float
    hbm_bytes_per_s: float
    gemm_efficiency_max: float
    dgemm_efficiency_max: float
    hbm_efficiency: float
    nvlink_bytes_per_s: float
    nvlink_allreduce_busbw_bytes_per_s: float
    nvlink_latency_s: float
    pcie_bytes_per_s: float
    sockets: int
    host_memory_bytes: float
    kernel_launch_s: float
    gpu_nics: int | None = None


A100_80G_8 = NodeProfile(
    name="a100-80g-8",
    gpus=8,
    gpu_memory_bytes=80e9,  # A100 SXM4 80GB datasheet
    peak_bf16_flops=312e12,  # dense BF16/FP16 tensor core, A100 datasheet
    peak_fp64_flops=19.5e12,  # FP64 tensor core, A100 datasheet
    hbm_bytes_per_s=2.039e12,  # HBM2e, A100 80GB SXM datasheet
    gemm_efficiency_max=0.869,  # 271 of 312 TFLOPS: measured max achievable BF16 matmul (MAMF)
    dgemm_efficiency_max=0.735,  # fit: Selene, TOP500 June 2020 (docs/hpl-validation.md)
    hbm_efficiency=0.85,  # streaming kernels reach ~1.7 of 2.0 TB/s (public STREAM-like runs)
    nvlink_bytes_per_s=300e9,  # NVLink3: 12 links x 25 GB/s per direction per GPU
    nvlink_allreduce_busbw_bytes_per_s=230e9,  # nccl-tests all_reduce_perf on 8x A100 NVSwitch
    nvlink_latency_s=3.4e-6,  # NCCL tuning model, Simple protocol, NVLink hop
    pcie_bytes_per_s=32e9,  # PCIe Gen4 x16 per direction (raw 31.5 GB/s)
    sockets=2,  # two Cascade Lake sockets (IBM Vela node description)
    host_memory_bytes=1.5e12,  # 1.5 TB DRAM per node (IBM Vela node description)
    kernel_launch_s=5e-6,  # typical CUDA kernel launch + scheduling gap
)

VELA_2NIC = replace(A100_80G_8, name="vela-2nic", gpu_nics=2)
"""Vela's node: two SR-IOV virtual functions for GPUDirect RDMA over RoCE, 100G each (IBM's
job templates for Vela ask for `numRoceGdr: 2` with a `gdr-2vf` NCCL topology; the 2024
infrastructure paper's fabric is built on 100 Gb/s interfaces). docs/reproducing-vela.md."""

HGX_8NIC = replace(A100_80G_8, name="hgx-8nic", gpu_nics=8)
"""The HGX A100 reference design: one NIC per GPU on its PCIe switch (what the Vela
model assumed before its NIC count was sourced; kept as the well-provisioned comparison)."""

NODE_PROFILES: dict[str, NodeProfile] = {
    profile.name: profile for profile in (A100_80G_8, VELA_2NIC, HGX_8NIC)
}

# -- A100 nodes of the Top500 systems the HPL model is checked against ----------------
# (benchmarks/data/hpl_top500.yaml, docs/hpl-validation.md). The GPU is the A100 SXM4 of
# the profile above except where a line says otherwise.

A100_40G_8 = replace(
    A100_80G_8,
    name="a100-40g-8",
    gpu_memory_bytes=40e9,  # DGX A100 as launched: "8 GPUs ... 320 GB" of HBM2 in all
    hbm_bytes_per_s=1.555e12,  # HBM2, A100 40GB SXM4 datasheet
    gpu_nics=8,  # DGX A100: "Eight Mellanox 200Gbps HDR InfiniBand ... Single-Port Adapters"
)
"""NVIDIA DGX A100 (320 GB): Selene as first listed (June 2020)."""

A100_40G_4 = replace(A100_40G_8, name="a100-40g-4", gpus=4, gpu_nics=None)
"""A four-GPU A100 40GB node (HGX A100 4-GPU, NVLink between all four): JUWELS Booster."""

TOP500_PROFILES: tuple[NodeProfile, ...] = (A100_40G_8, A100_40G_4)
NODE_PROFILES.update({profile.name: profile for profile in TOP500_PROFILES})


@dataclass(frozen=True)
class VirtualizationOverheads:
    """What running in a KVM VM (GPU passthrough, SR-IOV VF with GPUDirect RDMA) costs.

    `compute`: fraction of GPU throughput lost (passthrough: the guest drives the GPU
    directly; the loss is IOMMU/EPT and host jitter). `nic_bandwidth`: fraction of NIC
    bandwidth lost through the virtual function. `nic_latency_s`: added per message.
    `host_memory_reserved`: fraction of host DRAM the hypervisor keeps (the GPUs' own
    memory is passed through whole).
    """

    compute: float
    nic_bandwidth: float
    nic_latency_s: float
    host_memory_reserved: float


VM_OVERHEADS = VirtualizationOverheads(
    compute=0.02,  # GPU passthrough within a few % of bare metal (IBM: Vela VMs < 5% overhead)
    nic_bandwidth=0.01,  # SR-IOV VF RDMA bandwidth within ~1-2% of native (published SR-IOV studies)
    nic_latency_s=0.5e-6,  # SR-IOV VF adds sub-microsecond latency per message
    host_memory_reserved=0.05,  # hypervisor and QEMU reserve a few % of host DRAM
)

BARE_METAL = VirtualizationOverheads(
    compute=0.0, nic_bandwidth=0.0, nic_latency_s=0.0, host_memory_reserved=0.0
)
