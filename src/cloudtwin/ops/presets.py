"""Named log presets: syslog, JSON lines, and the Loghub-2k systems with their settings."""

from __future__ import annotations

from dataclasses import dataclass

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.logformat import LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS

__all__ = ["DEFAULT_DEPTH", "DEFAULT_SIM_THRESHOLD", "PRESETS", "Preset", "resolve_format"]

DEFAULT_DEPTH = 4
DEFAULT_SIM_THRESHOLD = 0.5


@dataclass(frozen=True)
class Preset:
    """A log format with the masking and miner settings that suit it."""

    name: str
    format: LogFormat
    masks: tuple[str, ...] = GENERIC_MASKS
    sim_threshold: float = DEFAULT_SIM_THRESHOLD
    depth: int = DEFAULT_DEPTH


_RFC3164 = (
    r"^(?:<(?P<Pri>\d{1,3})>)?(?P<Month>[A-Z][a-z]{2})\s+(?P<Date>\d{1,2})\s+"
    r"(?P<Time>\d\d:\d\d:\d\d)\s+(?P<Host>\S+)\s+(?P<Component>[^:\[\s]+)"
    r"(?:\[(?P<Pid>[^\]]*)\])?:\s*(?P<Content>.*)$"
)
_RFC5424 = (
    r"^<(?P<Pri>\d{1,3})>(?P<Version>\d{1,2})\s+(?P<Timestamp>\S+)\s+(?P<Host>\S+)\s+"
    r"(?P<Component>\S+)\s+(?P<Pid>\S+)\s+(?P<MsgId>\S+)\s+(?P<Data>-|(?:\[.*?\])+)"
    r"(?:\s+(?P<Content>.*))?$"
)


def _loghub(name: str, fmt: str, masks: list[str], sim: float, depth: int) -> Preset:
    return Preset(name, LogFormat.from_string(fmt), tuple(masks), sim, depth)


#: Presets by lower-case name. The Loghub entries carry the per-system header format,
#: masking regexes, similarity threshold and depth of the Loghub benchmark for Drain
#: (Zhu et al., ICSE 2019), so results are comparable with published figures; where
#: Loghub's field names mislabel a column (the host of Linux lines as `Level`, of
#: OpenSSH lines as `Component`), the field is named `Host` so it is not stored as one.
PRESETS: dict[str, Preset] = {
    "jsonl": Preset("jsonl", LogFormat.from_string("jsonl")),
    "syslog": Preset("syslog", LogFormat.from_pattern("syslog", _RFC3164)),
    "rfc3164": Preset("rfc3164", LogFormat.from_pattern("rfc3164", _RFC3164)),
    "rfc5424": Preset("rfc5424", LogFormat.from_pattern("rfc5424", _RFC5424)),
    "hdfs": _loghub(
        "hdfs", "<Date> <Time> <Pid> <Level> <Component>: <Content>",
        [r"blk_-?\d+", r"(\d+\.){3}\d+(:\d+)?"], 0.5, 4,
    ),
    "hadoop": _loghub(
        "hadoop", r"<Date> <Time> <Level> \[<Process>\] <Component>: <Content>",
        [r"(\d+\.){3}\d+"], 0.5, 4,
    ),
    "spark": _loghub(
        "spark", "<Date> <Time> <Level> <Component>: <Content>",
        [r"(\d+\.){3}\d+", r"\b[KGTM]?B\b", r"([\w-]+\.){2,}[\w-]+"], 0.5, 4,
    ),
    "zookeeper": _loghub(
        "zookeeper", r"<Date> <Time> - <Level>  \[<Node>:<Component>@<Id>\] - <Content>",
        [r"(/|)(\d+\.){3}\d+(:\d+)?"], 0.5, 4,
    ),
    "bgl": _loghub(
        "bgl",
        "<Label> <Timestamp> <Date> <Node> <Time> <NodeRepeat> <Type> <Component> <Level> "
        "<Content>",
        [r"core\.\d+"], 0.5, 4,
    ),
    "openssh": _loghub(
        "openssh", r"<Date> <Day> <Time> <Host> <Component>\[<Pid>\]: <Content>",
        [r"(\d+\.){3}\d+", r"([\w-]+\.){2,}[\w-]+"], 0.6, 5,
    ),
    "apache": _loghub(
        "apache", r"\[<Time>\] \[<Level>\] <Content>", [r"(\d+\.){3}\d+"], 0.5, 4,
    ),
    "linux": _loghub(
        "linux", r"<Month> <Date> <Time> <Host> <Component>(\[<PID>\])?: <Content>",
        [r"(\d+\.){3}\d+", r"\d{2}:\d{2}:\d{2}"], 0.39, 6,
    ),
}


def resolve_format(text: str) -> Preset:
    """A preset by name (case-insensitive), or a Loghub format string with generic masks.

    >>> resolve_format("HDFS").depth
    4
    >>> resolve_format("<Level> <Content>").format.fields
    ('Level', 'Content')
    """
    preset = PRESETS.get(text.strip().lower())
    if preset is not None:
        return preset
    if "<" not in text:
        names = ", ".join(sorted(PRESETS))
        raise LogFormatError(
            f"format {text!r} is neither a preset ({names}) nor a format with <Content>"
        )
    return Preset("custom", LogFormat.from_string(text))
