"""The `cloudtwin` command line: the only layer (with service/) that reads files and env."""

from cloudtwin.cli.app import app, main

__all__ = ["app", "main"]
