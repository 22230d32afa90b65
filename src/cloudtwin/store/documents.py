"""Result documents as strict JSON: what the store keeps and the CLI and service print."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Document", "finite_json"]

#: A result document as parsed from JSON (a results.json, a command's `--json` output): its
#: schema belongs to the layer that wrote it, so it is read here as JSON, key by key.
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
