"""Root-cause diagnosis tied to the twin: operations data from simulated faults, and ranking.

`twin.simulate_faulted` runs a scenario with its faults (the run `evaluate` reports),
`emit_run` writes what the fabric would have logged and measured into the store, and
`diagnose` ranks likely culprits (links, switches, NICs) from the store alone: log
anomalies plus network tomography.
"""

from cloudtwin.diagnosis.emit import EmitConfig, emit_run
from cloudtwin.diagnosis.rank import Suspect, diagnose
from cloudtwin.diagnosis.rates import FlowSamples, sample_rates
from cloudtwin.diagnosis.tomography import TomographyConfig, link_scores
from cloudtwin.diagnosis.usecase import Diagnosis

__all__ = [
    "Diagnosis",
    "EmitConfig",
    "FlowSamples",
    "Suspect",
    "TomographyConfig",
    "diagnose",
    "emit_run",
    "link_scores",
    "sample_rates",
]
