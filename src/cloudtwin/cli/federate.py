"""`cloudtwin federate ...`: plan, apply and check a federation of sites; realise it in namespaces."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import typer
from rich.table import Table

from cloudtwin.cli.checks import check_scenario_file
from cloudtwin.cli.output import emit_json, is_cloud_file, read_cloud, read_scenario_text, stdout, write_json
from cloudtwin.errors import FederationError, ScenarioError, needs_extra

if TYPE_CHECKING:  # types only: what a command runs is imported when it runs (help stays quick)
    from cloudtwin.intercloud.controller import FederationController
    from cloudtwin.intercloud.plan import FederationPlan

__all__ = ["app"]

TOKEN_ENV = "CLOUDTWIN_FEDERATION_TOKEN"

app = typer.Typer(
    help=(
        "Federate independent sites: plan a multi-site scenario (sites, tenants, gateways, WAN "
        "links, federated networks), apply it to a federation controller and its sites' agents, "
        "check reachability, and realise it in real Linux network namespaces (up/down, as root).\n\n"
        "Example:  cloudtwin federate plan examples/intercloud.yaml"
    ),
    no_args_is_help=True,
)

SCENARIO = typer.Argument(
    ...,
    help="Multi-site scenario YAML file (with sites:).",
    show_default=False,
    callback=check_scenario_file,
)
SET = typer.Option(None, "--set", "-s", help="Override a key: --set networks.0.mode=global-nat (repeatable).")
JSON = typer.Option(False, "--json", help="Print the result as JSON on stdout and nothing else.")
STATE = typer.Option(
    Path("cloudtwin-federation.json"), "--state", help="The controller's state file (its tokens beside it)."
)
PREFIX = typer.Option(None, "--prefix", help="Namespace name prefix (default: ctw-SCENARIO_NAME).")
DB = typer.Option(None, "--db", help="Also write the run's operations data here for `cloudtwin diagnose`.")


def _plan(path: Path, overrides: list[str] | None) -> FederationPlan:
    """The plan of a multi-site scenario, or of the federation part of a one-cloud file."""
    from cloudtwin.intercloud.plan import plan_federation
    from cloudtwin.scenario.federation import load_federation

    if is_cloud_file(path):
        return plan_federation(read_cloud(path, overrides).federation_scenario())
    text = read_scenario_text(path)
    try:
        return plan_federation(load_federation(text, str(path), overrides or ()))
    except FederationError as err:
        raise ScenarioError(f"{path}: {err}") from err


class _PlannedNetwork(TypedDict):
    name: str
    mode: str
    federated_vni: int
    sites: list[str]
    endpoints: int


def plan(scenario: Path = SCENARIO, overrides: list[str] = SET, as_json: bool = JSON) -> None:
    """Validate a multi-site scenario and show its plan: segments, endpoints, tunnels, tunnel cost.

    Example:  cloudtwin federate plan examples/intercloud.yaml --set networks.0.mode=global-nat
    """
    planned = _plan(scenario, overrides)
    summary = planned.summary()
    networks: list[_PlannedNetwork] = []
    for n, name in enumerate(planned.network_names):
        segs = planned.network_segments(n)
        networks.append(
            {
                "name": name,
                "mode": planned.mode_of(n),
                "federated_vni": int(planned.network_vni[n]),
                "sites": [planned.segment_name(int(s)) for s in segs],
                "endpoints": int(planned.seg_count[segs].sum()),
            }
        )
    if as_json:
        emit_json({**summary, "networks": networks})
        return
    table = Table(
        title=f"federation {summary['name']}: {summary['sites']} sites, {summary['endpoints']} endpoints, "
        f"{summary['tunnels']} tunnels",
        title_justify="left",
    )
    for column in ("network", "mode", "VNI", "segments", "endpoints"):
        table.add_column(column)
    for net in networks:
        table.add_row(
            net["name"],
            net["mode"],
            str(net["federated_vni"]),
            ", ".join(net["sites"]),
            str(net["endpoints"]),
        )
    stdout.print(table)
    for mode, cost in summary["encapsulation"].items():
        stdout.print(
            f"{mode} over {cost['encapsulation']}: {cost['overhead_bytes']} header bytes, inner MTU "
            f"{cost['inner_mtu']}, MSS {cost['mss_bytes']}, goodput {cost['goodput_fraction']:.1%}"
        )


def _tokens_path(state: Path) -> Path:
    return state.with_name(state.name + ".tokens")


class _Tokens(TypedDict, total=False):
    """The tokens file beside the state: the admin's token and each site's."""

    admin: str
    sites: dict[str, str]


#: A tokens file holds an admin token and one per site: far less than this.
_TOKENS_MAX_BYTES = 1 << 20


def _read_tokens(state: Path) -> _Tokens:
    """The tokens beside `state` ({} when there are none yet); refused when another user
    could read them (as `cloudtwin serve` refuses its token file) or when it is too big."""
    from cloudtwin.store.private import check_private

    path = _tokens_path(state)
    try:
        info = check_private(path, "tokens file", field="tokens")
    except FileNotFoundError:
        return {}
    if info.st_size > _TOKENS_MAX_BYTES:
        raise FederationError("tokens", f"{path}: {info.st_size:,} bytes is not a tokens file")
    try:
        tokens = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise FederationError("tokens", f"{path}: cannot read the tokens file") from err
    sites = tokens.get("sites", {}) if isinstance(tokens, dict) else None
    if (
        not isinstance(sites, dict)
        or not isinstance(tokens.get("admin", ""), str)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in sites.items())
    ):
        raise FederationError(
            "tokens", f"{path}: not a tokens file (an admin token and a sites mapping of tokens)"
        )
    return cast(_Tokens, dict(tokens))  # checked just above


def _controller(state: Path) -> tuple[FederationController, _Tokens]:
    from cloudtwin.intercloud.controller import FederationController
    from cloudtwin.intercloud.federate import new_token
    from cloudtwin.store.federation import JsonFileStore

    tokens = _read_tokens(state)
    admin = os.environ.get(TOKEN_ENV) or tokens.get("admin")
    if not admin:
        if state.exists():
            raise FederationError("token", f"{state} exists: give its admin token in {TOKEN_ENV}", 401)
        admin = new_token()
    tokens["admin"] = admin
    try:
        return FederationController(JsonFileStore(state), admin), tokens
    except FederationError as err:
        if not err.field.startswith("state."):
            raise
        raise FederationError(err.field, f"{err.reason} (in {state})", err.status) from err


def apply(
    scenario: Path = SCENARIO, overrides: list[str] = SET, state: Path = STATE, as_json: bool = JSON
) -> None:
    """Put the scenario into the controller (all or nothing) and reconcile every site's agent.

    Example:  cloudtwin federate apply examples/intercloud.yaml --state fed/state.json
    """
    from cloudtwin.intercloud.federate import apply_plan, modelled_adapter, new_token, run_agents
    from cloudtwin.store.private import PRIVATE_MODE

    planned = _plan(scenario, overrides)
    controller, tokens = _controller(state)
    sites = tokens.setdefault("sites", {})
    for site in planned.scenario.sites:
        sites.setdefault(site.name, new_token())
    apply_plan(controller, planned, tokens["admin"], sites)
    write_json(_tokens_path(state), tokens, mode=PRIVATE_MODE)
    agents = {s.name: (sites[s.name], modelled_adapter(s.flavour)) for s in planned.scenario.sites}
    run_agents(controller, agents)
    _show_status(controller, as_json)


def _show_status(controller: FederationController, as_json: bool) -> None:
    statuses = controller.status()
    if as_json:
        emit_json({"sites": controller.sites(), "networks": [s.model_dump(mode="json") for s in statuses]})
        return
    table = Table(title="federated networks", title_justify="left")
    for column in ("network", "tenant", "mode", "status", "interconnections"):
        table.add_column(column)
    for s in statuses:
        links = ", ".join(f"{k} {v}" for k, v in s.interconnections.items())
        table.add_row(s.name, s.tenant, s.mode, s.status, links)
    stdout.print(table)


def status(state: Path = STATE, as_json: bool = JSON) -> None:
    """Show each federated network and interconnection: ACTIVE when both sides consented and realised it.

    Example:  cloudtwin federate status --state fed/state.json --json
    """
    if not state.exists():
        raise FederationError(
            "state", f"{state}: no controller state here (run cloudtwin federate apply first)", 404
        )
    controller, _ = _controller(state)
    _show_status(controller, as_json)


def reachability(
    scenario: Path = SCENARIO,
    overrides: list[str] = SET,
    live: bool = typer.Option(
        False, "--live", help="Ping for real in the namespaces that `federate up` built instead of the twin."
    ),
    prefix: str = PREFIX,
    as_json: bool = JSON,
) -> None:
    """Which endpoints reach which: walked through the twin's gateway tables, or pinged for real (--live).

    Example:  cloudtwin federate reachability examples/intercloud.yaml --json
    """
    from cloudtwin.intercloud.dataplane import reachability as twin_reachability

    planned = _plan(scenario, overrides)
    names = planned.endpoint_names
    if live:
        from cloudtwin.intercloud.realise import live_reachability, realise

        matrix = live_reachability(realise(planned, prefix or f"ctw-{planned.scenario.name}"))
    else:
        matrix = twin_reachability(planned)
    pairs = [[names[a], names[b]] for a in range(len(names)) for b in range(len(names)) if matrix[a, b]]
    if as_json:
        emit_json({"endpoints": names, "reachable": pairs})
        return
    for i, name in enumerate(names):
        reached = [names[j] for j in range(len(names)) if matrix[i, j]]
        stdout.print(f"{name} -> {', '.join(reached) if reached else '(none)'}")


def up(
    scenario: Path = SCENARIO, overrides: list[str] = SET, prefix: str = PREFIX, as_json: bool = JSON
) -> None:
    """Realise the federation in network namespaces (as root): endpoints, bridges, gateways, VXLAN.

    Example:  cloudtwin federate up examples/intercloud.yaml
    """
    from cloudtwin.intercloud.realise import realise

    planned = _plan(scenario, overrides)
    built = realise(planned, prefix or f"ctw-{planned.scenario.name}")
    if as_json:
        emit_json(built.to_json())
        return
    stdout.print(
        f"{len(built.namespaces)} namespaces under {built.prefix}-*, {len(built.endpoint_ns)} endpoints; "
        f"WAN shaped: {', '.join(built.shaped) or 'none'}; not available here: WAN latency (no netem)"
    )


def down(
    scenario: Path = SCENARIO, overrides: list[str] = SET, prefix: str = PREFIX, as_json: bool = JSON
) -> None:
    """Remove every namespace (and device) that `federate up` made for the scenario.

    Example:  cloudtwin federate down examples/intercloud.yaml
    """
    from cloudtwin.intercloud.realise import unrealise

    planned = _plan(scenario, overrides)
    removed = unrealise(prefix or f"ctw-{planned.scenario.name}")
    if as_json:
        emit_json({"removed": removed})
        return
    stdout.print(f"removed {len(removed)} namespaces")


def evaluate(
    scenario: Path = SCENARIO,
    overrides: list[str] = SET,
    db: Path | None = DB,
    as_json: bool = JSON,
) -> None:
    """Run the scenario's traffic over the joined sites, fault-free and with its gateway faults:
    throughput, completion, each failover's parts, the stall and the bytes delayed.

    Example:  cloudtwin federate evaluate examples/intercloud-failover.yaml --db failover.duckdb
    """
    from cloudtwin.twin.federation import simulate_federation

    run = simulate_federation(_plan(scenario, overrides))
    # twin/'s summary is a JSON object (dict[str, object]); the table reads it key by key
    summary: dict[str, Any] = run.summary()
    if db is not None:
        from cloudtwin.diagnosis.federation import emit_federation
        from cloudtwin.store.database import Store

        with Store(db) as store:
            emit_federation(store, run)
        summary["db"] = str(db)
    if as_json:
        emit_json(summary)
        return
    table = Table(
        title=f"federation {run.plan.scenario.name}: {summary['flows']} flows "
        f"({summary['inter_site_flows']} between sites)",
        title_justify="left",
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("completion, fault-free (s)", f"{summary['baseline_completion_s']:.3f}")
    table.add_row("completion, with gateway faults (s)", f"{summary['completion_s']:.3f}")
    table.add_row("aggregate (Gbps)", f"{summary['aggregate_gbps']:.2f}")
    table.add_row("bytes delayed (GB)", f"{summary['bytes_delayed'] / 1e9:.3f}")
    for fault in summary["gateway_faults"]:
        table.add_row(f"gateway {fault['site']} failover / stall (s)", f"{fault['failover_s']:.3f}")
        table.add_row(f"  flows stalled at {fault['site']}", str(fault["flows_stalled"]))
    stdout.print(table)
    if db is not None:
        stdout.print(f"operations data in {db}: cloudtwin diagnose --db {db}")


SITE_TOKEN_ENV = "CLOUDTWIN_SITE_TOKEN"
ADAPTERS = ("openstack-like", "dove-like", "linux", "command")
CONTROLLER = typer.Option("http://127.0.0.1:8750", "--controller", help="The federation controller's URL.")
ADAPTER = typer.Option(
    "openstack-like",
    "--adapter",
    help="openstack-like | dove-like (modelled in memory) | "
    "linux (namespaces, as root) | command (a program speaking JSON lines).",
)
ADAPTER_COMMAND = typer.Option(None, "--adapter-command", help="The subprocess adapter's command line.")
ADAPTER_TIMEOUT = typer.Option(
    30.0, "--adapter-timeout", help="Seconds the command adapter has to answer each request (a whole line).",
    min=0.01,
)
PERIOD = typer.Option(5.0, "--period", help="Seconds between reconciles.", min=0.01)
ONCE = typer.Option(False, "--once", help="Reconcile once and exit (exit code 2 if it fails).")
NS_PREFIX = typer.Option("ctw", "--prefix", help="Namespace name prefix of the linux adapter.")


def _adapter_argv(kind: str, command: str | None) -> list[str] | None:
    """The command adapter's argv (None for the other adapters), checked before anything runs."""
    import shlex

    if kind not in ADAPTERS:
        raise FederationError("adapter", f"unknown adapter {kind!r}; expected one of {', '.join(ADAPTERS)}")
    if kind != "command":
        return None
    try:
        argv = shlex.split(command or "")
    except ValueError as err:  # "No closing quotation", "No escaped character"
        raise FederationError("adapter_command", f"cannot split the command line: {err}") from err
    if not argv:
        raise FederationError("adapter_command", "the command adapter needs the program's command line")
    return argv


def _agent_adapter(  # noqa: ANN202
    kind: str, argv: list[str] | None, site: str, prefix: str, gateway: str, timeout_s: float
):
    from cloudtwin.intercloud.adapters.dove import DoveLikeAdapter
    from cloudtwin.intercloud.adapters.openstack import OpenStackLikeAdapter
    from cloudtwin.intercloud.adapters.process import ProcessAdapter

    if argv is not None:
        return ProcessAdapter(argv, timeout_s=timeout_s)
    if kind == "linux":
        from cloudtwin.intercloud.adapters.linux import LinuxAdapter

        return LinuxAdapter(site, prefix, gateway)
    return DoveLikeAdapter() if kind == "dove-like" else OpenStackLikeAdapter()


def agent(
    site: str = typer.Argument(..., help="The site this agent reconciles.", show_default=False),
    controller: str = CONTROLLER,
    adapter: str = ADAPTER,
    adapter_command: str | None = ADAPTER_COMMAND,
    adapter_timeout: float = ADAPTER_TIMEOUT,
    period: float = PERIOD,
    once: bool = ONCE,
    prefix: str = NS_PREFIX,
    as_json: bool = JSON,
) -> None:
    """Run a site's agent: pull the desired state, reconcile it through the adapter, report; repeat.

    The site's token comes from the CLOUDTWIN_SITE_TOKEN environment variable.

    Example:  cloudtwin federate agent east --controller http://127.0.0.1:8750 --adapter dove-like
    """
    import time

    with needs_extra("web", "federate agent"):  # httpx talks to the controller
        import httpx

        from cloudtwin.intercloud.agent import Agent
        from cloudtwin.intercloud.client import FederationClient

    argv = _adapter_argv(adapter, adapter_command)
    token = os.environ.get(SITE_TOKEN_ENV)
    if not token:
        raise FederationError("token", f"the site's token is needed in {SITE_TOKEN_ENV}", 401)
    client = FederationClient(controller)
    try:
        gateway = client.desired(token, site).gateway
    except httpx.HTTPError as err:
        client.close()
        raise FederationError("controller", f"cannot reach {controller}: {err}") from err
    made = _agent_adapter(adapter, argv, site, prefix, gateway, adapter_timeout)
    try:
        while True:
            try:
                result = Agent(site, token, client, made).reconcile()
            except (FederationError, httpx.HTTPError) as err:
                if once:
                    raise FederationError("agent", str(err).splitlines()[0]) from err
                typer.echo(f"cloudtwin: agent {site}: {str(err).splitlines()[0]}; retrying", err=True)
            else:
                if as_json:
                    emit_json(result.to_json())
                else:
                    typer.echo(
                        f"generation {result.generation}: applied {len(result.applied)}, "
                        f"deleted {len(result.deleted)}, unchanged {len(result.unchanged)}"
                    )
                if once:
                    return
            time.sleep(period)
    finally:
        made.close()
        client.close()


def serve(
    state: Path = STATE,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (localhost by default)."),
    port: int = typer.Option(8750, "--port", help="TCP port."),
) -> None:
    """Serve the federation controller's HTTP API (its OpenAPI schema at /openapi.json).

    Example:  CLOUDTWIN_FEDERATION_TOKEN=... cloudtwin federate serve --state fed/state.json --port 8750
    """
    from cloudtwin.store.private import PRIVATE_MODE

    with needs_extra("web", "federate serve"):  # fastapi and uvicorn
        import uvicorn

        from cloudtwin.intercloud.api import federation_app

    controller, tokens = _controller(state)
    if not os.environ.get(TOKEN_ENV):
        path = _tokens_path(state)
        write_json(path, tokens, mode=PRIVATE_MODE)
        typer.echo(f"admin token in {path}", err=True)
    config = uvicorn.Config(federation_app(controller), host=host, port=port, log_level="warning")
    _announcing_server()(config).run()


def _url(sockname: tuple[str, int]) -> str:
    host, port = sockname[0], sockname[1]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _announcing_server():  # noqa: ANN202 - a uvicorn.Server subclass, made once uvicorn is imported
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        """Prints the URL it serves on once its socket accepts (the port the system chose for 0)."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            listening = [s for server in self.servers for s in server.sockets]
            if self.started and listening:
                url = _url(listening[0].getsockname())
                typer.echo(f"cloudtwin: federation controller on {url} (API schema at {url}openapi.json)")

    return AnnouncingServer


app.command("plan")(plan)
app.command("apply")(apply)
app.command("status")(status)
app.command("reachability")(reachability)
app.command("up")(up)
app.command("down")(down)
app.command("evaluate")(evaluate)
app.command("agent")(agent)
app.command("serve")(serve)
