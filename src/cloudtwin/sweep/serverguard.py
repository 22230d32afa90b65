"""Imported by a pool's fork server only (one of its preloads), never by a driver: it asks
the kernel to end the server when the driver that started it ends.

Workers hold the server's liveness pipe open, so a server outlives a killed driver for as
long as its workers compute; and a worker busy in one long call into C cannot run the
thread that watches its driver. With the server ended by the kernel, each worker (which
asks the same of its own parent, `die_with_parent`) ends with it.
"""

from cloudtwin.sweep.executors import die_with_parent

die_with_parent()
