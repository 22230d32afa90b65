"""Real migrations next to what `migrate plan` predicts for them with a migration profile.

A held-out migration is stored as what a user passes to `migrate plan` (`plan`: the
fields of a flags-only plan request, sizes in bytes, rates in bit/s, times in seconds)
and what QEMU measured (`measured`: converged, total_time_s, downtime_s, bytes). Each is
predicted by `plan_request` with the profile's calibration, the code `migrate plan
--calibration` runs, and graded against the targets: total time and bytes within 15 %,
downtime within max(50 %, 10 ms), convergence classified right.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from cloudtwin.errors import MobilityError
from cloudtwin.mobility.calibration import MigrationCalibration
from cloudtwin.mobility.plan import plan_request
from cloudtwin.scenario.mobility import PlanRequest

__all__ = ["DOWNTIME_ABSOLUTE_S", "DOWNTIME_RELATIVE", "TOTAL_RELATIVE", "grade", "summary"]

TOTAL_RELATIVE = 0.15
"""Total time and bytes: within 15 % of QEMU's."""
DOWNTIME_RELATIVE = 0.5
DOWNTIME_ABSOLUTE_S = 0.010
"""Downtime: within max(50 %, 10 ms) of QEMU's."""


def _request(plan: object, where: str) -> PlanRequest:
    if not isinstance(plan, Mapping):
        raise MobilityError(f"{where}.plan: give the plan request's fields (memory, bandwidth, ...)")
    try:
        return PlanRequest.model_validate(dict(plan))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        key = ".".join(str(p) for p in first["loc"])
        raise MobilityError(f"{where}.plan.{key}: {first['msg']}") from None


def _measured(entry: Mapping[str, object], where: str) -> dict[str, object]:
    measured = entry.get("measured")
    if not isinstance(measured, Mapping) or not isinstance(measured.get("converged"), bool):
        raise MobilityError(f"{where}.measured: give converged, total_time_s, downtime_s and bytes")
    out: dict[str, object] = {"converged": measured["converged"]}
    for key in ("total_time_s", "downtime_s", "bytes"):
        value = measured.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise MobilityError(f"{where}.measured.{key}: must be a non-negative number or null")
        out[key] = value
    return out


def _within(measured: object, predicted: float, relative: float, absolute: float = 0.0) -> bool:
    if measured is None:
        return False
    value = float(measured)  # type: ignore[arg-type]
    return abs(predicted - value) <= max(relative * value, absolute)


def grade(held_out: object, calibration: MigrationCalibration | None, where: str = "held_out"
          ) -> list[dict[str, object]]:
    """Each held-out migration: its plan request, measured and predicted figures, and the
    targets met (None where there is nothing to compare: one side did not converge)."""
    if not isinstance(held_out, list):
        raise MobilityError(f"{where}: give a list of held-out migrations")
    rows = []
    for i, entry in enumerate(held_out):
        if not isinstance(entry, Mapping):
            raise MobilityError(f"{where}.{i}: give plan and measured")
        request = _request(entry.get("plan"), f"{where}.{i}")
        measured = _measured(entry, f"{where}.{i}")
        result = plan_request(request, calibration)
        both = bool(measured["converged"]) and result.converged
        row: dict[str, object] = {
            "plan": dict(entry["plan"]),
            "request": request.model_dump(exclude_defaults=True),
            "measured": measured,
            "predicted": {"converged": result.converged, "total_time_s": result.total_time_s,
                          "downtime_s": result.downtime_s, "bytes": result.bytes, "rounds": result.rounds},
            "classified_right": measured["converged"] == result.converged,
            "total_ok": (_within(measured["total_time_s"], result.total_time_s, TOTAL_RELATIVE)
                         if both else None),
            "bytes_ok": _within(measured["bytes"], result.bytes, TOTAL_RELATIVE) if both else None,
            "downtime_ok": (_within(measured["downtime_s"], result.downtime_s, DOWNTIME_RELATIVE,
                                    DOWNTIME_ABSOLUTE_S) if both else None),
        }
        row["met"] = bool(row["classified_right"]) and (not both or bool(
            row["total_ok"] and row["bytes_ok"] and row["downtime_ok"]))
        rows.append(row)
    return rows


def summary(rows: list[dict[str, object]]) -> dict[str, int]:
    """How many held-out migrations meet each target; `met_every_target`: classified right
    and, where both converged, total time, bytes and downtime all within their bounds."""
    return {
        "migrations": len(rows),
        "classified_right": sum(bool(r["classified_right"]) for r in rows),
        "compared": sum(r["total_ok"] is not None for r in rows),
        "total_time_within_15pct": sum(bool(r["total_ok"]) for r in rows),
        "bytes_within_15pct": sum(bool(r["bytes_ok"]) for r in rows),
        "downtime_within_bound": sum(bool(r["downtime_ok"]) for r in rows),
        "met_every_target": sum(bool(r["met"]) for r in rows),
    }
