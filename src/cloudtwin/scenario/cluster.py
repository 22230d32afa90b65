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
        "a100-80g-8", "vela-2nic", "hgx-8nic",
        "a100-40g-8", "a100-40g-4",  # nodes of the Top500 systems HPL is checked against
    ] = "a100-80g-8"
    virtualization: Literal["vm", "bare-metal"] = "vm"
    overheads: Overheads = Field(default_factory=Overheads)


class TrainingWorkload(_Model):
    """A decoder-only transformer trained with tensor, pipeline (1F1B) and data parallelism."""

    kind: Literal["training"] = "training"
    layers: int = Field(64, ge=1)
    hidden: int = Field(8192, ge=1)
    heads: int = Field(64, ge=1)
    sequence: int = Field(2048, ge=1)
    vocabulary: int = Field(50304, ge=1)
    global_batch: int = Field(1536, ge=1)
    micro_batch: int = Field(1, ge=1)
    precision: Literal["bf16", "fp16"] = "bf16"
    tensor: int = Field(8, ge=1)
    pipeline: int = Field(4, ge=1)
    virtual_stages: int = Field(1, ge=1, le=64)  # model chunks per GPU: interleaved 1F1B when > 1
    gpus: int | None = Field(None, ge=1)
    layout: Literal["tp-dp-pp", "tp-pp-dp"] = "tp-dp-pp"
    sharded_optimizer: bool = False
    recompute: Literal["none", "full"] = "none"
    overlap_grad_reduce: bool = True
    grad_reduce_dtype: Literal["fp32", "bf16"] = "fp32"
    channels: int = Field(2, ge=1, le=64)  # NCCL channels per GPU of a ring (each its own QP)

    @model_validator(mode="after")
    def _shape(self) -> TrainingWorkload:
        if self.hidden % self.heads:
            raise ValueError(f"workload.heads: {self.heads} does not divide hidden {self.hidden}")
        if self.heads % self.tensor:
            raise ValueError(
                f"workload.tensor: {self.tensor} does not divide the {self.heads} heads"
            )
        if self.layers % self.pipeline:
            raise ValueError(
                f"workload.pipeline: {self.pipeline} does not divide the {self.layers} layers"
            )
        if self.virtual_stages > 1 and self.pipeline == 1:
            raise ValueError("workload.virtual_stages: an interleaved schedule needs pipeline > 1")
        if self.layers % (self.pipeline * self.virtual_stages):
            raise ValueError(
                f"workload.virtual_stages: pipeline {self.pipeline} x virtual_stages "
                f"{self.virtual_stages} does not divide the {self.layers} layers"
            )
        return self


class HplWorkload(_Model):
    """High-Performance Linpack: an N x N LU factorisation in NB blocks on a P x Q GPU grid."""

    kind: Literal["hpl"] = "hpl"
    n: int = Field(1_000_000, ge=1)
    nb: int = Field(384, ge=1)
    p: int = Field(2, ge=1)
    q: int = Field(4, ge=1)
    channels: int = Field(2, ge=1, le=64)  # NCCL channels per GPU of a ring (each its own QP)
