"""/api/diagnosis: likely root causes ranked from the store's logs and flow telemetry."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from cloudtwin.diagnosis.usecase import DEFAULT_TOP
from cloudtwin.diagnosis.usecase import diagnose as rank
from cloudtwin.service.auth import require_read
from cloudtwin.service.deps import read_store
from cloudtwin.service.fabric import read_fabric
from cloudtwin.service.models import Diagnosis, Suspect
from cloudtwin.store.database import Store

__all__ = ["router"]

router = APIRouter(prefix="/api/diagnosis", tags=["diagnosis"], dependencies=[Depends(require_read)])


@router.get("")
def diagnosis(
    store: Annotated[Store, Depends(read_store)],
    top: Annotated[int, Query(ge=1, le=1000)] = DEFAULT_TOP,
    window_ms: Annotated[float | None, Query(gt=0.001, le=86_400_000)] = None,
    run: Annotated[
        str | None, Query(max_length=500, description="The twin run to rank (default: the latest written)")
    ] = None,
) -> Diagnosis:
    """The `top` suspects of a twin run, best first (`cloudtwin diagnose --json`), and the
    fabric they sit on; 404 for a run the store does not hold."""
    window = timedelta(milliseconds=window_ms) if window_ms else None
    result = rank(store, None, top, window, run=run)
    suspects = [Suspect.model_validate(s.to_json()) for s in result.suspects]
    return Diagnosis(
        run=result.run, runs=list(result.runs), fault_found=result.fault_found, suspects=suspects,
        fabric=read_fabric(store, result.run),
    )
