"""Match-action tables at run time: installed entries, their lookup (exact, lpm, and
ternary, range or optional in priority order) and the per-entry columns actions read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from cloudtwin.p4.context import Context
from cloudtwin.p4.program import MatchKind, Table
from cloudtwin.p4.values import mask_of

__all__ = ["TableEntry", "TableState"]


@dataclass(frozen=True)
class TableEntry:
    """An installed entry: one match per key (exact int, (value, prefix), (value, mask))."""

    match: tuple[int | tuple[int, int], ...]
    action: str
    params: tuple[int, ...] = ()
    priority: int = 0


@dataclass
class TableState:
    """A table of the running datapath: its entries, default action, hit counts and, built
    from the entries when first needed, its lookup."""

    table: Table
    widths: tuple[int, ...]
    entries: list[TableEntry] = field(default_factory=list)
    default: tuple[str, tuple[int, ...]] = ("NoAction", ())
    hits: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hook: Callable[[Context, np.ndarray, list[np.ndarray], np.ndarray], np.ndarray] | None = None
    _lookup: Callable[[list[np.ndarray]], np.ndarray] | None = None
    _cache: dict[object, np.ndarray] = field(default_factory=dict)

    def invalidate(self) -> None:
        """Forget what was built from the entries (they changed)."""
        self._lookup = None
        self._cache = {}
        self.hits = np.zeros(len(self.entries), dtype=np.int64)

    def lookup(self, keys: list[np.ndarray], n: int) -> np.ndarray:
        """Each row's matching entry for key columns `keys` (-1: a miss)."""
        if not self.entries:
            return np.full(n, -1, dtype=np.int64)
        if not keys:  # a table without keys: its first entry matches every packet
            return np.zeros(n, dtype=np.int64)
        lookup = self._lookup
        if lookup is None:
            lookup = self._lookup = _build_lookup(self)
        return lookup(keys)

    def action_codes(self) -> np.ndarray:
        """Each entry's action, as its position in the table's actions."""
        return _entry_action_codes(self)

    def param_column(self, action: str, j: int, width: int) -> np.ndarray:
        """Parameter `j` of `action` in each entry (0 in entries of other actions)."""
        return _entry_params(self, action, j, width)


def _entry_action_codes(state: TableState) -> np.ndarray:
    codes = state._cache.get("actions")
    if codes is None:
        actions = state.table.actions
        codes = np.array([actions.index(e.action) for e in state.entries], dtype=np.int64)
        state._cache["actions"] = codes
    return codes


def _entry_params(state: TableState, action: str, j: int, width: int) -> np.ndarray:
    key = (action, j)
    values = state._cache.get(key)
    if values is None:
        column = [e.params[j] if e.action == action else 0 for e in state.entries]
        values = np.array(column, dtype=object if width > 64 else np.uint64)
        state._cache[key] = values
    return values


def _build_lookup(state: TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    kinds = [k.kind for k in state.table.keys]
    entries = state.entries
    if {MatchKind.TERNARY, MatchKind.OPTIONAL, MatchKind.RANGE} & set(kinds) or not kinds:
        return _ternary_lookup(state)
    if MatchKind.LPM in kinds:
        return _lpm_lookup(state)
    columns = [[e.match[j] for e in entries] for j in range(len(kinds))]
    return _exact_lookup(columns, state.widths, np.arange(len(entries)))  # type: ignore[arg-type]


def _array(values: list[int], width: int) -> np.ndarray:
    return np.array(values, dtype=object if width > 64 else np.uint64)


def _exact_lookup(
    columns: list[list[int]], widths: tuple[int, ...], ids: np.ndarray
) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Exact match on several fields: each field becomes its rank among the entries' values,
    the ranks one mixed-radix code, and the code is found by binary search."""
    uniques = [np.unique(_array(col, w)) for col, w in zip(columns, widths, strict=True)]
    codes = np.zeros(len(ids), dtype=np.int64)
    for col, uniq, w in zip(columns, uniques, widths, strict=True):
        codes = codes * uniq.size + np.searchsorted(uniq, _array(col, w))
    order = np.argsort(codes, kind="stable")
    sorted_codes, sorted_ids = codes[order], ids[order]

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        n = keys[0].size
        row_codes = np.zeros(n, dtype=np.int64)
        ok = np.ones(n, dtype=bool)
        for key, uniq in zip(keys, uniques, strict=True):
            pos = np.minimum(np.searchsorted(uniq, key), uniq.size - 1)
            ok &= uniq[pos] == key
            row_codes = row_codes * uniq.size + pos
        at = np.minimum(np.searchsorted(sorted_codes, row_codes), sorted_codes.size - 1)
        ok &= sorted_codes[at] == row_codes
        return np.where(ok, sorted_ids[at], -1)

    return lookup


def _lpm_lookup(state: TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Longest prefix first: one exact lookup per prefix length on the masked key."""
    kinds = [k.kind for k in state.table.keys]
    lpm = kinds.index(MatchKind.LPM)
    width = state.widths[lpm]
    groups: dict[int, list[int]] = {}
    for i, entry in enumerate(state.entries):
        groups.setdefault(entry.match[lpm][1], []).append(i)  # type: ignore[index]
    plans = []
    for prefix in sorted(groups, reverse=True):
        ids = np.array(groups[prefix], dtype=np.int64)
        prefix_mask = mask_of(width) ^ mask_of(width - prefix)
        columns = []
        for j in range(len(kinds)):
            column = [state.entries[i].match[j] for i in ids]
            columns.append([c[0] & prefix_mask for c in column] if j == lpm else column)
        plans.append((prefix_mask, _exact_lookup(columns, state.widths, ids)))

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        found = np.full(keys[0].size, -1, dtype=np.int64)
        for prefix_mask, exact in plans:
            masked = list(keys)
            bits = prefix_mask if keys[lpm].dtype == object else np.uint64(prefix_mask)
            masked[lpm] = keys[lpm] & bits
            hit = exact(masked)
            found = np.where(found < 0, hit, found)
            if (found >= 0).all():
                break
        return found

    return lookup


def _ternary_lookup(state: TableState) -> Callable[[list[np.ndarray]], np.ndarray]:
    """Entries in priority order (highest first); the first one every key matches wins."""
    kinds = [k.kind for k in state.table.keys]
    order = sorted(range(len(state.entries)), key=lambda i: (-state.entries[i].priority, i))
    rules = []
    for i in order:
        terms = []
        for j, kind in enumerate(kinds):
            match, width = state.entries[i].match[j], state.widths[j]
            if kind == MatchKind.RANGE:
                terms.append((match[0], match[1], True))  # type: ignore[index]
                continue
            if kind == MatchKind.EXACT:
                value, bits = int(match), mask_of(width)  # type: ignore[arg-type]
            elif kind == MatchKind.LPM:
                value, prefix = match  # type: ignore[misc]
                bits = mask_of(width) ^ mask_of(width - prefix)
            else:
                value, bits = match  # type: ignore[misc]
            terms.append((value & bits, bits, False))
        rules.append((i, terms))

    def lookup(keys: list[np.ndarray]) -> np.ndarray:
        n = keys[0].size if keys else 1
        found = np.full(n, -1, dtype=np.int64)
        left = np.ones(n, dtype=bool)
        for i, terms in rules:
            rows = left.copy()
            for key, (value, bits, is_range) in zip(keys, terms, strict=True):
                if is_range:  # value .. bits, inclusive
                    low, high = (b if key.dtype == object else np.uint64(b) for b in (value, bits))
                    rows &= (key >= low) & (key <= high)
                elif bits == 0:
                    continue
                elif key.dtype == object:
                    rows &= (key & bits) == value
                else:
                    rows &= (key & np.uint64(bits)) == np.uint64(value)
            found[rows] = i
            left &= ~rows
            if not left.any():
                break
        return found

    return lookup
