"""Log line formats: Loghub-style header format strings, JSON lines, and syslog presets."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.patterns import LinearPattern, compile_linear

__all__ = ["FormatKind", "LogFormat", "ParsedLine"]

FormatKind = Literal["regex", "jsonl"]

_PLACEHOLDER = re.compile(r"<([^<>]*)>")
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Field names (case-insensitive) that a format may use for the level and component roles.
LEVEL_FIELDS = ("level", "severity", "type")
COMPONENT_FIELDS = ("component", "app", "appname", "logger", "program", "process")
#: Field names whose values, joined in format order, make the timestamp text.
TIME_FIELDS = ("timestamp", "datetime", "month", "date", "day", "time", "year", "ts")

#: Field names of the ``jsonl`` format, after mapping the common JSON keys onto them.
JSON_FIELDS = ("Timestamp", "Level", "Component", "Content")
#: Syslog severity names by code (RFC 5424 table 2), for formats with a ``Pri`` group.
SYSLOG_SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")

#: One parsed line: the header fields by name; ``Content`` is the free-text message.
ParsedLine = dict[str, str]


@dataclass(frozen=True)
class LogFormat:
    """A compiled log line format.

    Build one with :meth:`from_string`; a ``regex`` format is a Loghub format string such
    as ``'<Date> <Time> <Level> <Component>: <Content>'``, where ``<Name>`` is a field,
    other text is regular-expression source, and a run of spaces matches any whitespace.

    >>> fmt = LogFormat.from_string("<Date> <Time> <Level> <Component>: <Content>")
    >>> fmt.parse("081109 203615 INFO dfs.DataNode: Receiving block blk_1")["Content"]
    'Receiving block blk_1'
    >>> fmt.parse("no header here") is None
    True
    """

    text: str
    kind: FormatKind = "regex"
    fields: tuple[str, ...] = ()
    pattern: LinearPattern | None = field(default=None, compare=False, repr=False)
    fast_pattern: LinearPattern | None = field(default=None, compare=False, repr=False)
    batch_pattern: LinearPattern | None = field(default=None, compare=False, repr=False)
    #: Whether its patterns run in RE2: the format has regular expression text of the
    #: user's (Python's ``re`` runs only formats of plain text, whose patterns are ours).
    in_re2: bool = field(default=False, compare=False)

    @classmethod
    def from_string(cls, text: str, trusted: bool = False) -> LogFormat:
        """Compile a Loghub format string, or ``jsonl`` for JSON lines.

        Regular expression text in it runs in RE2, in time linear in the line, unless
        the format is ``trusted`` (a preset, whose patterns are known not to backtrack).
        """
        if text.strip().lower() in ("jsonl", "json"):
            return cls(text="jsonl", kind="jsonl", fields=JSON_FIELDS)
        return _compile_regex_format(text, trusted)

    @classmethod
    def from_pattern(cls, name: str, pattern: str) -> LogFormat:
        """A format given directly as a regular expression with named groups (for presets)."""
        compiled = re.compile(pattern)
        names = tuple(compiled.groupindex)
        if "Content" not in names:
            raise LogFormatError(f"format {name!r} has no Content group")
        if "Pri" in names:
            names = (*names, "Level")
        return cls(text=name, kind="regex", fields=names, pattern=compiled)

    @property
    def level_field(self) -> str | None:
        """The field holding the severity level, if the format has one."""
        return _role_field(self.fields, LEVEL_FIELDS)

    @property
    def component_field(self) -> str | None:
        """The field holding the component name, if the format has one."""
        return _role_field(self.fields, COMPONENT_FIELDS)

    @property
    def time_fields(self) -> tuple[str, ...]:
        """The fields whose values, joined by spaces, make the timestamp text.

        An epoch ``Timestamp`` next to calendar fields (as in BGL) is left out.
        """
        names = tuple(f for f in self.fields if f.lower() in TIME_FIELDS)
        calendar = tuple(f for f in names if f.lower() != "timestamp")
        return calendar or names

    def parse(self, line: str) -> ParsedLine | None:
        """Split one line (without its newline) into fields; None if it does not fit."""
        if self.kind == "jsonl":
            return _parse_json(line)
        match = self.match(line)
        if match is None:
            return None
        fields = match.groupdict()
        pri = fields.get("Pri")
        if pri is not None:
            fields["Level"] = SYSLOG_SEVERITIES[int(pri) % 8]
        return fields

    def match(self, line: str) -> Any:
        """The regex match of a line (None if none): the fast pattern, else the careful one
        (short lines).

        Both run in RE2, in time linear in the line whatever the user's pattern, so no
        line can stall a parse; a line neither fits is reported as unparsed.
        """
        assert self.pattern is not None
        match = self.fast_pattern.match(line) if self.fast_pattern is not None else None
        if match is None and len(line) <= MAX_CAREFUL_LINE:
            match = self.pattern.match(line.strip())
        return match

    def why_not(self, line: str) -> str:
        """The reason a line does not fit this format (for the unparsed table)."""
        if self.kind == "jsonl":
            return "not a JSON object with a message field"
        return f"does not match format {self.text!r}"


def _role_field(fields: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    for name in names:
        for f in fields:
            if f.lower() == name:
                return f
    return None


#: A field followed by a space may hold up to this many words in the careful pattern.
MAX_FIELD_WORDS = 3
#: A field followed by a plain character (``:`` or ``]``) is at most this long.
MAX_FIELD_CHARS = 1000
#: A field followed by another kind of text may be at most this long where it is lazy.
MAX_LAZY_FIELD = 256
#: The careful pattern (fields holding spaces) is tried only on lines up to this long.
MAX_CAREFUL_LINE = 8192
_REGEX_SPECIALS = set(".^$*+?{}[]\\|()")


def _stop_char(literal: str) -> str | None:
    """The plain character a format's literal text starts with, if it starts with one."""
    if literal[:1] == "\\" and len(literal) > 1 and not literal[1].isalnum():
        return literal[1]
    if literal and literal[0] not in _REGEX_SPECIALS:
        return literal[0]
    return None


def _field_patterns(name: str, literal: str, final: bool) -> tuple[str, str]:
    """The fast and careful sub-patterns of one field, given the literal text after it.

    Both are built so that a line is matched in time linear in its length: a field
    followed by a space is one word (the careful one up to MAX_FIELD_WORDS words), a
    field followed by a plain character stops at it within MAX_FIELD_CHARS (the
    careful one may hold it once), and any other field is lazy but at most
    MAX_LAZY_FIELD characters long.
    """
    if final:
        return f"(?P<{name}>.*)", f"(?P<{name}>.*)"
    if literal.startswith(" "):
        extra = MAX_FIELD_WORDS - 1
        return f"(?P<{name}>\\S+)", f"(?P<{name}>\\S+(?:[ \\t]+\\S+){{0,{extra}}}?)"
    stop = _stop_char(literal)
    if stop is not None:
        cls = f"[^{re.escape(stop)}\\n]{{0,{MAX_FIELD_CHARS}}}"
        return f"(?P<{name}>{cls})", f"(?P<{name}>{cls}(?:{re.escape(stop)}{cls})??)"
    lazy = f"(?P<{name}>.{{0,{MAX_LAZY_FIELD}}}?)"
    return lazy, lazy


def _user_regex(literal: str) -> bool:
    """Whether a format's literal text has regular expression operators (not only escapes)."""
    return any(ch in "*+?{}[]|()^$" for ch in re.sub(r"\\.", "", literal))


def _compile_regex_format(text: str, trusted: bool) -> LogFormat:
    names: list[str] = []
    careful: list[str] = []
    fast: list[str] = []
    placeholders = list(_PLACEHOLDER.finditer(text))
    pos = 0
    for k, match in enumerate(placeholders):
        literal = re.sub(" +", r"\\s+", text[pos : match.start()])
        careful.append(literal)
        fast.append(literal)
        name = match.group(1)
        if not _FIELD_NAME.match(name):
            raise LogFormatError(
                f"format placeholder <{name}> at column {match.start() + 1} is not a field "
                "name (letters, digits, underscore)"
            )
        if name in names:
            raise LogFormatError(f"format placeholder <{name}> appears twice")
        names.append(name)
        following = text[match.end() : (
            placeholders[k + 1].start() if k + 1 < len(placeholders) else len(text)
        )]
        quick, slow = _field_patterns(name, following, match.end() == len(text))
        fast.append(quick)
        careful.append(slow)
        pos = match.end()
    careful.append(re.sub(" +", r"\\s+", text[pos:]))
    fast.append(careful[-1])
    stray = re.search(r"[<>]", re.sub(_PLACEHOLDER, "", text))
    if stray:
        raise LogFormatError(f"format {text!r} has an unbalanced '{stray.group(0)}'")
    if "Content" not in names:
        raise LogFormatError(f"format {text!r} has no <Content> placeholder")
    in_re2 = not trusted and _user_regex(_PLACEHOLDER.sub("", text))

    def compiled(pattern: str) -> LinearPattern:
        return compile_linear(pattern, "format", text) if in_re2 else re.compile(pattern)

    pattern = compiled("^" + "".join(careful) + "$")
    # Surrounding whitespace is allowed here, so batches need not strip every line.
    fast_pattern = compiled(r"^\s*" + "".join(fast) + r"\s*$")
    # The same, for a batch joined by newlines (one match per line, or fall back).
    batch_pattern = compiled(r"(?m)^[ \t]*" + "".join(fast) + r"[ \t]*$")
    return LogFormat(text, "regex", tuple(names), pattern, fast_pattern, batch_pattern, in_re2)


_JSON_MESSAGE_KEYS = ("message", "msg", "content", "log")


def _parse_json(line: str) -> ParsedLine | None:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: thousands of nested arrays
        return None
    if not isinstance(obj, Mapping):
        return None
    return json_fields(obj)


def json_fields(obj: Mapping[str, object]) -> ParsedLine | None:
    """Map a JSON log object onto the field names the rest of the pipeline uses."""
    lower = {str(k).lower(): v for k, v in obj.items()}
    content = next((lower[k] for k in _JSON_MESSAGE_KEYS if k in lower), None)
    if content is None:
        return None
    out: ParsedLine = {"Content": str(content)}
    for key, role in (("level", "Level"), ("severity", "Level"), ("component", "Component"),
                      ("logger", "Component"), ("service", "Component")):
        if key in lower and role not in out:
            out[role] = str(lower[key])
    for key in ("timestamp", "time", "ts", "@timestamp"):
        if key in lower:
            out["Timestamp"] = str(lower[key])
            break
    return out
