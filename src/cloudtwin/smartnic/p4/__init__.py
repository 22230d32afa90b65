"""A P4-16 subset for the NIC pipeline: front end, numpy interpreter, entries and pcap."""

from cloudtwin.smartnic.p4.datapath import BatchResult, Datapath, PacketBatch, TableEntry
from cloudtwin.smartnic.p4.entries import parse_entries
from cloudtwin.smartnic.p4.frontend import parse_program
from cloudtwin.smartnic.p4.pcap import Capture, Records, index_pcap, iter_pcap, read_pcap, write_pcap
from cloudtwin.smartnic.p4.program import Program
from cloudtwin.smartnic.p4.run import RunReport, install, load_datapath, run_capture, run_pcap

__all__ = [
    "BatchResult",
    "Capture",
    "Datapath",
    "PacketBatch",
    "Program",
    "Records",
    "RunReport",
    "TableEntry",
    "index_pcap",
    "install",
    "iter_pcap",
    "load_datapath",
    "parse_entries",
    "parse_program",
    "read_pcap",
    "run_capture",
    "run_pcap",
    "write_pcap",
]
