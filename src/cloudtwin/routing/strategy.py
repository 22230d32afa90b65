"""The Strategy protocol, what a strategy is given, and the registry of strategies by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from cloudtwin.errors import RoutingError
from cloudtwin.flows import Flows
from cloudtwin.hashing import HashKind, hash_fields, switch_seeds
from cloudtwin.tenancy.overlay import Headers
from cloudtwin.topology.paths import Paths
from cloudtwin.topology.topology import Topology

__all__ = [
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
    try:
        strategy = factory()
    except Exception as err:  # a user's constructor may fail in any way
        raise RoutingError(f"routing.strategy: {spec} could not be created: {err}") from err
    if not isinstance(strategy, Strategy):
        raise RoutingError(f"routing.strategy: {spec} has no name and route(context) method")
    return strategy


def _load_builtins() -> None:
    if not _REGISTRY:
        importlib.import_module("cloudtwin.routing.builtin")
