"""The `cloudtwin` command line: the only layer (with service/) that reads files and env."""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports

if TYPE_CHECKING:
    from cloudtwin.cli.app import app, main

__all__ = ["app", "main"]
__getattr__, __dir__ = lazy_exports(__name__)
