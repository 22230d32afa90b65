"""The store's defaults, apart from the store: a command's options show them in its help
without importing DuckDB or numpy."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_DB", "DEFAULT_MAX_CELLS", "DEFAULT_MAX_ROWS", "DEFAULT_TIMEOUT_S"]

#: The store file a command reads and writes unless told otherwise (in the working folder).
DEFAULT_DB = Path("cloudtwin.duckdb")

#: Counts per window and key are held as a windows x keys matrix of at most this many
#: cells (80 MB) unless the caller raises it.
DEFAULT_MAX_CELLS = 10_000_000

#: A user query may return at most this many rows unless the caller raises it.
DEFAULT_MAX_ROWS = 10_000

#: A user query may run at most this long (seconds) unless the caller raises it.
DEFAULT_TIMEOUT_S = 60.0
