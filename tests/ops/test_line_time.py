"""Hostile lines: parsing any line takes time linear in its length, never a hang."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cloudtwin.ops import PRESETS, LogFormat

_PROGRAM = """
import sys
from cloudtwin.ops import PRESETS
fmt = PRESETS[sys.argv[1]].format
line = sys.stdin.read()
print(fmt.parse(line) is None)
"""

HOSTILE = {
    "words": " ".join(f"w{i}" for i in range(150)),
    "words-colons": " ".join(f"w{i}:" for i in range(150)),
    "brackets": "a b c d " + "] [" * 200 + " x:y",
    "open-brackets": "Jun 14 15:16:01 combo x" + "[" * 20_000,
    "zookeeper-ish": "2015 a - INFO  [" + ":@" * 20_000,
}


@pytest.mark.parametrize("preset", ["hdfs", "hadoop", "zookeeper", "linux", "openssh"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_line_is_rejected_in_seconds_not_minutes(preset: str, kind: str) -> None:
    # In a child process so that a catastrophic backtrack fails the test instead of
    # hanging the suite (a 600-byte line of words once took minutes with hdfs).
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, preset], input=HOSTILE[kind],
        capture_output=True, text=True, timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("True", "False")


def test_a_two_word_component_still_parses_and_a_long_wordy_line_does_not() -> None:
    fmt = PRESETS["hdfs"].format
    fields = fmt.parse("081109 203615 143 INFO my component: hello world")
    assert fields is not None and fields["Component"] == "my component"
    assert fmt.parse(" ".join(["w"] * 5000)) is None


def test_a_field_may_hold_its_stop_character_once_on_the_careful_path() -> None:
    fmt = LogFormat.from_string("<Level> <Component>: <Content>")
    fields = fmt.parse("INFO a:b: hello")
    assert fields is not None and (fields["Component"], fields["Content"]) == ("a:b", "hello")


def test_a_deeply_nested_json_line_is_unparsed_not_a_crash() -> None:
    fmt = PRESETS["jsonl"].format
    assert fmt.parse("[" * 5000 + "]" * 5000) is None
    assert fmt.parse('{"msg": ' + "[" * 5000 + "]" * 5000 + "}") is None
    assert fmt.parse('{"msg": "ok"}') == {"Content": "ok"}
