"""The DuckDB store: one embedded file holding operations data and evaluation runs."""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports

if TYPE_CHECKING:
    from cloudtwin.store.database import DEFAULT_DB, QueryResult, Store
    from cloudtwin.store.ops_ingest import IngestSummary, NewStream, ingest_records, ingest_stream
    from cloudtwin.store.ops_query import (
        WindowCounts,
        find_anomalies,
        list_templates,
        search_lines,
        window_counts,
    )
    from cloudtwin.store.ops_tables import OPS_SCHEMA_VERSION, ensure_ops_schema
    from cloudtwin.store.runs import (
        RUNS_SCHEMA_VERSION,
        FlowRows,
        ensure_runs_schema,
        list_runs,
        load_run,
        save_run,
    )

__all__ = [
    "DEFAULT_DB",
    "OPS_SCHEMA_VERSION",
    "RUNS_SCHEMA_VERSION",
    "FlowRows",
    "IngestSummary",
    "NewStream",
    "QueryResult",
    "Store",
    "WindowCounts",
    "ensure_ops_schema",
    "ensure_runs_schema",
    "find_anomalies",
    "ingest_records",
    "ingest_stream",
    "list_runs",
    "list_templates",
    "load_run",
    "save_run",
    "search_lines",
    "window_counts",
]
__getattr__, __dir__ = lazy_exports(__name__)
