"""/api/jobs and /api/examples: start a comparison or an evaluation, follow it, cancel it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from cloudtwin.evaluation import usecases
from cloudtwin.evaluation.results import RecordedCloud
from cloudtwin.scenario.cloud import is_cloud, load_cloud
from cloudtwin.scenario.loader import load_scenario, parse_yaml
from cloudtwin.scenario.model import Scenario
from cloudtwin.service.auth import require_read, require_token
from cloudtwin.service.deps import job_queue, settings
from cloudtwin.service.errors import ApiError
from cloudtwin.service.examples import list_examples, read_example
from cloudtwin.service.jobs import Job, JobQueue, Progress, Work
from cloudtwin.service.models import Example, ExampleList, JobDetail, JobList, JobResult, JobSummary
from cloudtwin.service.settings import ServiceSettings
from cloudtwin.store.database import Store

__all__ = ["JobRequest", "router"]

router = APIRouter(prefix="/api", tags=["jobs"])

#: The largest scenario accepted in a request.
MAX_SCENARIO_BYTES = 64 * 1024
JobId = Annotated[int, Path(ge=1, lt=2**31)]
Queue = Annotated[JobQueue, Depends(job_queue)]
Settings = Annotated[ServiceSettings, Depends(settings)]


class JobRequest(BaseModel):
    """A job: what to do, on which scenario (a shipped example or uploaded YAML), how."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["compare", "evaluate", "nccl-tests"] = Field(
        "compare",
        description="compare: `cloudtwin compare`; evaluate: `cloudtwin evaluate` (stored as a run); "
        "nccl-tests: `cloudtwin nccl-tests` (a collective swept over message sizes)",
    )
    example: str | None = Field(None, max_length=200, description="A shipped example's name")
    scenario_yaml: str | None = Field(
        None, max_length=MAX_SCENARIO_BYTES, description="An uploaded scenario (YAML text)"
    )
    strategies: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, max_length=16, description="Strategies (default: the five built-in ones)"
    )
    seed: int | None = Field(None, ge=0, lt=2**63, description="Overrides the scenario's seed")
    overrides: list[Annotated[str, Field(max_length=500)]] = Field(
        default_factory=list, max_length=50, description="`key=value` overrides, as --set"
    )
    minbytes: str = Field(
        "1M", max_length=20, description="nccl-tests: smallest size (K/M/G: powers of 1024)"
    )
    maxbytes: str = Field("1G", max_length=20, description="nccl-tests: largest size")
    stepfactor: int = Field(2, ge=2, le=1024, description="nccl-tests: size factor between steps")

    @model_validator(mode="after")
    def _one_source(self) -> JobRequest:
        if (self.example is None) == (self.scenario_yaml is None):
            raise ValueError("give exactly one of example or scenario_yaml")
        return self


@router.get("/examples", tags=["jobs"], dependencies=[Depends(require_read)])
def examples(config: Settings) -> ExampleList:
    """The shipped example scenarios a job can start from."""
    shipped = list_examples(config.examples_dir)
    examples = [Example(name=e.name, file=e.path.name, workload=e.workload) for e in shipped]
    return ExampleList(examples=examples)


@router.post("/jobs", status_code=202, dependencies=[Depends(require_token)])
def submit(body: JobRequest, queue: Queue, config: Settings, request: Request) -> JobDetail:
    """Queue a job (needs the token); its progress and result are at /api/jobs/{job_id}."""
    text, source = _text(body, config)
    if is_cloud(parse_yaml(text, source)[0]):  # one cloud of federated sites
        return _submit_cloud(body, text, source, queue, config, request)
    scenario = _scenario(body, config)
    if body.kind == "nccl-tests":
        return _submit_nccl(body, scenario, queue)
    strategies = usecases.parse_strategies(body.strategies, unique=body.kind == "evaluate")
    usecases.check_strategies(strategies)
    if body.kind == "compare":
        work = _compare_work(scenario, strategies)
    else:
        work = _evaluate_work(scenario, strategies, config, request)
    return queue.submit(body.kind, scenario.name, strategies, work).detail()


@router.get("/jobs", dependencies=[Depends(require_read)])
def list_jobs(queue: Queue) -> JobList:
    """Jobs of this service run, newest first (without their results)."""
    return JobList(jobs=[job.summary() for job in queue.list()])


@router.get("/jobs/{job_id}", dependencies=[Depends(require_read)])
def show_job(job_id: JobId, queue: Queue) -> JobDetail:
    """A job's state, progress (0..1) and, once done, its result (what the CLI's --json prints)."""
    return _job(queue, job_id).detail()


@router.post("/jobs/{job_id}/cancel", dependencies=[Depends(require_token)])
def cancel(job_id: JobId, queue: Queue) -> JobSummary:
    """Cancel a job (needs the token): queued, it never starts; running, it stops soon."""
    job = _job(queue, job_id)
    queue.cancel(job)
    return job.summary()


def _job(queue: JobQueue, job_id: int) -> Job:
    job = queue.get(job_id)
    if job is None:
        raise ApiError(404, "job_id", f"job_id: no job {job_id} in this service")
    return job


def _overrides(body: JobRequest) -> list[str]:
    return [*body.overrides, *([f"seed={body.seed}"] if body.seed is not None else [])]


def _text(body: JobRequest, config: ServiceSettings) -> tuple[str, str]:
    if body.example is not None:
        return read_example(config.examples_dir, body.example)
    return body.scenario_yaml or "", "scenario_yaml"


def _scenario(body: JobRequest, config: ServiceSettings) -> Scenario:
    text, source = _text(body, config)
    return load_scenario(text, source, _overrides(body))


def _submit_cloud(
    body: JobRequest, text: str, source: str, queue: JobQueue, config: ServiceSettings, request: Request
) -> JobDetail:
    """An evaluation of one cloud, stored as a run as `cloudtwin evaluate FILE` stores it;
    the other kinds simulate one fabric and are refused naming the kind that runs a cloud."""
    from cloudtwin.evaluation.cloud import evaluate_cloud

    if body.kind != "evaluate":
        cli = (
            "`cloudtwin compare FILE` the whole cloud without its faults and `cloudtwin compare FILE "
            "--site NAME` one site"
            if body.kind == "compare"
            else "`cloudtwin nccl-tests FILE --site NAME` one site's collective"
        )
        raise ApiError(
            400,
            "kind",
            f"kind: a {body.kind} job shows one fabric; {source} is one cloud of federated sites "
            f"(federation:): kind evaluate runs it whole (as `cloudtwin evaluate`), and {cli}",
        )
    cloud = load_cloud(text, source, _overrides(body))
    strategies = usecases.parse_strategies(body.strategies, unique=True)
    usecases.check_strategies(strategies)
    snapshots = request.app.state.snapshots

    def work(progress: Progress) -> JobResult:
        def report(message: str) -> None:
            progress(message.split(":")[0], 0, 0)

        results = evaluate_cloud(cloud, strategies, report).results
        progress("store", 0, 0)
        with Store(config.db) as store:  # held only while this run is written
            run_id = usecases.record_cloud(store, results)
        snapshots.refresh()
        return RecordedCloud(**dict(results), run_id=run_id)

    return queue.submit("evaluate", cloud.name, strategies, work).detail()


def _submit_nccl(body: JobRequest, scenario: Scenario, queue: JobQueue) -> JobDetail:
    from cloudtwin.evaluation.collective import collective_workload

    collective_workload(scenario)  # refuses a scenario without a collective before queueing
    sizes = usecases.nccl_sizes(body.minbytes, body.maxbytes, body.stepfactor)
    strategies = usecases.parse_strategies(body.strategies, (scenario.routing.strategy,))
    usecases.check_strategies(strategies)

    def work(progress: Progress) -> JobResult:
        return usecases.nccl_tests(scenario, sizes, strategies, progress)

    return queue.submit("nccl-tests", scenario.name, strategies, work).detail()


def _compare_work(scenario: Scenario, strategies: list[str]) -> Work:
    def work(progress: Progress) -> JobResult:
        return usecases.compare(scenario, strategies, progress)

    return work


def _evaluate_work(
    scenario: Scenario, strategies: list[str], config: ServiceSettings, request: Request
) -> Work:
    snapshots = request.app.state.snapshots

    def work(progress: Progress) -> JobResult:
        def report(message: str) -> None:
            progress(message.split(":")[0], 0, 0)

        result = usecases.evaluate(scenario, strategies, report)
        progress("store", 0, 0)
        with Store(config.db) as store:  # held only while this run is written
            result = usecases.record_evaluation(store, result)
        snapshots.refresh()
        return result.recorded

    return work


