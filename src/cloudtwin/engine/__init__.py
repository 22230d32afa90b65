"""The engine: exact max-min fair rates and the event-driven fluid simulator."""

from cloudtwin.engine.maxmin import max_min_rates, water_fill
from cloudtwin.engine.simulator import Change, Dependencies, SimResult, Simulation, simulate

__all__ = ["Change", "Dependencies", "SimResult", "Simulation", "max_min_rates", "simulate", "water_fill"]
