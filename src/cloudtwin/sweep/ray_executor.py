"""Work on a Ray cluster: each payload is one Ray task; the driver keeps the store.

Ray is an optional extra (`pip install 'cloudtwin[ray]'`); every node of the cluster
needs cloudtwin importable. Without an address, a local cluster is started for the run
and stopped after it. A task whose worker dies is retried by Ray; one that still fails
comes back as lost and the driver sends its payload again.
"""

from __future__ import annotations

import socket
from typing import Any

from cloudtwin.errors import SweepError, needs_extra
from cloudtwin.sweep.executors import Finished, Job

__all__ = ["CONNECT_TIMEOUT_S", "RayExecutor", "check_address"]

#: The longest host name DNS allows.
MAX_HOST_CHARS = 253
#: How long to wait for a cluster's head to answer before calling the address unreachable.
CONNECT_TIMEOUT_S = 3.0


def check_address(address: str) -> str:
    """The HOST:PORT of a cluster's head, once something answers there; SweepError if not.

    `auto` is the cluster last started on this machine (as Ray records it); a record
    left by a cluster that has stopped is refused here rather than waited on.
    """
    if address == "auto":
        resolved = _auto_address()
        if resolved is None:
            raise SweepError("address auto: no Ray cluster was started on this machine (ray start --head)")
        try:
            return check_address(resolved)
        except SweepError as err:
            raise SweepError(f"address auto ({resolved}): no Ray cluster answers there") from err
    host, sep, port = address.rpartition(":")
    if (not sep or not host or len(host) > MAX_HOST_CHARS
            or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)):
        shown = address if len(address) <= 80 else address[:80] + "..."
        raise SweepError(f"address {shown!r}: expected auto or HOST:PORT, e.g. 127.0.0.1:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except UnicodeError as err:  # a host name no resolver takes (labels over 63 characters)
        raise SweepError(f"address {address}: not a host name ({err})") from err
    except OSError as err:
        raise SweepError(f"address {address}: no Ray cluster answers there ({err.strerror or err})") from err
    return address


def _auto_address() -> str | None:
    _import_ray()  # a SweepError saying how to install it, if it is missing
    from ray._private import services  # where Ray itself resolves `auto`

    try:
        resolved = services.canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError, OSError):
        return None
    return str(resolved) if resolved else None


def _import_ray() -> Any:
    with needs_extra("ray", "executor ray", SweepError):
        import ray
    return ray


def _call(job: Job, payload: Any) -> Any:
    return job(payload)


class RayExecutor:
    """Payloads as Ray tasks on the cluster at `address` (`auto`: the one this machine
    runs; None: a local cluster of `workers` CPUs started for this run)."""

    def __init__(self, address: str | None, workers: int | None = None) -> None:
        self.address = address
        self._wanted = workers
        self.workers = workers or 1
        self._ray: Any = None
        self._remote: Any = None
        self._job_ref: Any = None
        self._pending: dict[Any, int] = {}

    def start(self, job: Job) -> None:
        address = check_address(self.address) if self.address is not None else None
        ray = _import_ray()
        local = {} if address is not None else {
            "num_cpus": self.workers, "include_dashboard": False,
        }
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=False,
                **local,
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise SweepError(f"address {self.address}: cannot join the Ray cluster: {err}") from err
        self._ray = ray
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = self._wanted or max(1, cpus)
        self._remote = ray.remote(num_cpus=1, max_retries=3)(_call)
        self._job_ref = ray.put(job)

    def submit(self, handle: int, payload: Any) -> None:
        self._pending[self._remote.remote(self._job_ref, payload)] = handle

    def finished(self, timeout_s: float) -> list[Finished]:
        if not self._pending:
            return []
        ray = self._ray
        ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=timeout_s)
        if ready:  # take every other batch that is done too
            ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=0)
        results: list[Finished] = []
        for ref in ready:
            handle = self._pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as err:  # the job itself raised: its error
                raise err.as_instanceof_cause() from None
            except ray.exceptions.RayError:  # the worker (or its node) died, retries spent
                results.append((handle, None))
                continue
            results.append((handle, result))
        return results

    def close(self) -> None:
        if self._ray is None:
            return
        for ref in self._pending:
            self._ray.cancel(ref, force=True)
        self._pending.clear()
        self._ray.shutdown()
        self._ray = None
