"""The one error tree of cloudtwin: every error a user can cause is a CloudtwinError."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "CloudtwinError",
    "AccessError",
    "CalibrationError",
    "EngineError",
    "FederationError",
    "LimitError",
    "LogFormatError",
    "MobilityError",
    "NicError",
    "OutputError",
    "P4Error",
    "RoutingError",
    "ScenarioError",
    "ServiceError",
    "StoreError",
    "SweepError",
    "TopologyError",
    "WorkloadError",
    "BAD_INPUT_EXIT_CODE",
    "BAD_INPUT_STATUS",
    "exit_code_of",
    "needs_extra",
    "status_of",
]

#: A message that starts with a field path names it: `fabric.leaves: must be > 0`.
_LEADING_FIELD = re.compile(r"^([\w.\[\]-]+):\s")

#: The exit code of bad input, and the HTTP status of bad input without a status of its own.
BAD_INPUT_EXIT_CODE = 2
BAD_INPUT_STATUS = 400


class CloudtwinError(Exception):
    """Base of every error cloudtwin raises on bad input; the CLI maps it to exit code 2.

    `field` names the input at fault (`fabric.leaves`, `limit`), or is None when no one
    field is: given as a keyword, or read once from a message that starts with a field
    path (`"fabric.leaves: must be > 0"`). `status` is the HTTP status the service answers
    with (400 unless a subclass or instance says otherwise); see `status_of`, `exit_code_of`.

    >>> ScenarioError("fabric.leaves: must be > 0").field
    'fabric.leaves'
    >>> ScenarioError("x.yaml:3: fabric: unknown key", field="fabric").field
    'fabric'
    """

    field: str | None
    status: int = BAD_INPUT_STATUS

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        if field is None and args and isinstance(args[0], str):
            match = _LEADING_FIELD.match(args[0])
            field = match.group(1) if match else None
        self.field = field

    def __reduce__(self) -> tuple[object, ...]:
        # Exception pickles as cls(*args), which a subclass whose __init__ takes other
        # arguments (FederationError, LimitError) cannot be made from: rebuild without it.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[CloudtwinError], args: tuple[object, ...], state: dict[str, object]) -> CloudtwinError:
    """An error as it was pickled (its message, field and every attribute), __init__ not run."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class ScenarioError(CloudtwinError):
    """A scenario file or override is malformed; the message names the key and the reason."""


class TopologyError(CloudtwinError):
    """A fabric cannot be built as described (impossible sizes, unreachable hosts)."""


class RoutingError(CloudtwinError):
    """A routing strategy is unknown, cannot be loaded, or cannot route a flow."""


class WorkloadError(CloudtwinError):
    """A workload does not fit the fabric it is placed on."""


class EngineError(CloudtwinError):
    """The simulator was given inconsistent arrays (lengths, negative sizes, cycles)."""


class LogFormatError(CloudtwinError):
    """A log format string or log input cannot be understood."""


class OutputError(CloudtwinError):
    """An output file or folder cannot be written where it was asked for."""


class StoreError(CloudtwinError):
    """The results/operations store cannot be opened or queried."""


class LimitError(CloudtwinError):
    """A resource limit (memory, rows, time, size) would be passed; ``limit`` names it.

    The message gives the estimate and the limit; ``limit`` is the field that lifts it
    (a scenario key such as ``limits.memory``, or a parameter such as ``max_rows``),
    so each front end can say how to raise it in its own terms. `field` is `limit` unless
    given or named at the start of the message.

    >>> LimitError("SQL returns more than 10 rows (max_rows)", "max_rows").field
    'max_rows'
    """

    def __init__(self, message: str, limit: str, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.limit = limit
        if self.field is None:
            self.field = limit


class FederationError(CloudtwinError):
    """A federation object or request is inconsistent (unknown site, overlapping prefixes,
    conflicting VNIs); `field` names the offending field, the HTTP API answers 4xx with it."""

    def __init__(self, field: str, reason: str, status: int = 422) -> None:
        super().__init__(f"{field}: {reason}", field=field)
        self.field: str = field
        self.reason = reason
        self.status = status


class AccessError(FederationError):
    """A federation request carries no token (401) or a token that does not grant it (403)."""

    def __init__(self, field: str, reason: str, status: int = 403) -> None:
        super().__init__(field, reason, status)


class MobilityError(CloudtwinError):
    """A VM or live migration is described inconsistently (sizes, rates, unknown VM or site)."""


class NicError(CloudtwinError):
    """A NIC profile, function placement, table entry, control request or boot image is invalid."""


class P4Error(NicError):
    """A P4 program is outside the supported subset or inconsistent; the message starts with
    `file:line:column`."""


class CalibrationError(CloudtwinError):
    """`cloudtwin calibrate` cannot measure here (no root, a program not installed), or a
    measurement went wrong; the message says what is missing and how to install it."""


class SweepError(CloudtwinError):
    """A parameter sweep is malformed (a varied key or value) or cannot reach its executor."""


class ServiceError(CloudtwinError):
    """`cloudtwin serve` cannot start as asked (its port, for one)."""


@contextmanager
def needs_extra(
    extra: str, what: str, error: Callable[[str], CloudtwinError] = CloudtwinError
) -> Iterator[None]:
    """Import an optional dependency inside this block; if it is missing, raise `error` with
    a one-line install hint instead of an ImportError's traceback.

    A missing module of cloudtwin itself is a bug, not a missing extra: it is not caught.

    >>> with needs_extra("nic", "nic boot"):
    ...     import no_such_module_for_the_doctest
    Traceback (most recent call last):
    cloudtwin.errors.CloudtwinError: nic boot needs the nic extra \
(no_such_module_for_the_doctest is missing): pip install 'cloudtwin[nic]'
    """
    try:
        yield
    except ImportError as err:
        missing = (err.name or "a module").partition(".")[0]
        if missing == "cloudtwin":
            raise
        hint = f"{what} needs the {extra} extra ({missing} is missing): pip install 'cloudtwin[{extra}]'"
        raise error(hint) from err


def exit_code_of(err: BaseException) -> int:
    """The CLI's exit code for `err`: 2 for bad input (a CloudtwinError), 1 for anything else."""
    return BAD_INPUT_EXIT_CODE if isinstance(err, CloudtwinError) else 1


def status_of(err: BaseException) -> int:
    """The HTTP status for `err`: a CloudtwinError's own (400 unless it says otherwise, as a
    FederationError's 401/403/404/409/422 does), 500 for anything else."""
    return err.status if isinstance(err, CloudtwinError) else 500
