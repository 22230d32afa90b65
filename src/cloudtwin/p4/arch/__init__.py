"""Architectures: how each maps its metadata and externs onto the one interpreter core and
drives the core's blocks (`pna`: parser, main control, deparser; `v1model`: simple_switch's
parser, checksum controls, ingress, replication, egress, deparser)."""

from cloudtwin.p4.arch.externs import arch_extern

__all__ = ["arch_extern"]
