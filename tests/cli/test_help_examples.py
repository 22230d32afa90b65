"""Every example a command's `--help` shows works.

An example is a help paragraph starting `Example:` or a line starting `$ cloudtwin`, and
every `--set KEY=VALUE` an option's help shows. Running them all would take minutes, so
each is checked cheaply and in process: its flags parse, its scenario loads with its
`--set` overrides, and each option's `--set` example applies to the command's own example
scenario. The quick ones (hpl, migrate plan) also run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import typer
from tests.conftest import dataset

from cloudtwin.cli.app import app, main
from cloudtwin.cli.output import is_cloud_file, read_cloud, read_scenario
from cloudtwin.scenario.loader import parse_yaml

REPO = Path(__file__).resolve().parents[2]

#: Examples that run in about a second each: run, not only checked.
RUN = ("hpl", "migrate plan")
#: Where an example names a file of a shared dataset (beside the repository).
SHARED = "../shared/datasets/"


def _commands(command: click.Command, path: str = "") -> list[tuple[str, click.Command]]:
    subcommands = getattr(command, "commands", None)  # a group (typer's own or click's)
    if subcommands is not None:
        found = []
        for name, sub in subcommands.items():
            found += _commands(sub, f"{path} {name}".strip())
        return found
    return [(path, command)]


COMMANDS = _commands(typer.main.get_command(app))


def examples(text: str) -> list[str]:
    """The `Example:` paragraphs (joined across their wrapped lines) and `$ cloudtwin` lines.

    >>> examples("Do it.\\n\\nExample:  cloudtwin hpl x.yaml\\n--json\\n\\n$ cloudtwin run y")
    ['cloudtwin hpl x.yaml --json', 'cloudtwin run y']
    """
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.strip().splitlines()]
        if lines and lines[0].startswith("Example:"):
            found.append(" ".join(lines).removeprefix("Example:").strip())
        found += [line.removeprefix("$ ") for line in lines if line.startswith("$ cloudtwin ")]
    return found


def option_sets(command: click.Command) -> list[str]:
    """Every `--set KEY=VALUE` an option's help shows."""
    shown = [re.findall(r"--set (\S+=[^\s)]+)", getattr(p, "help", "") or "") for p in command.params]
    return [text.rstrip(".,;") for found in shown for text in found]


def _argv(example: str) -> list[str]:
    words = shlex.split(example)
    while "=" in words[0]:  # PYTHONPATH=examples cloudtwin ...
        words.pop(0)
    assert words[0] == "cloudtwin", example
    return words[1:]


def _shared(word: str) -> str:
    """A file of a shared dataset (p4c's STF tests) where the tests find the datasets: its
    files are read while the line is parsed; a test without the dataset skips, naming it."""
    if not word.startswith(SHARED):
        return word
    name, _, rest = word.removeprefix(SHARED).partition("/")
    return str(dataset(name) / rest)


def _check(path: str, command: click.Command, argv: list[str]) -> None:
    """Parse the flags; load the scenario with its overrides where the command has both."""
    words = argv[len(path.split()) :]
    assert argv[: len(path.split())] == path.split(), (path, argv)
    ctx = command.make_context(path, words)
    scenario, overrides = ctx.params.get("scenario"), list(ctx.params.get("overrides") or [])
    if scenario is None:
        return
    where = REPO / scenario
    if is_cloud_file(where):
        read_cloud(where, overrides)
    elif "sites" not in parse_yaml(where.read_text(), str(where))[0]:
        read_scenario(where, overrides)


CASES = [(path, command, example) for path, command in COMMANDS for example in examples(command.help or "")]


def test_every_command_with_an_example_is_found() -> None:
    shown = {path for path, _, _ in CASES}
    assert {"hpl", "train", "sweep", "migrate plan", "evaluate"} <= shown


@pytest.mark.parametrize(("path", "command", "example"), CASES, ids=[c[2][:60] for c in CASES])
def test_a_help_example_parses_and_its_scenario_loads(
    path: str, command: click.Command, example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    argv = [_shared(word) for word in _argv(example)]
    _check(path, command, argv)
    for override in option_sets(command):
        _check(path, command, [*argv, "--set", override])


@pytest.mark.parametrize("path", RUN)
def test_the_quick_examples_run(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for example_path, _, example in CASES:
        if example_path != path:
            continue
        monkeypatch.chdir(REPO)
        assert main(_argv(example)) == 0, capsys.readouterr().err
