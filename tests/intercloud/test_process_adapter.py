"""The subprocess adapter against hostile programs: every answer checked, each whole in time."""

from __future__ import annotations

import json
import re
import sys

import pytest

from cloudtwin.intercloud.adapters.base import AdapterError
from cloudtwin.intercloud.adapters.process import MAX_REPLY_BYTES, ProcessAdapter


def _program(answer: str) -> list[str]:
    """A program that reads one request and runs `answer` (json, sys and time imported)."""
    return [sys.executable, "-c", f"import json, sys, time\nsys.stdin.readline()\n{answer}\n"]


def _says(reply: object) -> str:
    return f"print(json.dumps({reply!r}), flush=True)"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_says([]), "answered JSON that is not an object"),
        (_says("ok"), "answered JSON that is not an object"),
        (_says({"ok": True, "segments": "all"}), "answered segments: input should be a valid"),
        (_says({"ok": True, "segments": [{"network": 5}]}), "answered segments.0.network: input should be"),
        (_says({"ok": True, "segments": [{"network": "n", "mode": "l2-stretch"}]}),
         "answered segments.0.federated_vni: field required"),
        (_says({"ok": True}), "answered segments: missing"),
        (_says({"ok": "yes", "segments": []}), "answered ok: input should be a valid boolean"),
        (_says({"segments": []}), "answered ok: field required"),
        (_says({"ok": False, "error": ""}), "refused: (no reason given)"),
        (_says({"ok": False, "error": 5}), "answered error: input should be a valid string"),
        (_says({"ok": False, "error": "no room\nat all"}), "refused: no room"),
        ("sys.stdout.buffer.write(bytes(range(256)) + b'\\n'); sys.stdout.flush()",
         "answered something that is not JSON"),
    ],
)
def test_every_wrong_answer_is_one_line_naming_its_field(answer: str, reason: str) -> None:
    made = ProcessAdapter(_program(answer))
    try:
        with pytest.raises(AdapterError) as caught:
            made.segments()
    finally:
        made.close()
    message = str(caught.value)
    assert reason in message and "\n" not in message and caught.value.field == "adapter"


@pytest.mark.parametrize(
    ("answer", "timeout_s", "reason"),
    [
        # half a line, then silence: the first bytes came in time, the rest never does (a
        # short deadline: what happens does not depend on it, the program never finishes)
        ("sys.stdout.write('{\"ok\": tr'); sys.stdout.flush(); time.sleep(3600)", 0.5,
         "did not answer a whole line"),
        ("time.sleep(3600)", 0.5, "did not answer a whole line"),
        # these end on their own: a deadline no loaded machine reaches
        ("sys.stdout.write('{\"ok\": tr'); sys.stdout.flush()", 600, "exited (code 0) mid-answer"),
        (f"sys.stdout.write('x' * {MAX_REPLY_BYTES + 1}); sys.stdout.flush(); time.sleep(3600)", 600,
         "more than 16,777,216 bytes in one line"),
    ],
)
def test_an_answer_not_whole_is_refused_and_the_program_killed(
    answer: str, timeout_s: float, reason: str
) -> None:
    made = ProcessAdapter(_program(answer), timeout_s=timeout_s)
    made._start()
    process = made.process
    assert process is not None
    with pytest.raises(AdapterError, match=re.escape(reason)):
        made.segments()
    assert made.process is None and process.poll() is not None  # killed and reaped, not left running
    made.close()


def test_a_good_answer_split_over_many_writes_is_read_whole() -> None:
    body = json.dumps({"ok": True, "segments": []})
    answer = f"[(sys.stdout.write(c), sys.stdout.flush()) for c in {body!r} + '\\n']"
    made = ProcessAdapter(_program(answer))
    try:
        assert made.segments() == []
    finally:
        made.close()
