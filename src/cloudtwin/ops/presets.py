"""Named log presets: syslog, JSON lines, and the header formats of the Loghub-2k systems."""

from __future__ import annotations

from dataclasses import dataclass

from cloudtwin.errors import LogFormatError
from cloudtwin.ops.logformat import LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS
from cloudtwin.ops.miner import MinerConfig

__all__ = ["PRESETS", "Preset", "resolve_format"]


@dataclass(frozen=True)
class Preset:
    """A log format, and the masks its messages get (the generic ones unless replaced).

    Every format is mined with the same parse tree settings (the :class:`MinerConfig`
    defaults): only the header format differs between presets.
    """

    name: str
    format: LogFormat
    masks: tuple[str, ...] = GENERIC_MASKS

    def miner_config(self) -> MinerConfig:
        """The miner settings for this format: the defaults, with this preset's masks."""
        return MinerConfig(masks=self.masks)


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


def _loghub(name: str, fmt: str) -> Preset:
    return Preset(name, LogFormat.from_string(fmt, trusted=True))


#: Presets by lower-case name. The Loghub entries are the header formats of the Loghub
#: benchmark (Zhu et al., ICSE 2019) and nothing else: no per-system masks or tree
#: settings, so they are mined as any format string would be. Where Loghub's field
#: names mislabel a column (the host of Linux lines as `Level`, of OpenSSH lines as
#: `Component`), the field is named `Host` so it is not stored as one.
PRESETS: dict[str, Preset] = {
    "jsonl": Preset("jsonl", LogFormat.from_string("jsonl")),
    "syslog": Preset("syslog", LogFormat.from_pattern("syslog", _RFC3164)),
    "rfc3164": Preset("rfc3164", LogFormat.from_pattern("rfc3164", _RFC3164)),
    "rfc5424": Preset("rfc5424", LogFormat.from_pattern("rfc5424", _RFC5424)),
    "hdfs": _loghub("hdfs", "<Date> <Time> <Pid> <Level> <Component>: <Content>"),
    "hadoop": _loghub(
        "hadoop", r"<Date> <Time> <Level> \[<Process>\] <Component>: <Content>"
    ),
    "spark": _loghub("spark", "<Date> <Time> <Level> <Component>: <Content>"),
    "zookeeper": _loghub(
        "zookeeper", r"<Date> <Time> - <Level>  \[<Node>:<Component>@<Id>\] - <Content>"
    ),
    "bgl": _loghub(
        "bgl",
        "<Label> <Timestamp> <Date> <Node> <Time> <NodeRepeat> <Type> <Component> <Level> "
        "<Content>",
    ),
    "openssh": _loghub(
        "openssh", r"<Date> <Day> <Time> <Host> <Component>\[<Pid>\]: <Content>"
    ),
    "apache": _loghub("apache", r"\[<Time>\] \[<Level>\] <Content>"),
    "linux": _loghub(
        "linux", r"<Month> <Date> <Time> <Host> <Component>(\[<PID>\])?: <Content>"
    ),
}


def resolve_format(text: str) -> Preset:
    """A preset by name (case-insensitive), or a Loghub format string with generic masks.

    >>> resolve_format("HDFS").masks == resolve_format("<Date> <Content>").masks
    True
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
