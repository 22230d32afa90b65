"""Documents as strict JSON: what the store keeps and the CLI and service print."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Document", "finite_json"]

#: A document whose schema is not described by a type (a live migration run's free-form
#: log records, as stored): read as JSON, key by key. A run's results are typed instead
#: (`cloudtwin.evaluation.results`).
Document = dict[str, Any]


def finite_json(value: Any) -> Any:
    """The same JSON value with every NaN or infinite float as None.

    JSON has no such numbers, and strict readers (jq, browsers, most languages) refuse the
    `NaN` Python's json module writes by default.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    return value
