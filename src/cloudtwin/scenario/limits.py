"""Resource limits of a run: how much memory a scenario may ask for before it is refused."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from cloudtwin.scenario.units import parse_size

__all__ = ["DEFAULT_FLOWS", "DEFAULT_MEMORY_BYTES", "DEFAULT_MIGRATIONS", "DEFAULT_SITES", "Limits"]

#: A run whose estimated memory is above this is refused unless `limits.memory` is raised.
DEFAULT_MEMORY_BYTES = 4 << 30
#: A run with more engine flows than this is refused unless `limits.flows` is raised: on
#: a 2-core machine an alltoall over 512 GPUs (261,632 flows) takes about 20 s, one over
#: 768 GPUs (589,056 flows) did not finish in 300 s.
DEFAULT_FLOWS = 300_000
#: A scenario with more live migrations than this is refused unless `limits.migrations` is
#: raised: on a 2-core machine 1,000 at once run in about 3 s, 6,500 (what a 1 MiB scenario
#: holds) took 3 minutes, and `evaluate` runs them twice per strategy.
DEFAULT_MIGRATIONS = 2_000
#: A federation of more sites than this is refused unless `limits.sites` is raised: on a
#: 2-core machine joining 1,000 sites (a fabric each, 499,500 default WAN links) takes
#: about 40 s and 1.2 GB, and the time grows with the square of the sites.
DEFAULT_SITES = 1_000


class Limits(BaseModel):
    """`limits:` of a scenario; each is checked before the work it bounds starts.

    `memory` bounds the estimated size of the arrays a run builds (fabric tables, flows,
    paths); raise it (e.g. `--set limits.memory=16GiB`) on a machine that has more.
    `flows` bounds the flows one simulation holds (perftest connections x QPs, alltoall
    pairs), which sets how long it runs; `migrations` bounds a scenario's live migrations
    (their rounds share one simulation); `sites` bounds the sites of a federation (each is
    a fabric, and every pair of them a WAN link unless `wan:` lists the links).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: Annotated[int, BeforeValidator(parse_size), Field(gt=0)] = DEFAULT_MEMORY_BYTES
    flows: int = Field(DEFAULT_FLOWS, gt=0)
    migrations: int = Field(DEFAULT_MIGRATIONS, gt=0)
    sites: int = Field(DEFAULT_SITES, gt=0)
