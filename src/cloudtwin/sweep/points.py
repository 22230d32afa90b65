"""The points of a sweep: the product (or zip) of the varied values, and each point's key.

A point is the list of `key=value` overrides it applies on top of the scenario. Its
key is a digest of what determines its result: the task (scenario content, command,
command options, cloudtwin version) and the point's overrides. Two sweeps that share
a point share its stored result; a re-run finds it and skips it.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from cloudtwin.errors import SweepError
from cloudtwin.sweep.values import Vary

__all__ = ["MAX_POINTS", "SEED", "Plan", "Point", "point_key"]

#: The key that, when varied, repeats every other point (seeds are what results average over).
SEED = "seed"

#: A sweep larger than this is refused before anything runs.
MAX_POINTS = 2_000_000


class Point(NamedTuple):
    """One point: its place in the sweep, its overrides and its key."""

    position: int
    overrides: tuple[str, ...]
    key: str


def _hasher(task_digest: str) -> Any:
    return hashlib.sha256(f"{len(task_digest)}:{task_digest}".encode())


def _key(base: Any, overrides: Sequence[str]) -> str:
    h = base.copy()
    h.update("".join(f"{len(o)}:{o}" for o in overrides).encode())
    return str(h.hexdigest()[:32])


def point_key(task_digest: str, overrides: Sequence[str]) -> str:
    """The digest that identifies a point's result (each part length-prefixed, so that no
    two different lists of overrides give the same text).

    >>> point_key("t", ["seed=1"]) == point_key("t", ["seed=1"]) != point_key("t", ["seed=2"])
    True
    """
    return _key(_hasher(task_digest), overrides)


@dataclass(frozen=True)
class Plan:
    """The varied keys and how they combine.

    `zipped` pairs the i-th values of every varied key except `seed`; a varied seed
    still multiplies, so each paired point runs under every seed.
    """

    varies: tuple[Vary, ...]
    zipped: bool = False

    def __post_init__(self) -> None:
        keys = [v.key for v in self.varies]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise SweepError(f"vary {twice[0]}: the key is varied twice")
        if self.zipped:
            lengths = {v.key: len(v.values) for v in self.paired}
            if len(set(lengths.values())) > 1:
                listed = ", ".join(f"{k} has {n}" for k, n in lengths.items())
                raise SweepError(f"zip: the zipped keys need as many values each ({listed})")
        if self.size > MAX_POINTS:
            raise SweepError(f"vary: {self.size:,} points, more than the {MAX_POINTS:,} a sweep may hold")

    @property
    def keys(self) -> list[str]:
        """The varied keys, in the order given."""
        return [v.key for v in self.varies]

    @property
    def paired(self) -> list[Vary]:
        """The keys that move together under zip (every varied key but the seed)."""
        return [v for v in self.varies if v.key != SEED]

    @property
    def size(self) -> int:
        """How many points the sweep has."""
        counts = [len(v.values) for v in self.varies]
        if not self.zipped:
            return _product(counts)
        seeds = [len(v.values) for v in self.varies if v.key == SEED]
        paired = len(self.paired[0].values) if self.paired else 1
        return paired * _product(seeds)

    def value_indices(self) -> Iterator[tuple[int, ...]]:
        """For each point, the index of the value each varied key takes (last key fastest)."""
        ranges = [range(len(v.values)) for v in self.varies]
        if not self.zipped:
            yield from itertools.product(*ranges)
            return
        seed_at = [i for i, v in enumerate(self.varies) if v.key == SEED]
        paired = len(self.paired[0].values) if self.paired else 1
        seeds = range(len(self.varies[seed_at[0]].values)) if seed_at else range(1)
        for j, s in itertools.product(range(paired), seeds):
            yield tuple(s if i in seed_at else j for i in range(len(self.varies)))

    def overrides(self) -> Iterator[tuple[str, ...]]:
        """Each point's overrides, in sweep order."""
        texts = [[f"{v.key}={value}" for value in v.values] for v in self.varies]
        if not self.zipped:
            yield from itertools.product(*texts)
            return
        for indices in self.value_indices():
            yield tuple(t[i] for t, i in zip(texts, indices, strict=True))

    def points(self, task_digest: str) -> list[Point]:
        """Every point with its key."""
        base = _hasher(task_digest)
        return [Point(i, overrides, _key(base, overrides)) for i, overrides in enumerate(self.overrides())]

    def checks(self) -> Iterator[tuple[str, ...]]:
        """The points whose checks, together, check every point of the sweep.

        A point's seed sets the scenario's `seed` and nothing else: no other field's
        validity and no estimate depends on it. So every combination of the other keys is
        checked once (at the first seed), and the seed's probe values (a range's ends, each
        listed value; the field is an interval) once each, at the first combination.
        Without a varied seed, that is every point.
        """
        at = next((i for i, v in enumerate(self.varies) if v.key == SEED), None)
        if at is None:
            yield from self.overrides()
            return
        seed = self.varies[at]
        rest = Plan(tuple(v for v in self.varies if v.key != SEED), self.zipped)
        first: tuple[str, ...] | None = None
        for combination in rest.overrides():
            first = combination if first is None else first
            yield (*combination[:at], seed.overrides(0), *combination[at:])
        assert first is not None
        for value in seed.probes:
            if value != seed.values[0]:
                yield (*first[:at], f"{SEED}={value}", *first[at:])

    def value_checks(self) -> list[tuple[str, ...]]:
        """Fewer checks than `checks`, for sweeps too large to check point by point: the
        first point, then each key's probe values (each listed value, a range's ends) once
        with the other keys at their first value, and the point where every key takes its
        last probe (the largest fabric, when values grow). Under zip, the pairs in which
        some key takes a probe value. A combination they miss is still checked when its
        point runs, and fails alone, stored with its error.
        """
        if self.zipped:
            return self._zipped_value_checks()
        first = tuple(v.overrides(0) for v in self.varies)
        found = [first]
        for at, vary in enumerate(self.varies):
            found += [_with(first, at, vary.key, value) for value in vary.probes if value != vary.values[0]]
        found.append(tuple(f"{v.key}={v.probes[-1]}" for v in self.varies))
        return list(dict.fromkeys(found))

    def _zipped_value_checks(self) -> list[tuple[str, ...]]:
        indices: set[int] = {0}
        for vary in self.paired:
            where = {value: i for i, value in enumerate(vary.values)}
            indices.update(where[value] for value in vary.probes)
        seeds = [i for i, v in enumerate(self.varies) if v.key == SEED]
        texts = [[f"{v.key}={value}" for value in v.values] for v in self.varies]
        found = [tuple(t[0 if i in seeds else j] for i, t in enumerate(texts)) for j in sorted(indices)]
        for at in seeds:
            seed = self.varies[at]
            found += [_with(found[0], at, SEED, value) for value in seed.probes if value != seed.values[0]]
        return list(dict.fromkeys(found))

    def check_count(self) -> int:
        """How many points `checks` gives."""
        seeds = [v for v in self.varies if v.key == SEED]
        if not seeds:
            return self.size
        rest = Plan(tuple(v for v in self.varies if v.key != SEED), self.zipped)
        return rest.size + sum(1 for value in seeds[0].probes if value != seeds[0].values[0])


def _with(overrides: tuple[str, ...], at: int, key: str, value: str) -> tuple[str, ...]:
    return (*overrides[:at], f"{key}={value}", *overrides[at + 1 :])


def _product(counts: list[int]) -> int:
    total = 1
    for count in counts:
        total *= count
    return total
