"""Turning YAML text and `key=value` overrides into a validated Scenario.

Errors come out as one ScenarioError line that names the source, the key (and the
line in the file when it is known) and the reason.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from cloudtwin.errors import ScenarioError
from cloudtwin.scenario.model import Scenario, check_listed_hosts
from cloudtwin.scenario.safe_yaml import load_yaml

__all__ = [
    "YamlMapping",
    "apply_overrides",
    "check_hosts",
    "line_of",
    "load_scenario",
    "parse_yaml",
    "scenario_from_data",
    "validation_error",
]

#: A YAML document's top mapping as parsed: any keys, any values, until the pydantic models
#: validate it (overrides are applied to it before that, so it stays untyped here).
YamlMapping = dict[str, Any]

_DISCRIMINATED = ("fabric", "workload")
_DEFAULT_KIND = {"fabric": "leaf-spine", "workload": "perftest"}


def parse_yaml(text: str, source: str = "<scenario>") -> tuple[YamlMapping, yaml.Node | None]:
    """The mapping in `text` and its node tree (for line numbers); ScenarioError if broken."""
    data, node = load_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{source}: a scenario must be a mapping of keys, not {type(data).__name__}"
        )
    return data, node


def apply_overrides(data: YamlMapping, overrides: Iterable[str]) -> YamlMapping:
    """A copy of `data` with each `a.b.c=value` applied; values are read as YAML scalars.

    >>> apply_overrides({"fabric": {"leaves": 16}}, ["fabric.leaves=8", "seed=7"])
    {'fabric': {'leaves': 8}, 'seed': 7}
    """
    result = _deep_copy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError(
                f"override {item!r}: expected key=value, e.g. fabric.leaves=8", field="overrides"
            )
        try:
            value = load_yaml(raw, key)[0] if raw.strip() else ""
        except ScenarioError as err:
            shown = raw if len(raw) <= 40 else raw[:40] + "..."
            reason = str(err).removeprefix(f"{key}: ")
            raise ScenarioError(f"{key}: override value {shown!r} is not a YAML value ({reason})") from err
        _set_path(result, key.split("."), value, key)
    return result


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _set_path(data: YamlMapping, parts: list[str], value: Any, key: str) -> None:
    target: Any = data
    for depth, part in enumerate(parts[:-1]):
        here = ".".join(parts[: depth + 1])
        if isinstance(target, list):
            target = target[_index(part, target, key)]
            continue
        if part not in target or target[part] is None:
            target[part] = {}
        target = target[part]
        if not isinstance(target, dict | list):
            raise ScenarioError(f"{key}: {here} is a value, not a section")
    if not isinstance(target, dict | list):  # e.g. tenants.0.name where tenants.0 is a name
        raise ScenarioError(f"{key}: {'.'.join(parts[:-1])} is a value, not a section")
    last = parts[-1]
    if isinstance(target, list):
        target[_index(last, target, key)] = value
    else:
        target[last] = value


def _index(part: str, items: list[Any], key: str) -> int:
    if not (part.isascii() and part.isdigit()) or int(part) >= len(items):
        raise ScenarioError(f"{key}: {part!r} is not an index of a {len(items)}-item list")
    return int(part)


def load_scenario(text: str, source: str = "<scenario>", overrides: Iterable[str] = ()) -> Scenario:
    """Validate YAML `text` (with overrides) into a Scenario, or raise one-line ScenarioError.

    An empty document is refused unless overrides give it content: an empty file is
    more likely a mistake than a request for every default.
    """
    overrides = list(overrides)
    data, node = parse_yaml(text, source)
    if not data and not overrides:
        raise ScenarioError(
            f"{source}: the scenario is empty; give at least a name and a fabric (see examples/)"
        )
    return scenario_from_data(data, node, source, overrides)


def scenario_from_data(
    data: YamlMapping, node: yaml.Node | None, source: str = "<scenario>", overrides: Iterable[str] = ()
) -> Scenario:
    """Validate parsed YAML (see `parse_yaml`) with overrides: what `load_scenario` does after
    parsing, for callers that validate many override sets against one parsed file."""
    data = apply_overrides(data, overrides)
    check_hosts(data, source)
    for section, kind in _DEFAULT_KIND.items():
        if isinstance(data.get(section), dict):
            data[section].setdefault("kind", kind)
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, node, source) from err


def check_hosts(data: Mapping[str, Any], source: str) -> None:
    """ScenarioError when the document's host sets list too many hosts to expand."""
    try:
        check_listed_hosts(data)
    except ValueError as err:
        raise ScenarioError(f"{source}: {err}") from err


def validation_error(
    err: ValidationError, data: Mapping[str, Any], node: yaml.Node | None, source: str
) -> ScenarioError:
    """The one-line ScenarioError of a pydantic error: it names the source, the key (its
    `field`), the line when known, and the reason."""
    message, key = _describe(err, data, node, source)
    return ScenarioError(message, field=key or None)


def _describe(
    err: ValidationError, data: Mapping[str, Any], node: yaml.Node | None, source: str
) -> tuple[str, str]:
    """The one-line message of a validation error, and the key it names ("" when none)."""
    first = err.errors(include_url=False)[0]
    loc = _clean_loc(first["loc"], data)
    key = ".".join(str(p) for p in loc)
    field = ""
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key" + _nearest(err.title, loc)
    elif first["type"] == "missing":
        message += _wanted(err.title, loc)
    elif first["type"] == "union_tag_invalid":
        expected = message.split("tags: ")[-1]
        message = f"unknown kind {first['input'].get('kind')!r}; expected one of {expected}"
    elif "input" in first and first["type"] not in ("missing", "value_error"):
        message = f"{message} (got {first['input']!r})"
    if not key:  # a model-level check names its key at the start of the message
        named = re.match(r"([A-Za-z_][\w.]*): ", message)
        if named:
            loc = [int(p) if p.isascii() and p.isdigit() else p for p in named.group(1).split(".")]
            field = named.group(1)
    elif first["type"] == "value_error" and isinstance(first.get("input"), Mapping):
        # a nested model's own check naming one of its keys: `vms.0.working_set: reason`
        own = re.match(r"([A-Za-z_]\w*): ", message)
        if own and own.group(1) in first["input"]:
            loc, message = [*loc, own.group(1)], message[own.end() :]
            key = f"{key}.{own.group(1)}"
    line = line_of(node, loc)
    where = f"{source}:{line}" if line else source
    if key and message.startswith(f"{key.split('.')[0]}.") is False and not message.startswith(key):
        return f"{where}: {key}: {message}", key
    return f"{where}: {message}", key or field


def _root_model(title: str) -> type[BaseModel] | None:
    """The model a validation error's title names (the scenario kinds a file can be)."""
    from cloudtwin.scenario.cloud import CloudScenario
    from cloudtwin.scenario.federation import FederationScenario

    return {m.__name__: m for m in (Scenario, CloudScenario, FederationScenario)}.get(title)


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


def _models_at(title: str, loc: list[Any]) -> list[type[BaseModel]]:
    """The models that may hold the last key of `loc` (none when the root is unknown)."""
    root = _root_model(title)
    if root is None or not loc or not isinstance(loc[-1], str):
        return []
    models = [root]
    for part in loc[:-1]:
        if isinstance(part, str):
            fields = [m.model_fields[part] for m in models if part in m.model_fields]
            models = [sub for f in fields for sub in _models_in(f.annotation)]
    return models


def _wanted(title: str, loc: list[Any]) -> str:
    """` (text: the destination site)` for a missing key: its type and meaning as the cloud
    reference gives them ("" when the key is not found)."""
    from cloudtwin.scenario.reference import MEANINGS, field_type, owner

    for model in _models_at(title, loc):
        field = model.model_fields.get(loc[-1])
        if field is not None:
            meaning = MEANINGS.get(f"{owner(model, loc[-1])}.{loc[-1]}")
            kind = re.sub(r"\[(\w+)\]\(#\w+\)", r"\1", field_type(field.annotation))  # no links
            return f" ({kind}" + (f": {meaning})" if meaning else ")")
    return ""


def _nearest(title: str, loc: list[Any]) -> str:
    """` (did you mean `x`?)` for a mistyped key: the closest key the model at `loc` takes
    ("" when none is close)."""
    models = _models_at(title, loc)
    if not models:
        return ""
    keys = sorted({name for m in models for name in m.model_fields})
    close = difflib.get_close_matches(loc[-1], keys, n=1, cutoff=0.6)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (keys here: {', '.join(keys)})" if 0 < len(keys) <= 12 else ""


def _clean_loc(loc: tuple[Any, ...], data: Mapping[str, Any]) -> list[Any]:
    """Drop the discriminator tags pydantic puts in locations (`fabric.leaf-spine.leaves`)."""
    cleaned: list[Any] = []
    cursor: Any = data
    for i, part in enumerate(loc):
        # a tag is followed by the field it leads to; a missing key is the last part
        tag = i + 1 < len(loc)
        if isinstance(cursor, dict) and part not in cursor and cursor.get("kind", part) == part and tag:
            continue
        if isinstance(cursor, dict) and part in _DISCRIMINATED and part not in cursor:
            cleaned.append(part)
            cursor = None
            continue
        cleaned.append(part)
        if isinstance(cursor, dict):
            cursor = cursor.get(part)
        elif isinstance(cursor, list) and isinstance(part, int) and part < len(cursor):
            cursor = cursor[part]
        else:
            cursor = None
    return cleaned


def line_of(node: yaml.Node | None, loc: list[Any]) -> int | None:
    """The line (from 1) of the deepest key or item of `loc` found in the YAML node tree."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(part):
                    line = key_node.start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line
