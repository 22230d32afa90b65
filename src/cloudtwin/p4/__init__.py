"""P4-16 on real packets: the front end (preprocessor, grammar, checks), the numpy
interpreter (`Datapath`) with its architectures (PNA, v1model, PSA), control-plane entries,
pcap captures and p4c's STF packet tests.

A leaf package: it knows nothing of the NIC model or the rest of the twin, and whatever
uses it (the NIC's control plane, `cloudtwin nic`) imports what is listed here. The names
are imported on first use, so `import cloudtwin.p4` costs nothing until one is needed (the
front end needs the `nic` extra: lark).
"""

from typing import TYPE_CHECKING

from cloudtwin import lazy_exports

if TYPE_CHECKING:
    from cloudtwin.p4.batch import BatchResult, PacketBatch
    from cloudtwin.p4.datapath import Datapath, compile_program
    from cloudtwin.p4.entries import parse_entries
    from cloudtwin.p4.frontend import keep_parser_tables, keep_programs, parse_program
    from cloudtwin.p4.pcap import Capture, Records, index_pcap, iter_pcap, read_pcap, write_pcap
    from cloudtwin.p4.program import Program
    from cloudtwin.p4.run import RunReport, install, load_datapath, run_capture, run_pcap
    from cloudtwin.p4.stf import StfResult, run_stf
    from cloudtwin.p4.tables import TableEntry

__all__ = [
    "BatchResult",
    "Capture",
    "Datapath",
    "PacketBatch",
    "Program",
    "Records",
    "RunReport",
    "StfResult",
    "TableEntry",
    "compile_program",
    "index_pcap",
    "install",
    "iter_pcap",
    "keep_parser_tables",
    "keep_programs",
    "load_datapath",
    "parse_entries",
    "parse_program",
    "read_pcap",
    "run_capture",
    "run_pcap",
    "run_stf",
    "write_pcap",
]

__getattr__, __dir__ = lazy_exports(__name__)
