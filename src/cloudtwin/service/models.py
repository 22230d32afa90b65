"""The answers of the HTTP API as frozen pydantic models, so that /openapi.json documents each.

Field names and order are those of the JSON the API has always answered with. A run's
results and a job's result are the evaluation's own types (`cloudtwin.evaluation.results`,
the use cases' results): the API serves them as they are, described once. Numbers read
back from the store's tables are `int | float`, so that an integer stays one (`3`, not
`3.0`); times are ISO 8601 strings, as stored.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from cloudtwin.evaluation.results import RecordedCloud, RecordedResults, StoredRun, Timeline
from cloudtwin.evaluation.usecases import Comparison, NcclSweep
from cloudtwin.store.ops_ingest import IngestSummary

__all__ = [
    "Anomaly",
    "AnomalyList",
    "ComparedRun",
    "ComparedRuns",
    "Diagnosis",
    "Example",
    "ExampleList",
    "Fabric",
    "FabricNode",
    "FctQuantiles",
    "JobDetail",
    "JobList",
    "JobResult",
    "JobSummary",
    "JsonObject",
    "LineList",
    "LogLine",
    "LogTimeline",
    "RunPage",
    "RunPlots",
    "RunRow",
    "StoredRun",
    "StrategySummary",
    "Suspect",
    "Template",
    "TemplateList",
    "Timeline",
]

#: A JSON object made of a store's row (its times as ISO 8601 text).
JsonObject = dict[str, JsonValue]
#: A number read back from the store: an int stays an int.
Number = int | float

JobResult = Annotated[
    Comparison | NcclSweep | RecordedResults | RecordedCloud | IngestSummary,
    Field(description="compare: the comparison; nccl-tests: the sweep; evaluate: the stored run's "
          "results with its run_id (a fabric's or, with kind cloud, a cloud's); logs-ingest: what "
          "the ingest added"),
]
"""What a finished job answers: what the CLI's --json prints for the same command."""


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- runs -------------------------------------------------------------------------------
class RunRow(_Answer):
    """One stored run in a list of runs."""

    run_id: int
    created_at: str = Field(description="When it was stored (UTC)")
    scenario: str
    seed: int
    strategies: str = Field(description="The strategies evaluated, comma-separated")
    recommendation: str | None


class RunPage(_Answer):
    """A page of stored runs; `total` counts every run matching the filter."""

    total: int
    limit: int
    offset: int
    runs: list[RunRow]


class FctQuantiles(_Answer):
    """Flow completion time (s, with faults) at evenly spaced quantiles."""

    quantile: list[float]
    fct_s: list[float]


class RunPlots(_Answer):
    """The data of a run's plots, per strategy."""

    run_id: int
    timelines: dict[str, Timeline]
    fct: dict[str, FctQuantiles]


class StrategySummary(_Answer):
    """The headline of each axis for one strategy of a run."""

    aggregate_gbps: Number
    ratio_to_first: Number | None
    recovered: bool
    time_to_recover_s: Number | None
    dip: Number
    bytes_delayed: Number
    complexity_score: Number


class ComparedRun(_Answer):
    """One run of a comparison."""

    run_id: int
    scenario: str
    seed: int
    created_at: str
    recommendation: str | None
    strategies: dict[str, StrategySummary]


class ComparedRuns(_Answer):
    """Several stored runs side by side."""

    runs: list[ComparedRun]


# -- jobs -------------------------------------------------------------------------------
class Example(_Answer):
    """A shipped example scenario a job can start from."""

    name: str
    file: str
    workload: str


class ExampleList(_Answer):
    """Every shipped example."""

    examples: list[Example]


class JobSummary(_Answer):
    """A job without its result: what it is and how far it got."""

    job_id: int
    kind: str
    scenario: str
    state: str = Field(description="queued, running, done, failed or cancelled")
    progress: float = Field(description="0..1")
    stage: str | None
    stages: list[str]
    created_at: str
    finished_at: str | None
    error: str | None


class JobDetail(JobSummary):
    """A job and, once done, its result (what the CLI's --json prints)."""

    result: JobResult | None


class JobList(_Answer):
    """Jobs of this service run, newest first."""

    jobs: list[JobSummary]


# -- logs -------------------------------------------------------------------------------
class Template(_Answer):
    """A mined template and its line count."""

    template_id: int
    lines: int
    template: str


class TemplateList(_Answer):
    """Templates, most frequent first."""

    templates: list[Template]


class LogLine(_Answer):
    """A stored line."""

    source: str
    line: int
    ts: str | None
    level: str | None
    component: str | None
    template_id: int
    content: str


class LineList(_Answer):
    """Lines found, in source and line order."""

    lines: list[LogLine]


class Anomaly(_Answer):
    """A burst, a new or a silent template (or component) in a window, scored by surprise."""

    kind: str
    window_start: str
    key: str
    lines: int
    expected: float
    score: float
    text: str | None


class AnomalyList(_Answer):
    """Anomalies found."""

    anomalies: list[Anomaly]


class LogTimeline(_Answer):
    """Lines per window (windows without lines left out) and the anomalies flagged."""

    windows: list[str]
    lines: list[int]
    anomalies: list[Anomaly]


# -- diagnosis --------------------------------------------------------------------------
class Suspect(_Answer):
    """A likely root cause and the evidence for it."""

    rank: int
    component: str
    kind: str
    score: float
    tomography: float
    logs: float
    degraded_samples: int
    healthy_samples: int
    messages: dict[str, int]
    evidence: str
    since: str | None = None
    until: str | None = None


class FabricNode(_Answer):
    """A node of the fabric, placed for drawing (x across its tier, y its tier)."""

    name: str
    kind: str
    x: float
    y: int


class Fabric(_Answer):
    """The nodes and cables (undirected node pairs) of the store's twin run."""

    nodes: list[FabricNode]
    cables: list[tuple[str, str]]


class Diagnosis(_Answer):
    """The top suspects of one twin run, best first (`cloudtwin diagnose --json`), and the
    fabric; `runs` are the store's twin runs, the latest written first."""

    run: str | None = None
    runs: list[str] = []
    fault_found: bool
    suspects: list[Suspect]
    fabric: Fabric
