"""The Strategy protocol, what a strategy is given, and the registry of strategies by name."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from cloudtwin.errors import RoutingError
from cloudtwin.flows import Flows
from cloudtwin.hashing import HashKind, hash_fields, switch_seeds
from cloudtwin.headers import Headers
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology

__all__ = [
    "CheckedStrategy",
    "RoutingContext",
    "Strategy",
    "load_strategy",
    "register",
    "strategy_names",
]


@dataclass(frozen=True, eq=False)
class RoutingContext:
    """Everything a strategy may look at to route a set of flows."""

    topology: Topology
    flows: Flows
    headers: Headers
    rate_bps: np.ndarray
    hash_kind: HashKind = "mix"
    per_switch_seed: bool = True
    seed: int = 0

    def ecmp_hash(self, flows: np.ndarray, nodes: np.ndarray, with_qp: bool = False) -> np.ndarray:
        """The hash switch `nodes[i]` computes over the header of flow `flows[i]`."""
        seeds = switch_seeds(self.topology.node_count, self.seed, self.per_switch_seed)[nodes]
        fields = [f[flows] for f in self.headers.fields()]
        if with_qp:
            fields.append(self.flows.dst_qp[flows])
        return hash_fields(fields, seeds, self.hash_kind)


@runtime_checkable
class Strategy(Protocol):
    """Assigns every flow a path (or a weighted set of paths) through the fabric."""

    name: str

    def route(self, context: RoutingContext) -> Paths:
        """Paths for `context.flows`, in flow order."""
        ...


_REGISTRY: dict[str, Callable[[], Strategy]] = {}
S = TypeVar("S")


def register(name: str) -> Callable[[S], S]:
    """Class decorator: make a strategy available by `name` in scenarios and on the CLI."""

    def add(cls: S) -> S:
        _REGISTRY[name] = cls  # type: ignore[assignment]
        return cls

    return add


def strategy_names() -> list[str]:
    """Names of the built-in strategies."""
    _load_builtins()
    return list(_REGISTRY)


def load_strategy(spec: str) -> Strategy:
    """A strategy by registered name, or by dotted path `package.module:Class`."""
    _load_builtins()
    if spec in _REGISTRY:
        return _REGISTRY[spec]()
    if ":" not in spec:
        known = ", ".join(_REGISTRY)
        raise RoutingError(
            f"routing.strategy: unknown strategy {spec!r} (known: {known}, or package.module:Class)"
        )
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except (ImportError, ValueError, TypeError) as err:  # also '' and relative names
        raise RoutingError(
            f"routing.strategy: cannot import module {module_name!r}: {err}"
        ) from err
    factory = getattr(module, attr, None)
    if factory is None:
        raise RoutingError(f"routing.strategy: module {module_name!r} has no {attr!r}")
    # Only a class with route() is instantiated: any other callable (os:abort) could do
    # anything when called.
    if not inspect.isclass(factory) or not callable(getattr(factory, "route", None)):
        raise RoutingError(
            f"routing.strategy: {spec} is not a strategy class (a class with a name and a "
            "route(context) method)"
        )
    try:
        strategy = factory()
    except Exception as err:  # a user's constructor may fail in any way
        raise RoutingError(f"routing.strategy: {spec} could not be created: {err}") from err
    if not isinstance(strategy, Strategy) or not isinstance(getattr(strategy, "name", None), str):
        raise RoutingError(f"routing.strategy: {spec} has no name and route(context) method")
    return CheckedStrategy(strategy, spec)


class CheckedStrategy:
    """A user's strategy, whose answers are checked: any error or malformed paths from its
    route() becomes a RoutingError naming it, instead of a crash deep in the engine."""

    def __init__(self, inner: Strategy, spec: str) -> None:
        self.inner = inner
        self.spec = spec
        self.name = inner.name

    def __getattr__(self, attr: str) -> object:  # reaction, profile, ... as declared
        return getattr(self.inner, attr)

    def route(self, context: RoutingContext) -> Paths:
        """The inner strategy's paths, checked against the flows and the topology."""
        try:
            paths = self.inner.route(context)
        except Exception as err:  # a user's code may fail in any way
            raise RoutingError(
                f"routing.strategy: {self.spec}: route() failed: {type(err).__name__}: {err}"
            ) from err
        check_paths(paths, context, self.spec)
        return paths


def check_paths(paths: object, context: RoutingContext, who: str) -> None:
    """RoutingError unless `paths` gives every flow a path of links of the topology that
    leaves its source NIC, is contiguous and reaches its destination NIC."""
    if not isinstance(paths, Paths):
        raise RoutingError(f"routing.strategy: {who}: route() returned {type(paths).__name__}, not Paths")
    topology, flows = context.topology, context.flows
    try:
        indptr = np.asarray(paths.indptr, dtype=np.int64)
        links = np.asarray(paths.link_ids, dtype=np.int64)
    except (TypeError, ValueError) as err:
        raise RoutingError(f"routing.strategy: {who}: paths are not integer arrays") from err
    bad = (
        indptr.ndim != 1 or links.ndim != 1 or indptr.size != len(flows) + 1
        or (indptr.size and (indptr[0] != 0 or indptr[-1] != links.size))
        or np.any(np.diff(indptr) < 1)
    )
    if bad:
        raise RoutingError(
            f"routing.strategy: {who}: route() must give each of the {len(flows)} flows a "
            "non-empty path (indptr of flows + 1 offsets from 0 to the number of links)"
        )
    if links.size and (links.min() < 0 or links.max() >= topology.link_count):
        raise RoutingError(f"routing.strategy: {who}: a path uses a link id the fabric lacks")
    if paths.weights is not None and np.asarray(paths.weights).shape != links.shape:
        raise RoutingError(f"routing.strategy: {who}: weights must have one entry per link")
    if paths.weights is not None:
        return  # split paths (spraying) need not be one chain per flow
    first, last = indptr[:-1], indptr[1:] - 1
    ok = (topology.link_src[links[first]] == flows.src) & (topology.link_dst[links[last]] == flows.dst)
    inner = np.ones(links.size, dtype=bool)
    inner[last] = False
    hops = np.flatnonzero(inner)
    if not np.all(ok) or np.any(topology.link_dst[links[hops]] != topology.link_src[links[hops + 1]]):
        raise RoutingError(
            f"routing.strategy: {who}: a path does not lead from its flow's source to its "
            "destination through connected links"
        )


def _load_builtins() -> None:
    if not _REGISTRY:
        importlib.import_module("cloudtwin.routing.builtin")
