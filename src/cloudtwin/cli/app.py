"""The typer application, its sub-commands, and the one place errors become exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from cloudtwin import __version__
from cloudtwin.cli.startup import collector_paused, one_blas_thread, thawed_at_end
from cloudtwin.errors import BAD_INPUT_EXIT_CODE, CloudtwinError, exit_code_of
from cloudtwin.scenario.units import parse_int, parse_number

HELP = (
    "cloudtwin: a digital twin of a multi-tenant AI cloud.\n\n"
    "Describe a fabric, its tenants and their workloads in a YAML scenario. Simulate it "
    "and compare routing strategies (run, compare, nccl-tests, evaluate), predict LLM "
    "training and HPL on a GPU cluster (train, hpl), and analyse operations data "
    "(logs, diagnose), model smartNIC offload (nic), federate networks across clouds "
    "(federate), plan live VM migrations between clouds (migrate), and sweep any "
    "scenario keys (sweep).\n\n"
    "Example:  cloudtwin compare examples/leaf-spine-perftest.yaml "
    "--strategies ecmp,pinning"
)

#: Every command, in the order help lists them: name -> ("module:attribute", the line
#: `cloudtwin --help` shows for it). The attribute is a function or a Typer (a group of
#: sub-commands). A module is imported only when its command runs, or when its own help is
#: asked for: `cloudtwin --help` lists the commands from these lines alone (a test checks
#: each against the first paragraph of its command's help), so the listing and `nic run`
#: do not pay for the simulator's imports. `serve` lives in a peer of cli/ (DESIGN.md:
#: cli/ and service/ do not import each other).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("cloudtwin.cli.run:run", "Simulate a scenario and print its performance summary."),
    "compare": (
        "cloudtwin.cli.run:compare",
        "Simulate a scenario under several routing strategies, side by side.",
    ),
    "nccl-tests": (
        "cloudtwin.cli.nccl:nccl_tests",
        "Sweep a collective over message sizes, nccl-tests style, under each routing strategy.",
    ),
    "train": (
        "cloudtwin.cli.train:train",
        "Predict an LLM training iteration (workload.kind: training) on the scenario's cluster.",
    ),
    "hpl": ("cloudtwin.cli.train:hpl", "Predict HPL (workload.kind: hpl) on the scenario's cluster."),
    "evaluate": (
        "cloudtwin.cli.evaluate:evaluate",
        "Evaluate routing strategies on performance, resiliency and operational complexity.",
    ),
    "diagnose": (
        "cloudtwin.cli.diagnose:diagnose",
        "Rank likely root causes (links, NICs, switches, gateways, WAN links) from logs and flow "
        "telemetry, each with its evidence and the time window of its trouble.",
    ),
    "sweep": (
        "cloudtwin.cli.sweep:sweep",
        "Run a command at every point of a parameter sweep and summarise a metric over seeds.",
    ),
    "serve": (
        "cloudtwin.service.command:serve",
        "Serve the runs, jobs, logs and diagnoses of a store: an HTTP API and web pages.",
    ),
    "results": (
        "cloudtwin.cli.results:app",
        "Evaluation runs kept in the store (written by cloudtwin evaluate).",
    ),
    "logs": (
        "cloudtwin.cli.logs:app",
        "Operations logs: ingest into the store, mine templates, query, detect changes.",
    ),
    "federate": (
        "cloudtwin.cli.federate:app",
        "Federate independent sites: plan a multi-site scenario (sites, tenants, gateways, WAN "
        "links, federated networks), apply it to a federation controller and its sites' agents, "
        "check reachability, and realise it in real Linux network namespaces (up/down, as root).",
    ),
    "nic": (
        "cloudtwin.cli.nic:app",
        "The smartNIC (Janus) model: how many host cores NIC offload hands back (offload), a P4 "
        "program on real packets (run), p4c's STF packet tests (stf), and the NIC's measured boot "
        "(boot).",
    ),
    "migrate": (
        "cloudtwin.cli.migrate:app",
        "Live VM migration between clouds: how long it takes, how long the VM stops, what it costs "
        "the tenants sharing the path.",
    ),
    "calibrate": (
        "cloudtwin.cli.calibrate:app",
        "Make the twin yours: measure this machine's host datapath (datapath, root) or its live "
        "migrations (migration, QEMU) and write a profile file that scenarios and commands load.",
    ),
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cloudtwin {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """cloudtwin: a digital twin of a multi-tenant AI cloud."""


def build_app(names: tuple[str, ...] = tuple(COMMANDS)) -> typer.Typer:
    """The typer application with the commands `names` (all of them by default), each
    imported from its module."""
    built = typer.Typer(
        name="cloudtwin",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,  # plain help: no `<bool>` after flags
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(_root)
    for name in names:
        module, _, attribute = COMMANDS[name][0].partition(":")
        target = getattr(import_module(module), attribute)
        if isinstance(target, typer.Typer):
            built.add_typer(target, name=name)
        else:
            built.command(name)(target)
    return built


def __getattr__(name: str) -> Any:
    """`app`, the application with every command, built on first use."""
    if name == "app":
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _full_app() -> typer.Typer:
    return build_app()


@functools.cache
def _click_command(name: str | None = None) -> Any:
    """The click command of the application with only command `name`; with none, the
    listing (`cloudtwin`, `--help`, `--version`, an unknown command). Built once per
    process: building a command inspects its signature, which each in-process call would
    otherwise repeat."""
    return strict_numbers(typer.main.get_command(build_app((name,)))) if name else _listing()


def _listing() -> Any:
    """The application's group with every command a stand-in that holds only its help
    line: the root's help lists them all, and an unknown name is refused with the closest
    names, without importing one command module. A named command never reaches these."""
    group = typer.main.get_command(build_app(()))
    assert isinstance(group, TyperGroup)  # a Typer with a callback is a group
    group.commands = {name: TyperCommand(name=name, help=line) for name, (_, line) in COMMANDS.items()}
    return group


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; bad input (a CloudtwinError or a bad flag) is one line and exit code 2."""
    one_blas_thread()
    with thawed_at_end():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        with collector_paused():  # start-up: the command's module and typer's command
            command = _click_command(args[0] if args and args[0] in COMMANDS else None)
        code = command.main(args=argv, prog_name="cloudtwin", standalone_mode=False)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except CloudtwinError as err:
        return _fail(str(err), exit_code_of(err))
    except typer.TyperException as err:  # a bad flag or argument, found while parsing
        return _usage_error(err)
    except MemoryError:  # an estimate fell short, or limits were raised past the machine
        return _fail(
            "out of memory: the run asked for more memory than this machine could give; make "
            "the scenario smaller, or lower what --set raised (limits.memory, limits.flows)"
        )
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("cloudtwin: interrupted", err=True)
        return 130
    return code if isinstance(code, int) else 0


def strict_numbers(command: Any) -> Any:
    """`command` with every int and float flag read by the one strict number parser first:
    the flags' own coercion takes ' 5' and 'nan' as numbers."""
    for param in command.params:
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        if annotation in (int, float):
            param.process_value = functools.partial(
                _strict_value, param.process_value, parse_int if annotation is int else parse_number
            )
    for sub in getattr(command, "commands", {}).values():
        strict_numbers(sub)
    return command


def _strict_value(
    process: Callable[[Any, Any], Any],
    parse: Callable[[str], float],
    ctx: Any,
    value: Any,
) -> Any:
    for item in value if isinstance(value, list | tuple) else [value]:
        if isinstance(item, str):
            try:
                parse(item)
            except ValueError as err:
                raise typer.BadParameter(str(err), ctx=ctx) from None
    return process(ctx, value)


def _usage_error(err: Exception) -> int:
    ctx = getattr(err, "ctx", None)
    if type(err).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())
        return BAD_INPUT_EXIT_CODE
    where = f"{ctx.command_path}: " if ctx is not None else ""
    format_message = getattr(err, "format_message", None)
    return _fail(where + (format_message() if format_message is not None else str(err)))


def _fail(message: str, code: int = BAD_INPUT_EXIT_CODE) -> int:
    """One line on stderr, exit code 2 (bad input)."""
    typer.echo(f"cloudtwin: error: {' '.join(message.split())}", err=True)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
