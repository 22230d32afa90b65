"""Operations analytics: log formats, reading, masking, template mining and anomaly detection."""

from cloudtwin.ops.accuracy import grouping_accuracy
from cloudtwin.ops.anomaly import Anomaly, AnomalyKind, DetectorConfig, detect_changes
from cloudtwin.ops.logformat import LogFormat
from cloudtwin.ops.masking import GENERIC_MASKS, WILDCARD, Masker
from cloudtwin.ops.miner import Cluster, MinerConfig, Similarity, TemplateMiner
from cloudtwin.ops.parameters import extract_parameters
from cloudtwin.ops.parser import LogParser, ParsedBatch
from cloudtwin.ops.pca import PcaConfig, detect_pca
from cloudtwin.ops.presets import PRESETS, Preset, resolve_format
from cloudtwin.ops.reader import LineBatch, LogStream, log_stream, read_batches
from cloudtwin.ops.record import LogRecord

__all__ = [
    "GENERIC_MASKS",
    "PRESETS",
    "WILDCARD",
    "Anomaly",
    "AnomalyKind",
    "Cluster",
    "DetectorConfig",
    "LineBatch",
    "LogFormat",
    "LogParser",
    "LogRecord",
    "LogStream",
    "Masker",
    "MinerConfig",
    "ParsedBatch",
    "PcaConfig",
    "Preset",
    "Similarity",
    "TemplateMiner",
    "detect_changes",
    "detect_pca",
    "extract_parameters",
    "grouping_accuracy",
    "log_stream",
    "read_batches",
    "resolve_format",
]
