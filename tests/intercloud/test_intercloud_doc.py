"""Every command in docs/intercloud.md runs; the federate CLI's bad input is one line and exit 2."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.cli_helpers import REPO, cloudtwin, run_documented
from tests.test_docs import console_commands

DOC = REPO / "docs" / "intercloud.md"
COMMANDS = console_commands(DOC)


def _stored(command: str) -> set[str]:
    """The state files and stores a command names (after --state and --db)."""
    words = shlex.split(command)
    return {value for flag, value in zip(words, words[1:], strict=False) if flag in ("--state", "--db")}


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("cloudtwin")])
def test_documented_command_runs(tmp_path: Path, command: str) -> None:
    """Each command runs after the doc's earlier commands that write what it reads (its state
    file or store), in a folder of its own."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for previous in COMMANDS[: COMMANDS.index(command)]:
        if previous.startswith("cloudtwin") and _stored(previous) & _stored(command):
            run_documented(previous, tmp_path)
    done = run_documented(command, tmp_path)
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    assert done.stdout.strip()
    if command.startswith("cloudtwin diagnose"):
        first = done.stdout.splitlines()[4:6]  # the first row: the component, then its kind
        assert "east.gw0" in first[0] and "(gateway)" in first[1]


def test_benchmark_command_is_documented() -> None:
    assert "python benchmarks/intercloud.py" in COMMANDS
    done = subprocess.run(
        [sys.executable, "benchmarks/intercloud.py", "--sites", "20", "--networks", "60"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "planned in" in done.stdout


@pytest.mark.slow
def test_benchmark_command_runs_as_documented() -> None:
    (command,) = [c for c in COMMANDS if c.startswith("python benchmarks/intercloud.py")]
    done = subprocess.run(
        [sys.executable, *command.split()[1:]], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "500 sites, 10,000 federated networks" in done.stdout and "128,000 endpoints" in done.stdout


def test_reachability_json_shape() -> None:
    done = cloudtwin("federate", "reachability", "examples/intercloud.yaml", "--json")
    result = json.loads(done.stdout)
    assert len(result["endpoints"]) == 12
    assert ["east/red/host0", "lab/red/host1"] in result["reachable"]
    assert ["lab/blue/host2", "east/blue/host2"] not in result["reachable"]
    assert len(result["reachable"]) == 44


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["plan", "examples/intercloud.yaml", "--set", "networks.0.mode=l3-routed"],
            "networks.0.sites: l3-routed needs unique prefixes: "
            "10.0.0.0/24 at 'east' overlaps 10.0.0.0/24 at 'west'",
        ),
        (
            ["plan", "examples/intercloud.yaml", "--set", "networks.1.sites.1=mars"],
            "networks.1.sites.1: unknown site",
        ),
        (
            ["plan", "examples/intercloud.yaml", "--set", "networks.0.vni=9", "--set", "networks.1.vni=9"],
            "networks.1.vni: VNI 9 is already used",
        ),
        (["plan", "examples/no-such-file.yaml"], "no such scenario file"),
        (["plan", "examples/intercloud.yaml", "--set", "sites.0.flavour=vmware"], "sites.0.flavour"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str) -> None:
    done = cloudtwin("federate", *args)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert words in done.stderr


def test_apply_refused_leaves_no_state(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    ok = cloudtwin("federate", "apply", "examples/intercloud.yaml", "--state", str(state), "--json")
    assert ok.returncode == 0, ok.stderr
    before = state.read_text()
    bad = cloudtwin(
        "federate",
        "apply",
        "examples/intercloud.yaml",
        "--state",
        str(state),
        "--set",
        "networks.1.sites.1=mars",
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert state.read_text() == before
    wrong = cloudtwin(
        "federate", "status", "--state", str(state), env={"CLOUDTWIN_FEDERATION_TOKEN": "wrong"}
    )
    assert wrong.returncode == 2 and "token: the admin token does not match" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1
    assert state.read_text() == before


def test_agent_without_token_or_controller_is_one_line_and_exit_2() -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    argv = ["federate", "agent", "east", "--controller", url, "--once"]
    for env, words in (
        ({"CLOUDTWIN_SITE_TOKEN": ""}, "token: the site's token is needed"),
        ({"CLOUDTWIN_SITE_TOKEN": "east-token"}, f"controller: cannot reach {url}"),
    ):
        done = cloudtwin(*argv, env=env)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr, done.stderr


def test_evaluate_on_a_multi_site_scenario_shows_the_failover() -> None:
    done = cloudtwin("evaluate", "examples/intercloud-failover.yaml", "--no-store", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (fault,) = result["gateway_faults"]
    assert fault["site"] == "east" and fault["failover_s"] == pytest.approx(4.09)
    assert fault["flows_stalled"] == 32 and result["bytes_delayed"] > 0
    assert result["completion_s"] == pytest.approx(result["baseline_completion_s"] + 4.09, rel=1e-6)


@pytest.mark.parametrize(
    "command", ["plan", "apply", "status", "reachability", "up", "down", "evaluate", "agent", "serve"]
)
def test_every_federate_command_has_help_with_an_example(command: str) -> None:
    done = cloudtwin("federate", command, "--help")
    assert done.returncode == 0 and "Example:" in done.stdout
    assert command == "serve" or "--json" in done.stdout
