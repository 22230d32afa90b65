"""The `cloudtwin` command line: the only layer (with service/) that reads files and env."""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports
from cloudtwin.cli.app import main

if TYPE_CHECKING:
    from cloudtwin.cli.app import app

__all__ = ["app", "main"]
# Importing cli/app.py bound `app` here to that module; `cloudtwin.cli.app` is the typer
# application (as `from cloudtwin.cli import app` has always given), built on first use.
globals().pop("app", None)
__getattr__, __dir__ = lazy_exports(__name__)
