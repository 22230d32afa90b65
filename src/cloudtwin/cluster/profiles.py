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
    `gemm_k_overhead` is what each wave of GEMM tiles costs beyond its reduction loop
    (filling the tile pipeline, writing the output tile), in steps of that loop: a GEMM of
    reduction depth k runs at k / (k + gemm_k_overhead) of its tiles' rate.
    `clock_sustained` is the fraction of those short-run tensor-core rates (GEMMs and
    FlashAttention) the GPU keeps through a training step's sustained draw at its power
    limit; 1 where the training fit absorbs it (the A100: `workloads.training.FRAMEWORK`).
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
    sms: int = 108
    flash_attention_efficiency: float = 0.60
    # Fitted on XLA's measured H100 cuBLAS table (benchmarks/gemm_k_overhead.py). The A100's
    # is taken as the same number of loop steps: an ASSUMPTION (no such table for sm_80 here).
    gemm_k_overhead: float = 139.0
    clock_sustained: float = 1.0


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
    sms=108,  # A100 streaming multiprocessors (GA100 whitepaper); sets GEMM wave quantization
    # FlashAttention-2 (Dao 2023, abstract): "reaching 50-73% of the theoretical maximum
    # FLOPs/s on A100" in forward and backward; the middle of that range.
    flash_attention_efficiency=0.60,
)

VELA_2NIC = replace(A100_80G_8, name="vela-2nic", gpu_nics=2)
"""Vela's node: two SR-IOV virtual functions for GPUDirect RDMA over RoCE, 100G each (IBM's
job templates for Vela ask for `numRoceGdr: 2` with a `gdr-2vf` NCCL topology; the 2024
infrastructure paper's fabric is built on 100 Gb/s interfaces). docs/reproducing-vela.md."""

HGX_8NIC = replace(A100_80G_8, name="hgx-8nic", gpu_nics=8)
"""The HGX A100 reference design: one NIC per GPU on its PCIe switch (what the Vela
model assumed before its NIC count was sourced; kept as the well-provisioned comparison)."""

DGX_A100 = replace(A100_80G_8, name="dgx-a100", gpu_nics=8)
"""NVIDIA DGX A100 (Selene's node): 8 A100-80GB, one 200G HDR InfiniBand NIC per GPU for
compute traffic (DGX A100 user guide: 8 x single-port ConnectX-6 for the compute fabric)."""

H100_80G_8 = NodeProfile(
    name="h100-80g-8",
    gpus=8,
    gpu_memory_bytes=80e9,  # H100 SXM5 80GB datasheet
    peak_bf16_flops=989.4e12,  # dense BF16 tensor core, H100 SXM datasheet (1,979 with sparsity)
    peak_fp64_flops=66.9e12,  # FP64 tensor core, H100 SXM datasheet
    hbm_bytes_per_s=3.35e12,  # HBM3, H100 SXM datasheet
    # The rate of the tile loop fitted on XLA's measured cuBLAS table for sm_90 (with
    # `gemm_k_overhead`: benchmarks/gemm_k_overhead.py); at m = n = k = 4096 the two give
    # 0.79 of the peak, as measured (783 TFLOP/s).
    gemm_efficiency_max=0.838,
    dgemm_efficiency_max=0.90,  # ASSUMPTION, as the A100's
    hbm_efficiency=0.85,  # ASSUMPTION: as the A100's streaming kernels
    nvlink_bytes_per_s=450e9,  # NVLink4: 18 links x 25 GB/s per direction per GPU (900 GB/s both ways)
    # ASSUMPTION: NCCL all-reduce bus bandwidth on 8 H100 over NVSwitch reaches ~80 % of a
    # direction's NVLink rate, as the A100's 230 of 300 GB/s does.
    nvlink_allreduce_busbw_bytes_per_s=345e9,
    nvlink_latency_s=3.4e-6,  # as NVLink3 (NCCL's tuning model has one NVLink latency)
    pcie_bytes_per_s=64e9,  # PCIe Gen5 x16 per direction
    sockets=2,  # DGX H100: two Xeon 8480C sockets
    host_memory_bytes=2e12,  # DGX H100: 2 TB DRAM
    kernel_launch_s=5e-6,
    gpu_nics=8,  # DGX H100 / HGX H100: 8 x 400G ConnectX-7, one per GPU
    sms=132,  # H100 SXM5 streaming multiprocessors
    # FlashAttention-3 (Shah et al. 2024, abstract): "FlashAttention-2 achieving only 35%
    # utilization on H100 GPUs"; the training stacks measured here run FA2 or PyTorch SDPA.
    flash_attention_efficiency=0.35,
    # FIT on the four H100 runs of IBM and Meta's FSDP blog (benchmarks/training_published.py
    # --fit); llm-foundry's H100 runs are its validation. The H100 SXM draws up to 700 W
    # against the A100's 400 W, and its short-run GEMM and FlashAttention rates above were
    # measured in bursts.
    clock_sustained=0.82,
)
"""NVIDIA DGX/HGX H100: 8 H100 SXM5 80GB on NVLink4 + NVSwitch, 8 x 400G NICs."""

H200_141G_8 = replace(
    H100_80G_8,
    name="h200-141g-8",
    gpu_memory_bytes=141e9,  # H200 SXM datasheet: 141 GB HBM3e
    hbm_bytes_per_s=4.8e12,  # H200 SXM datasheet: 4.8 TB/s
)
"""NVIDIA HGX H200: the H100's compute with 141 GB of HBM3e at 4.8 TB/s, 8 x 400G NICs."""

NODE_PROFILES: dict[str, NodeProfile] = {
    profile.name: profile
    for profile in (A100_80G_8, VELA_2NIC, HGX_8NIC, DGX_A100, H100_80G_8, H200_141G_8)
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
