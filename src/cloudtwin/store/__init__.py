"""The DuckDB store: one embedded file holding operations data (and, later, simulation runs)."""

from cloudtwin.store.database import DEFAULT_DB, QueryResult, Store
from cloudtwin.store.ops_ingest import IngestSummary, ingest_file, ingest_records, ingest_stream
from cloudtwin.store.ops_query import (
    WindowCounts,
    find_anomalies,
    list_templates,
    search_lines,
    window_counts,
)
from cloudtwin.store.ops_tables import OPS_SCHEMA_VERSION, ensure_ops_schema

__all__ = [
    "DEFAULT_DB",
    "OPS_SCHEMA_VERSION",
    "IngestSummary",
    "QueryResult",
    "Store",
    "WindowCounts",
    "ensure_ops_schema",
    "find_anomalies",
    "ingest_file",
    "ingest_records",
    "ingest_stream",
    "list_templates",
    "search_lines",
    "window_counts",
]
