"""The subprocess adapter: a site's adapter as any program speaking JSON lines on stdin/stdout.

Requests, one JSON object per line: `{"op": "segments"}`, `{"op": "apply", "segment":
{...}}`, `{"op": "delete", "network": "NAME"}`. Answers: `{"ok": true, "segments": [...]}`
(for `segments`), `{"ok": true}`, or `{"ok": false, "error": "one line"}`. A program that
dies is started again on the next request. `serve_adapter` runs the other side of the
protocol around any in-process adapter.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Sequence
from typing import IO

from pydantic import BaseModel, ConfigDict, ValidationError

from cloudtwin.intercloud.adapters.base import Adapter, AdapterError, validation_reason
from cloudtwin.intercloud.objects import DesiredSegment

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_REPLY_BYTES", "ProcessAdapter", "handle_request", "serve_adapter"]

#: Seconds an adapter program has to answer a request with a whole line.
DEFAULT_TIMEOUT_S = 30.0
#: The longest answer line read (a site's segments in JSON take far less).
MAX_REPLY_BYTES = 16 << 20

#: A request or an answer of the protocol: one JSON object (see above), from another program.
Message = dict[str, object]


class _Reply(BaseModel):
    """An answer as the protocol allows it: `ok`, and `error` (a refusal) or `segments`."""

    model_config = ConfigDict(extra="ignore", strict=True)

    ok: bool
    error: str | None = None
    segments: list[DesiredSegment] | None = None


class ProcessAdapter:
    """Talks to an adapter program started as `argv`; each answer must arrive whole (a
    line) within `timeout_s` of the request, or the program is killed."""

    def __init__(
        self, argv: Sequence[str], flavour: str = "subprocess", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        if not argv:
            raise AdapterError("the subprocess adapter needs a command")
        self.argv = list(argv)
        self.flavour = flavour
        self.timeout_s = timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.sent: list[Message] = []

    @property
    def _name(self) -> str:
        return f"adapter {self.argv[0]!r}"

    def _start(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            self.close()
            try:
                self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            except OSError as err:
                raise AdapterError(f"cannot start {self._name}: {err.strerror}") from err
        return self.process

    def _call(self, request: Message, wants: str | None = None) -> _Reply:
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        self.sent.append(request)
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
        except OSError as err:  # BrokenPipeError: it died
            self.close()
            raise AdapterError(f"{self._name} exited") from err
        line = self._read_line(process)
        try:
            reply = _Reply.model_validate_json(line)
        except ValidationError as err:
            raise AdapterError(f"{self._name} answered {validation_reason(err)}") from err
        if not reply.ok:
            reason = (reply.error or "").strip().splitlines()
            raise AdapterError(f"{self._name} refused: {reason[0] if reason else '(no reason given)'}")
        if wants is not None and getattr(reply, wants) is None:
            raise AdapterError(f"{self._name} answered {wants}: missing")
        return reply

    def _read_line(self, process: subprocess.Popen[bytes]) -> bytes:
        """One whole answer line within the deadline; the program is killed when it has not
        answered whole in time, answers too long a line, or stops mid-line."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + self.timeout_s
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0.0))[0] if left > 0 else []
            if not ready:
                self.close()
                raise AdapterError(f"{self._name} did not answer a whole line within {self.timeout_s:g} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                code = process.wait()
                self.close()
                raise AdapterError(f"{self._name} exited (code {code}){' mid-answer' if size else ''}")
            end = chunk.find(b"\n")
            chunks.append(chunk if end < 0 else chunk[:end])
            size += len(chunks[-1])
            if size > MAX_REPLY_BYTES:
                self.close()
                raise AdapterError(f"{self._name} answered more than {MAX_REPLY_BYTES:,} bytes in one line")
            if end >= 0:
                return b"".join(chunks)

    def segments(self) -> list[DesiredSegment]:
        """The segments the program reports."""
        return self._call({"op": "segments"}, wants="segments").segments or []

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
                    with contextlib.suppress(OSError):  # a write left buffered for a program gone
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
