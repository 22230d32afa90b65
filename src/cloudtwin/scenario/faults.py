"""Fault specs in a scenario (`faults:`) and the reaction timings of each strategy (`reaction:`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from cloudtwin.scenario.units import parse_number, parse_rate, parse_time

__all__ = [
    "DEFAULT_BFD_DETECT_S",
    "DEFAULT_BGP_CONVERGENCE_S",
    "DEFAULT_CONTROLLER_COMPUTE_S",
    "DEFAULT_CONTROLLER_DETECT_S",
    "DEFAULT_LOCAL_DETECT_S",
    "DEFAULT_RULE_INSTALL_S",
    "Fault",
    "Flap",
    "Reaction",
    "parse_capacity",
]

#: Loss of signal on the port plus hardware ECMP member removal (fast failover).
DEFAULT_LOCAL_DETECT_S = 1e-3
#: BFD with a 50 ms interval and a multiplier of 3.
DEFAULT_BFD_DETECT_S = 150e-3
#: BGP withdrawals reaching every switch and the FIBs reprogrammed.
DEFAULT_BGP_CONVERGENCE_S = 100e-3
#: A port-status event (or telemetry) reaching the pinning controller.
DEFAULT_CONTROLLER_DETECT_S = 50e-3
#: The controller recomputing the paths of the flows it must move.
DEFAULT_CONTROLLER_COMPUTE_S = 10e-3
#: Installing one per-flow rule on a switch, or one source port on a host (about 1,000
#: updates per second).
DEFAULT_RULE_INSTALL_S = 1e-3


def parse_capacity(value: object) -> object:
    """A fraction (`0.5`, `50%`, `100%`) stays a float up to 1; a rate (`40Gbps`) becomes
    bit/s, and must be above 1 bit/s so that it cannot be read as a fraction."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            percent = parse_number(value.strip()[:-1].strip())
        except ValueError as err:
            raise ValueError(f"{value!r} is not a percentage") from err
        if not 0 < percent <= 100:
            raise ValueError(
                f"{value!r}: a degraded link keeps between 0% (excluded) and 100% of its capacity"
            )
        return percent / 100.0
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1:
        return float(value)
    rate = parse_rate(value)  # type: ignore[arg-type]
    if rate <= 1:
        raise ValueError(f"{value!r}: a capacity given as a rate must be above 1bps")
    return rate


Duration = Annotated[float, BeforeValidator(parse_time), Field(ge=0)]
Positive = Annotated[float, BeforeValidator(parse_time), Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Flap(_Model):
    """The target goes down `count` times, every `period`, for `down` each time (default half)."""

    period: Positive
    count: int = Field(ge=1, le=10_000)
    down: Duration | None = None

    @model_validator(mode="after")
    def _fits(self) -> Flap:
        if self.down is not None and not 0 < self.down < self.period:
            raise ValueError(f"flap.down: must be above 0 and below the period ({self.period} s)")
        return self

    @property
    def down_s(self) -> float:
        """How long each flap keeps the target down."""
        return self.down if self.down is not None else self.period / 2


class Fault(_Model):
    """One fault: a link (cable), switch or NIC goes down (or degrades) at `at`, back at `until`.

    `kind: random` draws `count` distinct targets of kind `of` from the scenario seed.
    `capacity` makes it a degradation (the link keeps a fraction like 0.5, 50% or 100%,
    or a rate like 40Gbps) instead of a failure. `flap` repeats the failure.
    """

    kind: Literal["link", "switch", "nic", "random"]
    target: str | None = Field(None, min_length=1)
    at: Duration = 0.0
    until: Duration | None = None
    capacity: Annotated[float, BeforeValidator(parse_capacity), Field(gt=0)] | None = None
    flap: Flap | None = None
    count: int | None = Field(None, ge=1, le=100_000)
    of: Literal["link", "switch", "nic"] = "link"

    @model_validator(mode="after")
    def _consistent(self) -> Fault:
        if self.kind == "random":
            if self.count is None:
                raise ValueError("count: a random fault needs count (how many targets fail)")
            if self.target is not None:
                raise ValueError("target: a random fault draws its targets; drop target")
        else:
            if self.target is None:
                raise ValueError(f"target: a {self.kind} fault needs a target")
            if self.count is not None:
                raise ValueError("count: only a random fault takes count")
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"until: must be after at ({self.at} s)")
        if self.flap is not None and self.until is not None:
            raise ValueError("flap: a flapping fault has no until (each flap comes back up)")
        return self


class Reaction(_Model):
    """How fast each routing strategy notices a failure and repairs the paths it broke.

    Data-plane strategies (ecmp, ecmp-qp, adaptive, spray) repair locally after
    `local_detect` (a switch drops its own dead port from the group) and everywhere
    after `bfd_detect + bgp_convergence`; pinning waits for its controller:
    `controller_detect + controller_compute + rule_install x rules changed`.
    With `pinning_install: source-port` pinning steers each flow through its UDP source
    port over plain ECMP, so until its controller acts the switches repair its flows as
    they repair ECMP's (local repair, then BFD + BGP), and the controller's changes are
    host updates (one per flow moved) instead of switch rules.
    """

    local_detect: Duration = DEFAULT_LOCAL_DETECT_S
    bfd_detect: Duration = DEFAULT_BFD_DETECT_S
    bgp_convergence: Duration = DEFAULT_BGP_CONVERGENCE_S
    controller_detect: Duration = DEFAULT_CONTROLLER_DETECT_S
    controller_compute: Duration = DEFAULT_CONTROLLER_COMPUTE_S
    rule_install: Duration = DEFAULT_RULE_INSTALL_S
    pinning_repair: Literal["affected", "all"] = "affected"
    pinning_install: Literal["rules", "source-port"] = "rules"
