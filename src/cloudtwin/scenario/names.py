"""Names a scenario's keys take, as plain types apart from the pydantic models: a
command's help lists them without importing the models."""

from __future__ import annotations

from typing import Literal

__all__ = ["CollectiveOp"]

#: The collectives a `collective` workload (and `cloudtwin nccl-tests --op`) runs.
CollectiveOp = Literal["allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv"]
