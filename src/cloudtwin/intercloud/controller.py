"""The federation controller: sites, federated networks and segments, one token per site, two-sided
consent, and state kept in a store so that a restart loses nothing.

Every change is made on a copy of the state, checked, saved through the store, and only
then becomes the controller's state: a refused request or a failed save leaves nothing
behind. Creating an object that already exists with the same content is a no-op (an
agent or client that retries after a crash duplicates nothing); with other content it is
refused (409). Only hashes of tokens are kept.

One writer at a time: a server answers requests from several threads, and each public
method holds the controller's lock from its first read to its save, so a change is never
made on a state that another thread is about to replace, and a read never sees another
thread's unsaved copy.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import ipaddress
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from itertools import combinations
from typing import ParamSpec, Protocol, TypeVar, cast

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from cloudtwin.errors import AccessError, FederationError
from cloudtwin.intercloud.objects import (
    DesiredSegment,
    NetworkRequest,
    NetworkStatus,
    Peer,
    SegmentRequest,
    SiteDesired,
    SiteReport,
    SiteRequest,
)
from cloudtwin.scenario.federation import DEFAULT_GLOBAL_POOL

__all__ = [
    "DEFAULT_GATEWAY_POOL",
    "FederationController",
    "MemoryStore",
    "NetworkView",
    "SegmentView",
    "SiteCreated",
    "SiteView",
    "StateSnapshot",
    "StateStore",
    "hash_token",
]

DEFAULT_GATEWAY_POOL = "198.18.0.0/15"
"""Where gateway WAN addresses come from when a site does not give one (RFC 2544 test range)."""

STATE_VERSION = 1


class StateStore(Protocol):
    """Where the controller keeps its state: the edge (CLI, service) decides (a file, a database).

    The state is a JSON object: what `load` gives is checked (`check_state`) before use.
    """

    def load(self) -> Mapping[str, object] | None:
        """The saved state, or None when nothing was saved yet."""

    def save(self, state: Mapping[str, object]) -> None:
        """Replace the saved state with `state`, all or nothing."""


class MemoryStore:
    """A store in memory (tests, one-shot planning); `saves` counts the writes."""

    def __init__(self) -> None:
        self.state: dict[str, object] | None = None
        self.saves = 0

    def load(self) -> dict[str, object] | None:
        """A copy of the saved state."""
        return copy.deepcopy(self.state)

    def save(self, state: Mapping[str, object]) -> None:
        """Keep a JSON round-tripped copy (what a file would hold)."""
        self.state = json.loads(json.dumps(state))
        self.saves += 1


def hash_token(token: str) -> str:
    """The SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def _empty(admin_hash: str) -> _State:
    return {
        "version": STATE_VERSION,
        "generation": 0,
        "admin": admin_hash,
        "next_gateway": 1,
        "next_global": 0,
        "global_pool": DEFAULT_GLOBAL_POOL,
        "sites": {},
        "networks": {},
        "segments": {},
        "reports": {},
    }


# The records of the state, their keys in the order the controller writes them.
class _SiteRecord(TypedDict):
    flavour: str
    gateway: str
    token: str


class _NetworkRecord(TypedDict):
    tenant: str
    mode: str
    sites: list[str]
    vni: int


class SegmentView(TypedDict):
    """A site's segment of a federated network (its consent), as kept and as the API shows it."""

    network: str
    tenant: str
    vni: int
    address: str
    endpoints: int
    site: str
    global_block: str


class _RealisedRecord(TypedDict):
    network: str
    peers: list[str]


class _ReportRecord(TypedDict):
    generation: int
    realised: list[_RealisedRecord]


class SiteView(TypedDict):
    """A site as the API shows it (never its token hash)."""

    name: str
    flavour: str
    gateway: str


class SiteCreated(SiteView):
    """A site just registered, with its token (shown this once)."""

    token: str


class NetworkView(TypedDict):
    """A federated network as the API shows it."""

    name: str
    tenant: str
    mode: str
    sites: list[str]
    vni: int


class _PublicSite(TypedDict):
    flavour: str
    gateway: str


class StateSnapshot(TypedDict):
    """The controller's state without token hashes (`federate status --json`, backups)."""

    version: int
    generation: int
    next_gateway: int
    next_global: int
    global_pool: str
    sites: dict[str, _PublicSite]
    networks: dict[str, _NetworkRecord]
    segments: dict[str, SegmentView]
    reports: dict[str, _ReportRecord]


class _State(TypedDict):
    version: int
    generation: int
    admin: str
    next_gateway: int
    next_global: int
    global_pool: str
    sites: dict[str, _SiteRecord]
    networks: dict[str, _NetworkRecord]
    segments: dict[str, SegmentView]
    reports: dict[str, _ReportRecord]


_STATE = TypeAdapter(_State)


def check_state(saved: Mapping[str, object]) -> _State:
    """The saved state, typed; FederationError naming the first field of it that is missing,
    of the wrong type, or refers to a site or network the state does not hold (a file edited
    by hand or cut short must not crash the controller later, half-way through a change)."""
    if saved.get("version") != STATE_VERSION:
        raise FederationError("state.version", f"unknown state version {saved.get('version')!r}")
    try:
        _STATE.validate_python(saved, strict=True)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in ("state", *first["loc"]))
        raise FederationError(where, first["msg"].lower()) from err
    state = cast(_State, saved)  # validated just above; kept as given (its key order, its lists)
    for name, network in state["networks"].items():
        for site in network["sites"]:
            if site not in state["sites"]:
                raise FederationError(f"state.networks.{name}.sites", f"no site named {site!r}")
    for key, segment in state["segments"].items():
        if segment["network"] not in state["networks"] or segment["site"] not in state["sites"]:
            raise FederationError(
                f"state.segments.{key}", "refers to a network or site the state does not hold"
            )
        try:
            _span(segment["address"], 1)
            if segment["global_block"]:
                ipaddress.IPv4Network(segment["global_block"])
        except ValueError as err:
            raise FederationError(f"state.segments.{key}.address", str(err)) from err
    try:
        ipaddress.IPv4Network(state["global_pool"])
    except ValueError as err:
        raise FederationError("state.global_pool", str(err)) from err
    return state


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run `method` holding its controller's lock (the first argument is the controller)."""

    @functools.wraps(method)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with cast(FederationController, args[0])._lock:
            return method(*args, **kwargs)

    return run


def _key(network: str, site: str) -> str:
    return f"{network}@{site}"


class FederationController:
    """The federation's one source of desired state, behind per-site tokens."""

    def __init__(self, store: StateStore, admin_token: str) -> None:
        if not admin_token:
            raise AccessError("token", "the controller needs an admin token", 401)
        self._store = store
        saved = store.load()
        if saved is None:
            state = _empty(hash_token(admin_token))
            store.save(state)
        else:
            state = check_state(saved)
        if not hmac.compare_digest(state["admin"], hash_token(admin_token)):
            raise AccessError("token", "the admin token does not match the saved controller state", 403)
        self._state = state
        self._working: _State | None = None
        self._lock = threading.RLock()

    # -- transactions -------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group changes: all are saved at the end, or none if anything is refused. The
        controller's lock is held throughout: another thread waits for the save."""
        with self._lock:
            if self._working is not None:
                yield
                return
            self._working = copy.deepcopy(self._state)
            try:
                yield
                self._working["generation"] += 1
                self._store.save(self._working)
                self._state = self._working
            finally:
                self._working = None

    @property
    def _s(self) -> _State:
        return self._working if self._working is not None else self._state

    # -- authorisation ------------------------------------------------------------------
    def _is_admin(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self._s["admin"], hash_token(token or ""))

    @_locked
    def knows(self, token: str | None) -> bool:
        """Whether `token` is the admin's or a site's (a front end may let such a caller read)."""
        if not token:
            return False
        digest = hash_token(token)
        held = [self._s["admin"], *(site["token"] for site in self._s["sites"].values())]
        return any(hmac.compare_digest(digest, h) for h in held)

    def _admin(self, token: str | None) -> None:
        if not token:
            raise AccessError("token", "missing token", 401)
        if not self._is_admin(token):
            raise AccessError("token", "this token is not the federation admin's", 403)

    def _site(self, token: str | None, site: str) -> _SiteRecord:
        if not token:
            raise AccessError("token", "missing token", 401)
        record = self._s["sites"].get(site)
        if record is None:
            raise FederationError("site", f"unknown site {site!r}", 404)
        if not hmac.compare_digest(record["token"], hash_token(token)):
            raise AccessError("token", f"this token does not grant site {site!r}", 403)
        return record

    # -- sites --------------------------------------------------------------------------
    @_locked
    def add_site(self, admin_token: str | None, request: SiteRequest, site_token: str) -> SiteView:
        """Register a site with the token its operator will use (only its hash is kept)."""
        self._admin(admin_token)
        with self.transaction():
            sites = self._s["sites"]
            existing = sites.get(request.name)
            if existing is not None:
                same = existing["flavour"] == request.flavour and hmac.compare_digest(
                    existing["token"], hash_token(site_token)
                )
                if same and request.gateway in (None, existing["gateway"]):
                    return self.site_view(request.name)
                raise FederationError("name", f"site {request.name!r} already exists", 409)
            gateway = request.gateway or self._next_gateway()
            if any(s["gateway"] == gateway for s in sites.values()):
                raise FederationError(
                    "gateway", f"gateway address {gateway} is already used by another site", 409
                )
            sites[request.name] = {
                "flavour": request.flavour,
                "gateway": gateway,
                "token": hash_token(site_token),
            }
        return self.site_view(request.name)

    def _next_gateway(self) -> str:
        pool = ipaddress.IPv4Network(DEFAULT_GATEWAY_POOL)
        index = self._s["next_gateway"]
        self._s["next_gateway"] = index + 1
        return str(pool.network_address + index)

    @_locked
    def site_view(self, name: str) -> SiteView:
        """A site as the API shows it (never its token hash)."""
        record = self._s["sites"][name]
        return {"name": name, "flavour": record["flavour"], "gateway": record["gateway"]}

    @_locked
    def sites(self) -> list[SiteView]:
        """Every site."""
        return [self.site_view(n) for n in sorted(self._s["sites"])]

    # -- networks -----------------------------------------------------------------------
    @_locked
    def create_network(self, token: str | None, request: NetworkRequest) -> NetworkView:
        """A federated network (by the admin, or by a site taking part in it)."""
        self._network_auth(token, request.sites)
        with self.transaction():
            networks = self._s["networks"]
            existing = networks.get(request.name)
            if existing is not None:
                same = (existing["tenant"], existing["mode"], existing["sites"]) == (
                    request.tenant, request.mode, list(request.sites)
                )
                if same and request.vni in (None, existing["vni"]):
                    return self.network_view(request.name)
                raise FederationError("name", f"federated network {request.name!r} already exists", 409)
            for k, site in enumerate(request.sites):
                if site not in self._s["sites"]:
                    raise FederationError(f"sites.{k}", f"unknown site {site!r}")
            if len(set(request.sites)) != len(request.sites):
                raise FederationError("sites", "a site is listed twice")
            used = {n["vni"]: name for name, n in networks.items()}
            if request.vni is not None and request.vni in used:
                raise FederationError(
                    "vni",
                    f"VNI {request.vni} is already used by federated network {used[request.vni]!r}",
                    409,
                )
            vni = request.vni if request.vni is not None else self._free_vni(used)
            networks[request.name] = {
                "tenant": request.tenant, "mode": request.mode, "sites": list(request.sites), "vni": vni
            }
        return self.network_view(request.name)

    def _network_auth(self, token: str | None, sites: tuple[str, ...]) -> None:
        if self._is_admin(token):
            return
        for site in sites:
            record = self._s["sites"].get(site)
            if token and record is not None and hmac.compare_digest(record["token"], hash_token(token)):
                return
        if not token:
            raise AccessError("token", "missing token", 401)
        raise AccessError("token", "only the admin or a site of the network may change it", 403)

    def _site_of(self, token: str | None) -> str | None:
        digest = hash_token(token or "")
        for name, record in self._s["sites"].items():
            if token and hmac.compare_digest(record["token"], digest):
                return name
        return None

    @staticmethod
    def _free_vni(used: dict[int, str]) -> int:
        vni = 10_000
        while vni in used:
            vni += 1
        return vni

    @_locked
    def delete_network(self, token: str | None, name: str) -> None:
        """Remove a federated network and every segment of it: by the admin, or by a site of
        it once every other site has withdrawn its consent (a site's token never takes away
        another site's segment)."""
        network = self._network(name)
        self._network_auth(token, tuple(network["sites"]))
        if not self._is_admin(token):
            caller = self._site_of(token)
            others = sorted(
                seg["site"] for seg in self._s["segments"].values()
                if seg["network"] == name and seg["site"] != caller
            )
            if others:
                raise AccessError(
                    "token",
                    f"{', '.join(repr(o) for o in others)} still consent to {name!r}: each withdraws "
                    "its segment first, or the admin deletes the network",
                    403,
                )
        with self.transaction():
            del self._s["networks"][name]
            for key in [k for k, seg in self._s["segments"].items() if seg["network"] == name]:
                del self._s["segments"][key]

    def _network(self, name: str, field: str = "network") -> _NetworkRecord:
        network = self._s["networks"].get(name)
        if network is None:
            raise FederationError(field, f"unknown federated network {name!r}", 404)
        return network

    @_locked
    def network_view(self, name: str) -> NetworkView:
        """A federated network as the API shows it."""
        return {"name": name, **self._network(name)}

    @_locked
    def networks(self) -> list[NetworkView]:
        """Every federated network."""
        return [self.network_view(n) for n in sorted(self._s["networks"])]

    # -- segments (a site's consent) ----------------------------------------------------
    @_locked
    def add_segment(self, token: str | None, site: str, request: SegmentRequest) -> SegmentView:
        """Site `site` consents: its tenant network joins the federated network."""
        self._site(token, site)
        network = self._network(request.network)
        if site not in network["sites"]:
            raise FederationError(
                "network", f"site {site!r} is not one of the sites of {request.network!r}", 403
            )
        if request.tenant != network["tenant"]:
            raise FederationError(
                "tenant",
                f"{request.network!r} belongs to tenant {network['tenant']!r}, not {request.tenant!r}",
            )
        key = _key(request.network, site)
        with self.transaction():
            existing = self._s["segments"].get(key)
            if existing is not None:
                asked = (request.network, request.tenant, request.vni, request.address, request.endpoints)
                kept = (existing["network"], existing["tenant"], existing["vni"], existing["address"],
                        existing["endpoints"])
                if asked == kept:
                    return existing
                raise FederationError(
                    "network", f"site {site!r} already has a segment of {request.network!r}", 409
                )
            self._check_segment(site, network, request)
            segment: SegmentView = {
                "network": request.network, "tenant": request.tenant, "vni": request.vni,
                "address": request.address, "endpoints": request.endpoints, "site": site,
                "global_block": self._global_block(network, request),
            }
            self._s["segments"][key] = segment
        return segment

    def _check_segment(self, site: str, network: _NetworkRecord, request: SegmentRequest) -> None:
        for seg in self._s["segments"].values():
            if seg["site"] == site and seg["vni"] == request.vni:
                raise FederationError(
                    "vni", f"VNI {request.vni} at site {site!r} is already used by {seg['network']!r}", 409
                )
        mine = _span(request.address, request.endpoints)
        for seg in self._s["segments"].values():
            if seg["network"] != request.network:
                continue
            theirs = _span(seg["address"], seg["endpoints"])
            if network["mode"] == "l3-routed" and mine.subnet.overlaps(theirs.subnet):
                raise FederationError(
                    "address",
                    f"l3-routed needs unique prefixes: {mine.subnet} overlaps {theirs.subnet} "
                    f"at {seg['site']!r}",
                )
            if network["mode"] == "l2-stretch":
                if mine.subnet != theirs.subnet:
                    raise FederationError(
                        "address",
                        f"an l2-stretch network needs one subnet: {mine.subnet}, "
                        f"{theirs.subnet} at {seg['site']!r}",
                    )
                if mine.first <= theirs.last and theirs.first <= mine.last:
                    raise FederationError(
                        "address",
                        f"l2-stretch refuses duplicate addresses: {mine.text} clashes with "
                        f"{theirs.text} at {seg['site']!r}",
                    )
        if not mine.first > int(mine.subnet.network_address) or mine.last >= int(
            mine.subnet.broadcast_address
        ):
            raise FederationError(
                "endpoints", f"{request.endpoints} endpoints from {request.address} do not fit {mine.subnet}"
            )

    def _global_block(self, network: _NetworkRecord, request: SegmentRequest) -> str:
        if network["mode"] != "global-nat":
            return ""
        if _span(request.address, 1).subnet.overlaps(ipaddress.IPv4Network(self._s["global_pool"])):
            raise FederationError(
                "address", f"{request.address} overlaps the global pool {self._s['global_pool']}"
            )
        size = 1 << max(request.endpoints - 1, 0).bit_length()
        pool = ipaddress.IPv4Network(self._s["global_pool"])
        start = -(-self._s["next_global"] // size) * size
        if start + size > pool.num_addresses:
            raise FederationError(
                "endpoints", f"the global pool {pool} has no room for {size} more addresses", 409
            )
        self._s["next_global"] = start + size
        return str(ipaddress.IPv4Network((int(pool.network_address) + start, 32 - size.bit_length() + 1)))

    @_locked
    def delete_segment(self, token: str | None, site: str, network: str) -> None:
        """Site `site` withdraws its consent (idempotent)."""
        self._site(token, site)
        with self.transaction():
            self._s["segments"].pop(_key(network, site), None)

    @_locked
    def segments(self, site: str | None = None) -> list[SegmentView]:
        """Segments, all or of one site."""
        return [s for _, s in sorted(self._s["segments"].items()) if site is None or s["site"] == site]

    # -- agents -------------------------------------------------------------------------
    @_locked
    def desired(self, token: str | None, site: str) -> SiteDesired:
        """What `site`'s agent is to realise: its segments, each with the peers that consented."""
        record = self._site(token, site)
        mine = [s for s in self._s["segments"].values() if s["site"] == site]
        return SiteDesired(
            site=site,
            flavour=record["flavour"],
            gateway=record["gateway"],
            generation=self._s["generation"],
            segments=tuple(self._desired_segment(s) for s in sorted(mine, key=lambda s: s["network"])),
        )

    def _desired_segment(self, segment: SegmentView) -> DesiredSegment:
        network = self._s["networks"][segment["network"]]
        peers = []
        for other in self._s["segments"].values():
            if other["network"] != segment["network"] or other["site"] == segment["site"]:
                continue
            prefix = {
                "l3-routed": str(_span(other["address"], 1).subnet),
                "global-nat": other["global_block"],
            }
            peers.append(
                Peer(
                    site=other["site"],
                    gateway=self._s["sites"][other["site"]]["gateway"],
                    prefix=prefix.get(network["mode"], ""),
                )
            )
        return DesiredSegment(
            network=segment["network"],
            mode=network["mode"],
            federated_vni=network["vni"],
            tenant=segment["tenant"],
            vni=segment["vni"],
            address=segment["address"],
            endpoints=segment["endpoints"],
            global_block=segment["global_block"],
            peers=tuple(sorted(peers, key=lambda p: p.site)),
        )

    @_locked
    def report(self, token: str | None, site: str, report: SiteReport) -> None:
        """An agent's account of what its site holds."""
        self._site(token, site)
        with self.transaction():
            self._s["reports"][site] = cast(_ReportRecord, report.model_dump(mode="json"))

    # -- status -------------------------------------------------------------------------
    @_locked
    def status(self) -> list[NetworkStatus]:
        """Each federated network: ACTIVE when every pair of its sites consented and realised it."""
        return [self._status(name, n) for name, n in sorted(self._s["networks"].items())]

    def _realised(self, site: str, network: str) -> set[str]:
        report = self._s["reports"].get(site)
        for seg in report["realised"] if report is not None else []:
            if seg["network"] == network:
                return set(seg["peers"])
        return set()

    def _status(self, name: str, network: _NetworkRecord) -> NetworkStatus:
        consented = tuple(s for s in network["sites"] if _key(name, s) in self._s["segments"])
        links: dict[str, str] = {}
        for a, b in combinations(network["sites"], 2):
            both = a in consented and b in consented
            up = both and b in self._realised(a, name) and a in self._realised(b, name)
            links[f"{a}<->{b}"] = "ACTIVE" if up else "PENDING"
        everyone = len(consented) == len(network["sites"])
        if not consented:
            status = "DOWN"
        elif everyone and all(v == "ACTIVE" for v in links.values()):
            status = "ACTIVE"
        else:
            status = "PENDING"
        return NetworkStatus(
            name=name,
            tenant=network["tenant"],
            mode=network["mode"],
            federated_vni=network["vni"],
            sites=tuple(network["sites"]),
            consented=consented,
            status=status,
            interconnections=links,
        )

    @_locked
    def snapshot(self) -> StateSnapshot:
        """The state without token hashes (for `status --json` and backups)."""
        state = copy.deepcopy(self._state)
        public: dict[str, object] = {k: v for k, v in state.items() if k != "admin"}
        public["sites"] = {
            n: _PublicSite(flavour=s["flavour"], gateway=s["gateway"]) for n, s in state["sites"].items()
        }
        return cast(StateSnapshot, public)  # the state's keys in its order, less the hashes


class _Span:
    def __init__(self, address: str, endpoints: int) -> None:
        iface = ipaddress.IPv4Interface(address)
        self.subnet = iface.network
        self.first = int(iface.ip)
        self.last = self.first + endpoints - 1
        self.text = f"{iface.ip}-{ipaddress.IPv4Address(self.last)}"


def _span(address: str, endpoints: int) -> _Span:
    return _Span(address, endpoints)
