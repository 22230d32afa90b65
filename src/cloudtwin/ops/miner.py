"""The template miner: a streaming fixed-depth parse tree in the style of Drain (ICWS 2017)."""

from __future__ import annotations

import bisect
import pickle
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.masking import GENERIC_MASKS, WILDCARD, Masker

__all__ = [
    "DEFAULT_DEPTH", "DEFAULT_SIM_THRESHOLD", "Cluster", "MinerConfig", "Similarity",
    "TemplateMiner",
]

_CACHE_LIMIT = 100_000

#: Two routing tokens: the first two words of a message are most often its event's
#: name ("Failed password", "Received disconnect"), and a word holding a variable is
#: routed through a wildcard branch anyway.
DEFAULT_DEPTH = 5
#: The share of a message's constant words that must equal the group's (see
#: :data:`Similarity`); one differing word in three keeps a message out.
DEFAULT_SIM_THRESHOLD = 0.7

#: How a message is compared with a group's template. ``"constants"``: the share of
#: equal words among the positions that do not hold the same variable on both sides
#: (``<*>`` facing ``<*>``, ``uid=<*>`` facing ``uid=<*>``), so shared variables
#: neither help nor hurt and a message full of numbers is judged by its words.
#: ``"drain"``: the share of equal words among all positions, a ``<*>`` facing a
#: ``<*>`` not counting as equal, as in Drain (kept for stores mined with it).
Similarity = Literal["constants", "drain"]


@dataclass(frozen=True)
class MinerConfig:
    """Settings of the parse tree; the defaults serve every log format alike.

    ``depth`` counts the root, the token-count layer and the leaves, as in the Drain paper,
    so ``depth - 3`` leading tokens route a message (Loghub benchmark convention).
    ``sim_threshold`` is the similarity a message needs to join a group, measured as
    ``similarity`` says; ``masks`` find the variable parts before the tree. With
    ``join_by_words``, a message that fits no group of its length joins the oldest group
    whose constant words are the same, in the same order: variables of varying length
    or optional variable parts (``1481 bytes (1.44 KB) sent`` and ``0 bytes sent``) do
    not split an event.
    """

    depth: int = DEFAULT_DEPTH
    sim_threshold: float = DEFAULT_SIM_THRESHOLD
    max_children: int = 100
    masks: tuple[str, ...] = GENERIC_MASKS
    similarity: Similarity = "constants"
    join_by_words: bool = True

    def __post_init__(self) -> None:
        if self.depth < 3:
            raise LogFormatError(f"miner depth must be at least 3, got {self.depth}")
        if not 0.0 <= self.sim_threshold <= 1.0:
            raise LogFormatError(
                f"similarity threshold must be in [0, 1], got {self.sim_threshold}"
            )
        if self.max_children < 2:
            raise LogFormatError(f"max children must be at least 2, got {self.max_children}")
        if self.similarity not in ("constants", "drain"):
            raise LogFormatError(
                f"similarity must be 'constants' or 'drain', got {self.similarity!r}"
            )


@dataclass(eq=False)
class Cluster:
    """One template group: its id, its template tokens and how many lines joined it.

    ``route`` is the message that started the group; it decides the group's place in
    the tree, so saving it lets a restored miner route exactly like the original.
    """

    template_id: int
    tokens: list[str]
    size: int = 0
    wildcards: list[int] = field(default_factory=list)
    route: str = ""

    @property
    def template(self) -> str:
        """The template text, variables written as ``<*>``."""
        return " ".join(self.tokens)


class _Node:
    __slots__ = ("children", "clusters")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.clusters: list[Cluster] = []


def _has_digit(token: str, _rx: re.Pattern[str] = re.compile(r"\d")) -> bool:
    return _rx.search(token) is not None


def _words(tokens: list[str]) -> tuple[str, ...]:
    """The constant words of a message or template: the tokens with no masked part."""
    return tuple(t for t in tokens if WILDCARD not in t)


def _template_id(cluster: Cluster) -> int:
    return cluster.template_id


class TemplateMiner:
    """Groups messages into templates, one message at a time, in bounded memory.

    A message is masked, split on whitespace, routed by its token count and its first
    ``depth - 3`` tokens to a leaf, and joins the leaf's most similar group if it is at
    least ``sim_threshold`` similar to the group's template; the template then turns
    the differing tokens into ``<*>``. Otherwise it starts a new group. Group ids never
    change, so a new file extends the same template set.

    >>> miner = TemplateMiner()
    >>> [miner.add("user 7 logged in").template_id, miner.add("user 9 logged in").template_id]
    [1, 1]
    >>> miner.clusters[0].template
    'user <*> logged in'
    >>> miner.add("disk full").template_id
    2
    """

    def __init__(self, config: MinerConfig | None = None) -> None:
        self.config = config or MinerConfig()
        self.masker = Masker(self.config.masks)
        self.clusters: list[Cluster] = []
        self._root: dict[int, _Node] = {}
        self._cache: dict[str, Cluster] = {}
        self._routing_tokens = self.config.depth - 3
        self._by_words: dict[tuple[str, ...], list[Cluster]] = {}
        self._changed: set[int] = set()
        self._fresh: dict[str, int] = {}
        self._cache_cleared = False
        self._templates: dict[str, Cluster] = {}

    # -- public API -------------------------------------------------------------------

    def add(self, content: str) -> Cluster:
        """Mine one message; the group it joined (or started)."""
        masked = self.masker.mask(content)
        cluster = self._cache.get(masked)
        if cluster is None:
            cluster = self._add_tokens(masked.split())
            if len(self._cache) >= _CACHE_LIMIT:
                self._clear_cache()
            self._cache[masked] = cluster
            self._fresh[masked] = cluster.template_id
        cluster.size += 1
        self._changed.add(cluster.template_id)
        return cluster

    def add_many(self, contents: Iterable[str]) -> list[int]:
        """Mine messages in order, one by one; their template ids."""
        return [self.add(c).template_id for c in contents]

    def add_batch(self, contents: Sequence[str]) -> npt.NDArray[np.int64]:
        """Mine a batch of messages; their template ids, same result as :meth:`add_many`.

        Masking runs over the whole batch at once, and each distinct masked message is
        routed through the tree once, in order of first appearance, which is what the
        one-by-one path does with its cache.

        >>> miner = TemplateMiner(MinerConfig(masks=(r"\\d+",)))
        >>> miner.add_batch(["job 1 done", "job 2 done", "disk full"]).tolist()
        [1, 1, 2]
        """
        if len(contents) == 0:
            return np.zeros(0, dtype=np.int64)
        index: dict[str, int] = {}
        codes = np.array([index.setdefault(m, len(index)) for m in
                          self.masker.mask_many(contents)], dtype=np.int64)
        counts = np.bincount(codes, minlength=len(index)).tolist()
        return np.array(self._mine_distinct(list(index), counts), dtype=np.int64)[codes]

    def add_array(self, contents: pa.Array) -> npt.NDArray[np.int64]:
        """Mine an Arrow array of messages; same result as :meth:`add_batch` on its values.

        Masking runs in RE2 over the array and the masked messages are dictionary-encoded
        there, so only the distinct ones become Python strings.

        >>> miner = TemplateMiner(MinerConfig(masks=(r"\\d+",)))
        >>> miner.add_array(pa.array(["job 1 done", "job 2 done", "disk full"])).tolist()
        [1, 1, 2]
        """
        if len(contents) == 0:
            return np.zeros(0, dtype=np.int64)
        encoded = pc.dictionary_encode(self.masker.mask_array(contents))
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        texts = encoded.dictionary.to_pylist()
        counts = np.bincount(codes, minlength=len(texts)).tolist()
        return np.array(self._mine_distinct(texts, counts), dtype=np.int64)[codes]

    def _mine_distinct(self, texts: list[str], counts: list[int]) -> list[int]:
        """Route each distinct masked message once, in order; its group's id."""
        cache = self._cache
        if len(cache) + len(texts) > _CACHE_LIMIT:
            self._clear_cache()
        ids: list[int] = []
        for text, count in zip(texts, counts, strict=True):
            cluster = cache.get(text)
            if cluster is None:
                cluster = cache[text] = self._add_tokens(text.split())
                self._fresh[text] = cluster.template_id
            cluster.size += count
            ids.append(cluster.template_id)
        self._changed.update(ids)
        return ids

    # -- merging miners that worked on parts of the same input ------------------------

    def snapshot(self) -> bytes:
        """This miner as bytes, with every group's size at zero and nothing marked changed.

        A worker starts each chunk from the snapshot, so what its miner reports as
        changed, and the sizes, are that chunk's alone.
        """
        sizes = [c.size for c in self.clusters]
        changed, fresh, cleared = self._changed, self._fresh, self._cache_cleared
        try:
            for c in self.clusters:
                c.size = 0
            self._changed, self._fresh, self._cache_cleared = set(), {}, False
            return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            for c, size in zip(self.clusters, sizes, strict=True):
                c.size = size
            self._changed, self._fresh, self._cache_cleared = changed, fresh, cleared

    @staticmethod
    def from_snapshot(data: bytes) -> TemplateMiner:
        """A miner from :meth:`snapshot`'s bytes."""
        miner = pickle.loads(data)
        if not isinstance(miner, TemplateMiner):
            raise LogFormatError("a miner snapshot holds something else")
        return miner

    def absorb(self, tokens: list[str], size: int) -> Cluster:
        """Take in a group found by another miner: its template tokens (``<*>`` for variables).

        A group with the same template text is the same group; otherwise the template is
        routed like a new masked message (joining the most similar group and widening
        it, or starting one). ``size`` lines are added to the group it lands in.

        >>> miner = TemplateMiner()
        >>> miner.add("job 1 took 30 ms").template_id
        1
        >>> cluster = miner.absorb("job <*> took <*>".split(), 41)
        >>> cluster.template_id, cluster.size
        (1, 42)
        """
        text = " ".join(tokens)
        cluster = self._templates.get(text)
        if cluster is None:
            cluster = self._add_tokens(list(tokens))
        cluster.size += size
        self._changed.add(cluster.template_id)
        return cluster

    def widen(self, template_id: int, tokens: list[str], size: int) -> None:
        """Widen a known group by a template another miner derived from it; add ``size``."""
        cluster = self.cluster(template_id)
        if len(tokens) == len(cluster.tokens):
            self._generalise(cluster, tokens)
        cluster.size += size
        self._changed.add(template_id)

    def learn(self, entries: Iterable[tuple[str, int]]) -> None:
        """Add exact-message cache entries (masked message, template id) found elsewhere."""
        for masked, template_id in entries:
            if masked in self._cache:
                continue
            if len(self._cache) >= _CACHE_LIMIT:
                self._clear_cache()
            self._cache[masked] = self.cluster(template_id)
            self._fresh[masked] = template_id

    def restore(self, template_id: int, template: str, size: int, route: str = "") -> None:
        """Put back a group saved earlier (ids must come in increasing order)."""
        if template_id != len(self.clusters) + 1:
            raise LogFormatError(f"template ids must be restored in order, got {template_id}")
        cluster = self._new_cluster((route or template).split())
        self._set_tokens(cluster, template.split())
        cluster.size = size
        self._changed.discard(template_id)

    def restore_cache(self, entries: Iterable[tuple[str, int]]) -> None:
        """Put back saved entries of the exact-message cache (masked message, template id).

        The cache sends a message seen before to the group it joined then, whatever the
        group's template has become; without it a restored miner could start a second
        group with the same template.
        """
        for masked, template_id in entries:
            self._cache[masked] = self.cluster(template_id)

    def take_cache_changes(self) -> tuple[bool, list[tuple[str, int]]]:
        """Whether the cache was emptied, and its entries added, since the last call."""
        cleared, fresh = self._cache_cleared, list(self._fresh.items())
        self._cache_cleared = False
        self._fresh.clear()
        return cleared, fresh

    def _clear_cache(self) -> None:
        self._cache.clear()
        self._fresh.clear()
        self._cache_cleared = True

    def take_changed(self) -> list[Cluster]:
        """The groups created or grown since the last call (for saving them)."""
        changed = [self.clusters[i - 1] for i in sorted(self._changed)]
        self._changed.clear()
        return changed

    def cluster(self, template_id: int) -> Cluster:
        """The group with this id."""
        return self.clusters[template_id - 1]

    # -- the tree ---------------------------------------------------------------------

    def _add_tokens(self, tokens: list[str]) -> Cluster:
        leaf = self._search(tokens)
        match = self._best_match(leaf.clusters, tokens) if leaf is not None else None
        if match is None:
            if self.config.join_by_words:
                same_words = self._by_words.get(_words(tokens))
                if same_words:
                    return same_words[0]
            return self._new_cluster(tokens)
        self._generalise(match, tokens)
        return match

    def _search(self, tokens: list[str]) -> _Node | None:
        node = self._root.get(len(tokens))
        if node is None:
            return None
        for token in tokens[: self._routing_tokens]:
            child = node.children.get(token)
            if child is None:
                child = node.children.get(WILDCARD)
                if child is None:
                    return None
            node = child
        return node

    def _best_match(self, clusters: list[Cluster], tokens: list[str]) -> Cluster | None:
        best: Cluster | None = None
        best_key = (-1.0, -1)
        n = len(tokens)
        drain = self.config.similarity == "drain"
        # Positions that may face the same variable in a template: "<*>" itself for
        # Drain, and for "constants" also a token with a masked part (``uid=<*>``).
        if drain:
            varying = [i for i, t in enumerate(tokens) if t == WILDCARD]
        else:
            varying = [i for i, t in enumerate(tokens) if WILDCARD in t]
        for cluster in clusters:
            template = cluster.tokens
            equal = sum(map(str.__eq__, template, tokens))
            both = sum(1 for i in varying if template[i] == tokens[i]) if varying else 0
            compared = n if drain else n - both
            key = ((equal - both) / compared if compared else 1.0, len(cluster.wildcards))
            if key > best_key:
                best, best_key = cluster, key
        if best is None or best_key[0] < self.config.sim_threshold:
            return None
        return best

    def _generalise(self, cluster: Cluster, tokens: list[str]) -> None:
        template = cluster.tokens
        if template == tokens:
            return
        merged = [a if a == b else WILDCARD for a, b in zip(template, tokens, strict=True)]
        if merged != template:
            self._set_tokens(cluster, merged)

    def _new_cluster(self, tokens: list[str]) -> Cluster:
        wild = [i for i, t in enumerate(tokens) if t == WILDCARD]
        cluster = Cluster(len(self.clusters) + 1, list(tokens), 0, wild, " ".join(tokens))
        self.clusters.append(cluster)
        self._templates.setdefault(cluster.template, cluster)
        self._changed.add(cluster.template_id)
        self._insert(cluster)
        self._by_words.setdefault(_words(cluster.tokens), []).append(cluster)
        return cluster

    def _set_tokens(self, cluster: Cluster, tokens: list[str]) -> None:
        """Change a template, keeping the index by constant words a function of templates.

        The groups under one key stay in id order, so the oldest is the one joined, as
        in a miner restored from the templates alone.
        """
        if self._templates.get(cluster.template) is cluster:
            del self._templates[cluster.template]
        old, new = _words(cluster.tokens), _words(tokens)
        cluster.tokens = tokens
        cluster.wildcards = [i for i, t in enumerate(tokens) if t == WILDCARD]
        self._templates.setdefault(cluster.template, cluster)
        if old == new:
            return
        group = self._by_words[old]
        group.remove(cluster)
        if not group:
            del self._by_words[old]
        bisect.insort(self._by_words.setdefault(new, []), cluster, key=_template_id)

    def _insert(self, cluster: Cluster) -> None:
        tokens = cluster.tokens
        node = self._root.setdefault(len(tokens), _Node())
        for token in tokens[: self._routing_tokens]:
            node = self._child_for(node, token)
        node.clusters.append(cluster)

    def _child_for(self, node: _Node, token: str) -> _Node:
        children = node.children
        if token in children:
            return children[token]
        if _has_digit(token):
            return children.setdefault(WILDCARD, _Node())
        limit = self.config.max_children
        if WILDCARD in children:
            if len(children) < limit:
                return children.setdefault(token, _Node())
            return children[WILDCARD]
        if len(children) + 1 < limit:
            return children.setdefault(token, _Node())
        return children.setdefault(WILDCARD, _Node())
