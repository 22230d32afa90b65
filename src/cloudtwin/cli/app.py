"""The typer application, its sub-commands, and the one place errors become exit codes."""

from __future__ import annotations

import sys

import typer

from cloudtwin import __version__
from cloudtwin.cli import run as run_commands
from cloudtwin.errors import CloudtwinError

app = typer.Typer(
    name="cloudtwin",
    help=(
        "cloudtwin: a digital twin of a multi-tenant AI cloud.\n\n"
        "Describe a fabric and its workload in a YAML scenario, simulate it, and compare "
        "routing strategies.\n\n"
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

from cloudtwin.cli import evaluate as _evaluate  # noqa: E402
from cloudtwin.cli import results as _results  # noqa: E402

app.command("evaluate")(_evaluate.evaluate)
app.add_typer(_results.app, name="results")

from cloudtwin.cli import nccl as _nccl  # noqa: E402

app.command("nccl-tests")(_nccl.nccl_tests)

from cloudtwin.cli import train as _train  # noqa: E402

app.command("train")(_train.train)
app.command("hpl")(_train.hpl)


from cloudtwin.cli import logs as _logs  # noqa: E402

app.add_typer(_logs.app, name="logs")

from cloudtwin.cli import diagnose as _diagnose  # noqa: E402

app.command("diagnose")(_diagnose.diagnose)


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
