"""The base of every results type: a frozen pydantic model whose JSON form is its dump.

A field's name (or its alias, as `from` for a Python keyword) is its JSON key and the
fields' order is the keys' order, so a type is described once: what a run computes, what
`results.json` and the store keep, what the service's OpenAPI schema shows and what the
reports read. A field that is left out of the JSON when it is None says so with
`Field(exclude_if=absent)`. A document read back with a key its type does not describe is
refused (pydantic names the key), so nothing it holds is dropped unseen.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = ["Frozen", "JsonObject", "absent"]

JsonObject = dict[str, JsonValue]
"""The JSON form of a results type (what `json.dumps` writes)."""


def absent(value: object) -> bool:
    """Whether a field is left out of the JSON: it is None."""
    return value is None


class Frozen(BaseModel):
    """A frozen results type; `to_json()` is its documented JSON form."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    def to_json(self) -> JsonObject:
        """The JSON form: the fields by their JSON names, in order (None-valued ones that
        say `exclude_if=absent` left out)."""
        return self.model_dump()
