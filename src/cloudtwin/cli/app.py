"""The typer application, its sub-commands, and the one place errors become exit codes."""

from __future__ import annotations

import sys

import typer

from cloudtwin import __version__
from cloudtwin.cli import diagnose, evaluate, logs, migrate, nccl, nic, results, train
from cloudtwin.cli import run as run_commands
from cloudtwin.errors import CloudtwinError

app = typer.Typer(
    name="cloudtwin",
    help=(
        "cloudtwin: a digital twin of a multi-tenant AI cloud.\n\n"
        "Describe a fabric, its tenants and their workloads in a YAML scenario. Simulate it "
        "and compare routing strategies (run, compare, nccl-tests, evaluate), predict LLM "
        "training and HPL on a GPU cluster (train, hpl), and analyse operations data "
        "(logs, diagnose), model smartNIC offload (nic), and plan live VM migrations between "
        "clouds (migrate).\n\n"
        "Example:  cloudtwin compare examples/leaf-spine-perftest.yaml "
        "--strategies ecmp,pinning"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cloudtwin {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """cloudtwin: a digital twin of a multi-tenant AI cloud."""


app.command("run")(run_commands.run)
app.command("compare")(run_commands.compare)
app.command("nccl-tests")(nccl.nccl_tests)
app.command("train")(train.train)
app.command("hpl")(train.hpl)
app.command("evaluate")(evaluate.evaluate)
app.add_typer(results.app, name="results")
app.add_typer(logs.app, name="logs")
app.command("diagnose")(diagnose.diagnose)
app.add_typer(nic.app, name="nic")
app.add_typer(migrate.app, name="migrate")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a CloudtwinError becomes one line on stderr and exit code 2."""
    try:
        app(args=argv, prog_name="cloudtwin")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except CloudtwinError as err:
        typer.echo(f"cloudtwin: error: {err}", err=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
