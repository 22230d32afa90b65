"""Misbehaving user strategies, loaded by dotted path in tests/routing/test_plugin_checks.py."""

from __future__ import annotations

import numpy as np

from cloudtwin.routing import RoutingContext
from cloudtwin.topology import Paths


class Raises:
    name = "raises"

    def route(self, context: RoutingContext) -> Paths:
        raise ZeroDivisionError("oops")


class ReturnsAList:
    name = "list"

    def route(self, context: RoutingContext) -> object:
        return [1, 2, 3]


class ShortPaths:
    name = "short"

    def route(self, context: RoutingContext) -> Paths:
        return Paths(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))


class OutOfRange:
    name = "out-of-range"

    def route(self, context: RoutingContext) -> Paths:
        n = len(context.flows)
        return Paths(np.arange(n + 1, dtype=np.int64), np.full(n, 10**9, dtype=np.int64))


class Disconnected:
    name = "disconnected"

    def route(self, context: RoutingContext) -> Paths:
        n = len(context.flows)
        return Paths(np.arange(n + 1, dtype=np.int64), np.zeros(n, dtype=np.int64))


def not_a_class() -> None:
    raise AssertionError("a function must never be called as a strategy factory")
