"""Pydantic models of the GPU cluster (`cluster:`) and of the training and HPL workloads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Cluster", "HplWorkload", "Overheads", "TrainingWorkload"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Overheads(_Model):
    """Virtualization overheads; a missing value takes the profile's documented default.

    `compute`: fraction of GPU throughput lost in the VM; `nic_bandwidth`: fraction of
    NIC bandwidth lost through the SR-IOV virtual function; `nic_latency`: latency added
    per message (seconds)."""

    compute: float | None = Field(None, ge=0, lt=1)
    nic_bandwidth: float | None = Field(None, ge=0, lt=1)
    nic_latency: float | None = Field(None, ge=0, lt=1e-3)


class Cluster(_Model):
    """GPU nodes on the fabric's hosts: one node (one VM) per host."""

    node: Literal[
        "a100-80g-8", "vela-2nic", "hgx-8nic", "dgx-a100",
        "a100-40g-8", "a100-40g-4",  # nodes of the Top500 systems HPL is checked against
        "h100-80g-8", "h200-141g-8",
    ] = "a100-80g-8"
    virtualization: Literal["vm", "bare-metal"] = "vm"
    overheads: Overheads = Field(default_factory=Overheads)


class TrainingWorkload(_Model):
    """A decoder-only transformer (GPT or Llama-style layers) and how it is trained.

    Model: `layers`, `hidden`, `heads`, `kv_heads` (grouped-query attention; default
    `heads`), `ffn_hidden` (default 4 x hidden for GeLU, 8/3 x hidden rounded up to 256
    for SwiGLU), `activation`, `norm`, `position` (learned embeddings count s x h
    parameters, RoPE none), `tied_embeddings`, `attention` (`flash`: fused attention that
    keeps no s^2 scores and skips the masked half of causal attention), `kernels` (`fused`:
    norms, activations and RoPE as single kernels, as Megatron, torch.compile or Triton
    run them; `eager`: one PyTorch kernel per operator), `sequence`,
    `vocabulary`. Parallelism: `tensor` (t), `pipeline` (p, 1F1B; `virtual_stages` v for
    the interleaved schedule; `stage_layers` for uneven stages), `context` (c, context
    parallelism: the sequence split over c GPUs), `sequence_parallel` (Megatron's
    sequence parallelism inside the tensor group), data parallelism by `data_parallel`:
    `ddp` (all-reduce of the gradients), `zero1`/`zero2` (optimizer state / and gradients
    sharded), `fsdp` (ZeRO-3: weights too, all-gathered per layer), `hsdp` (FSDP inside
    `sharding_group` GPUs, replicated across groups). `sharded_optimizer: true` is
    `zero1`. `recompute`: none, full (every layer's forward again) or selective (the
    attention core only, Korthikanti et al. 2022); `recompute_layers` N with full: only N
    layers of each pipeline stage recompute, the others keep their activations
    (Megatron's `--recompute-num-layers`, FSDP checkpointing every k-th block).
    """

    kind: Literal["training"] = "training"
    layers: int = Field(64, ge=1)
    hidden: int = Field(8192, ge=1)
    heads: int = Field(64, ge=1)
    kv_heads: int | None = Field(None, ge=1)
    ffn_hidden: int | None = Field(None, ge=1)
    activation: Literal["gelu", "swiglu"] = "gelu"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    position: Literal["learned", "rope"] = "learned"
    tied_embeddings: bool = True
    attention: Literal["standard", "flash"] = "standard"
    kernels: Literal["fused", "eager"] = "fused"
    sequence: int = Field(2048, ge=1)
    vocabulary: int = Field(50304, ge=1)
    global_batch: int = Field(1536, ge=1)
    micro_batch: int = Field(1, ge=1)
    precision: Literal["bf16", "fp16"] = "bf16"
    tensor: int = Field(8, ge=1)
    pipeline: int = Field(4, ge=1)
    virtual_stages: int = Field(1, ge=1, le=64)  # model chunks per GPU: interleaved 1F1B when > 1
    stage_layers: tuple[int, ...] | None = None  # layers of each pipeline stage (uneven stages)
    context: int = Field(1, ge=1, le=1024)
    sequence_parallel: bool = False
    gpus: int | None = Field(None, ge=1)
    layout: Literal["tp-dp-pp", "tp-pp-dp"] = "tp-dp-pp"
    data_parallel: Literal["ddp", "zero1", "zero2", "fsdp", "hsdp"] | None = None
    sharding_group: int | None = Field(None, ge=1)
    sharded_optimizer: bool = False
    recompute: Literal["none", "full", "selective"] = "none"
    recompute_layers: int | None = Field(None, ge=1)
    overlap_grad_reduce: bool = True
    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    channels: int = Field(2, ge=1, le=64)  # NCCL channels per GPU of a ring (each its own QP)

    @property
    def sharding(self) -> Literal["ddp", "zero1", "zero2", "fsdp", "hsdp"]:
        """How data parallelism shares the model state (`sharded_optimizer` is ZeRO-1)."""
        if self.data_parallel is not None:
            return self.data_parallel
        return "zero1" if self.sharded_optimizer else "ddp"

    @property
    def kv(self) -> int:
        """Key/value heads (grouped-query attention when fewer than `heads`)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def ffn(self) -> int:
        """Width of the MLP's hidden layer."""
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        if self.activation == "swiglu":  # LLaMA's 2/3 of 4h, rounded up to a multiple of 256
            return -(-(8 * self.hidden // 3) // 256) * 256
        return 4 * self.hidden

    def recomputed(self, layers: int) -> int:
        """How many of a stage's `layers` run their forward again in the backward pass
        (selective recomputation counts every layer: each recomputes its attention core)."""
        if self.recompute == "none":
            return 0
        if self.recompute == "full" and self.recompute_layers is not None:
            return min(self.recompute_layers, layers)
        return layers

    def stages(self) -> tuple[int, ...]:
        """Layers of each pipeline stage."""
        if self.stage_layers is not None:
            return self.stage_layers
        return (self.layers // self.pipeline,) * self.pipeline

    @model_validator(mode="after")
    def _shape(self) -> TrainingWorkload:
        if self.hidden % self.heads:
            raise ValueError(f"workload.heads: {self.heads} does not divide hidden {self.hidden}")
        if self.heads % self.tensor:
            raise ValueError(
                f"workload.tensor: {self.tensor} does not divide the {self.heads} heads"
            )
        if self.heads % self.kv:
            raise ValueError(f"workload.kv_heads: {self.kv} does not divide the {self.heads} heads")
        if self.kv_heads is not None and self.kv % self.tensor and self.tensor % self.kv:
            raise ValueError(
                f"workload.kv_heads: {self.kv} key/value heads cannot be split over tensor {self.tensor}"
            )
        self._check_stages()
        if self.virtual_stages > 1 and self.pipeline == 1:
            raise ValueError("workload.virtual_stages: an interleaved schedule needs pipeline > 1")
        if self.sequence % (self.context * (2 if self.context > 1 else 1)):
            raise ValueError(
                f"workload.context: the sequence {self.sequence} does not split into "
                f"2 x {self.context} chunks (context parallelism balances causal attention so)"
            )
        if self.sharded_optimizer and self.data_parallel not in (None, "zero1", "zero2"):
            raise ValueError(
                f"workload.sharded_optimizer: true contradicts data_parallel {self.data_parallel}"
            )
        if self.sharding_group is not None and self.sharding != "hsdp":
            raise ValueError("workload.sharding_group: only data_parallel hsdp has shard groups")
        if self.recompute_layers is not None:
            if self.recompute != "full":
                raise ValueError("workload.recompute_layers: only recompute full recomputes whole layers")
            if self.recompute_layers > max(self.stages()):
                raise ValueError(
                    f"workload.recompute_layers: {self.recompute_layers} is more than the "
                    f"{max(self.stages())} layers of a pipeline stage"
                )
        if self.sequence_parallel and self.tensor == 1:
            raise ValueError(
                "workload.sequence_parallel: needs tensor > 1 (it splits the tensor group's work)"
            )
        return self

    def _check_stages(self) -> None:
        if self.stage_layers is not None:
            if len(self.stage_layers) != self.pipeline:
                raise ValueError(
                    f"workload.stage_layers: {len(self.stage_layers)} stages for pipeline {self.pipeline}"
                )
            if sum(self.stage_layers) != self.layers or min(self.stage_layers) < 1:
                raise ValueError(
                    f"workload.stage_layers: {list(self.stage_layers)} must be at least 1 each "
                    f"and add up to the {self.layers} layers"
                )
            if self.virtual_stages > 1:
                raise ValueError(
                    "workload.stage_layers: uneven stages with virtual_stages > 1 are not modelled"
                )
            return
        if self.layers % self.pipeline:
            raise ValueError(
                f"workload.pipeline: {self.pipeline} does not divide the {self.layers} layers"
            )
        if self.layers % (self.pipeline * self.virtual_stages):
            raise ValueError(
                f"workload.virtual_stages: pipeline {self.pipeline} x virtual_stages "
                f"{self.virtual_stages} does not divide the {self.layers} layers"
            )


class HplWorkload(_Model):
    """High-Performance Linpack: an N x N LU factorisation in NB blocks on a P x Q GPU grid."""

    kind: Literal["hpl"] = "hpl"
    n: int = Field(1_000_000, ge=1)
    nb: int = Field(384, ge=1)
    p: int = Field(2, ge=1)
    q: int = Field(4, ge=1)
    channels: int = Field(2, ge=1, le=64)  # NCCL channels per GPU of a ring (each its own QP)
