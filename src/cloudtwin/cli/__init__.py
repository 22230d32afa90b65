"""The `cloudtwin` command line: the only layer (with service/) that reads files and env.

The Typer application is `cloudtwin.cli.app.app`, built on first use with each command
imported only when it runs; the package exports `main` alone, since its submodule
`cloudtwin.cli.app` would shadow an exported `app` once imported.
"""

from cloudtwin.cli.app import main

__all__ = ["main"]
