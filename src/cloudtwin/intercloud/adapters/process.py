"""The subprocess adapter: a site's adapter as any program speaking JSON lines on stdin/stdout.

Requests, one JSON object per line: `{"op": "segments"}`, `{"op": "apply", "segment":
{...}}`, `{"op": "delete", "network": "NAME"}`. Answers: `{"ok": true, "segments": [...]}`
(for `segments`), `{"ok": true}`, or `{"ok": false, "error": "one line"}`. A program that
dies is started again on the next request. `serve_adapter` runs the other side of the
protocol around any in-process adapter.
"""

from __future__ import annotations

import json
import select
import subprocess
from collections.abc import Sequence
from typing import IO

from cloudtwin.intercloud.adapters.base import Adapter, AdapterError
from cloudtwin.intercloud.objects import DesiredSegment

__all__ = ["DEFAULT_TIMEOUT_S", "ProcessAdapter", "handle_request", "serve_adapter"]

DEFAULT_TIMEOUT_S = 30.0

#: A request or an answer of the protocol: one JSON object (see above), from another program.
Message = dict[str, object]


class ProcessAdapter:
    """Talks to an adapter program started as `argv`."""

    def __init__(
        self, argv: Sequence[str], flavour: str = "subprocess", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        if not argv:
            raise AdapterError("the subprocess adapter needs a command")
        self.argv = list(argv)
        self.flavour = flavour
        self.timeout_s = timeout_s
        self.process: subprocess.Popen[str] | None = None
        self.sent: list[Message] = []

    def _start(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            try:
                self.process = subprocess.Popen(
                    self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
                )
            except OSError as err:
                raise AdapterError(f"cannot start adapter {self.argv[0]!r}: {err.strerror}") from err
        return self.process

    def _call(self, request: Message) -> Message:
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        self.sent.append(request)
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise AdapterError(f"adapter {self.argv[0]!r} exited") from err
        ready, _, _ = select.select([process.stdout], [], [], self.timeout_s)
        line = process.stdout.readline() if ready else None
        if line is None:
            self.close()
            raise AdapterError(f"adapter {self.argv[0]!r} did not answer within {self.timeout_s:g} s")
        if not line:
            raise AdapterError(f"adapter {self.argv[0]!r} exited (code {process.wait()})")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError as err:
            raise AdapterError(f"adapter {self.argv[0]!r} answered with something that is not JSON") from err
        if not isinstance(answer, dict):
            raise AdapterError(f"adapter {self.argv[0]!r} answered with JSON that is not an object")
        if not answer.get("ok"):
            raise AdapterError(str(answer.get("error", "the adapter refused the request")).splitlines()[0])
        return dict(answer)

    def segments(self) -> list[DesiredSegment]:
        """The segments the program reports."""
        found = self._call({"op": "segments"}).get("segments", [])
        if not isinstance(found, list):
            raise AdapterError(f"adapter {self.argv[0]!r} answered segments that are not a list")
        return [DesiredSegment.model_validate(s) for s in found]

    def apply(self, segment: DesiredSegment) -> None:
        """Ask the program to hold `segment`."""
        self._call({"op": "apply", "segment": segment.model_dump(mode="json")})

    def delete(self, network: str) -> None:
        """Ask the program to remove the segment of `network`."""
        self._call({"op": "delete", "network": network})

    def close(self) -> None:
        """Stop the program."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            self.process = None


def handle_request(adapter: Adapter, request: Message) -> Message:
    """One request of the protocol against an in-process adapter."""
    op = request.get("op")
    try:
        if op == "segments":
            return {"ok": True, "segments": [s.model_dump(mode="json") for s in adapter.segments()]}
        if op == "apply":
            adapter.apply(DesiredSegment.model_validate(request.get("segment")))
            return {"ok": True}
        if op == "delete":
            adapter.delete(str(request.get("network")))
            return {"ok": True}
    except Exception as err:  # noqa: BLE001 - every failure becomes one line for the agent
        return {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    return {"ok": False, "error": f"unknown op {op!r}"}


def serve_adapter(adapter: Adapter, stdin: IO[str], stdout: IO[str]) -> None:
    """Answer requests from `stdin` on `stdout` until `stdin` closes."""
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            answer: Message = {"ok": False, "error": "request is not JSON"}
        else:
            answer = handle_request(adapter, request if isinstance(request, dict) else {})
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
