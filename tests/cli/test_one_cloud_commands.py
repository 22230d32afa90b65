"""Every command that takes a scenario, on the shipped one-cloud file: it runs (per site where
that is what it means) or refuses in one line naming the command that does; exit 0 or 2.
`diagnose` and `evaluate --db` are in test_one_cloud_store.py; `federate up`/`down` (root,
network namespaces) in tests/intercloud; the service's job kinds in
tests/service/test_cloud_jobs.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from tests.cli.cli_helpers import cloudtwin

CLOUD = "examples/one-cloud.yaml"

#: command, exit code, what its output holds (stdout when it runs, the error line when it refuses)
CASES = [
    ("run", 0, "the whole cloud without its faults"),
    ("compare --strategies ecmp,pinning", 0, "federated traffic: completion (s)"),
    ("run --flows-out f.parquet", 2, "--flows-out: a cloud's run writes no flow file"),
    ("run --site west --strategy ecmp", 0, "one-cloud/west (ecmp)"),
    ("compare --site west --strategies ecmp,pinning", 0, "aggregate vs ecmp"),
    ("train", 0, "one-cloud/east: training"),
    ("train --site west", 2, "workload.kind"),
    ("hpl", 2, "east runs training (cloudtwin train examples/one-cloud.yaml --site east)"),
    ("nccl-tests", 2, "west runs perftest (cloudtwin run examples/one-cloud.yaml --site west)"),
    ("nic offload", 0, "site west"),
    ("nic boot --site west", 0, "7 of 8 NICs attested; 1 quarantined"),
    ("migrate plan", 0, "cache"),
    ("federate plan", 0, "l2-stretch"),
    ("federate reachability", 0, "west/web/host3 -> east/web/host6"),
    ("federate evaluate", 0, "gateway east failover / stall (s)"),
    ("migrate run", 0, "cache"),
    ("evaluate --strategies ecmp --no-store", 0, "Recommendation: ecmp"),
    ("sweep --vary seed=1,2", 2, "`cloudtwin evaluate examples/one-cloud.yaml --set seed=N`"),
    ("train --site nowhere", 2, "--site: no site named 'nowhere'"),
]


@pytest.mark.parametrize(("command", "code", "shown"), CASES, ids=[c[0] for c in CASES])
def test_command_runs_or_names_the_command_that_does(command: str, code: int, shown: str) -> None:
    words = shlex.split(command)
    split = 2 if words[0] in ("nic", "migrate", "federate") else 1
    done = cloudtwin(*words[:split], CLOUD, *words[split:])
    assert done.returncode == code, done.stderr
    if code == 0:
        assert shown in done.stdout
    else:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cloudtwin: error: "), done.stderr
        assert "Traceback" not in done.stderr and shown in lines[0]


def test_federate_apply_puts_the_clouds_federation_into_the_controller(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    done = cloudtwin("federate", "apply", CLOUD, "--state", str(state), "--json")
    assert done.returncode == 0, done.stderr
    assert "ACTIVE" in cloudtwin("federate", "status", "--state", str(state)).stdout


def test_train_json_is_per_site() -> None:
    cloud = json.loads(cloudtwin("train", CLOUD, "--json").stdout)
    assert list(cloud["sites"]) == ["east"]
    east = cloud["sites"]["east"]
    assert east["gpus"] == 64 and east["iteration_s"] > 0


def test_migrate_plan_uses_the_wan_bottleneck() -> None:
    plans = json.loads(cloudtwin("migrate", "plan", CLOUD, "--json").stdout)["migrations"]
    moves = [(p["vm"], p["from"], p["to"]) for p in plans]
    assert moves == [("shop", "east", "west"), ("cache", "east", "west")]
    # 25 Gbps WAN < 40 Gbps gateways < 100 Gbps NICs: the WAN is each path's bottleneck
    assert [p["bandwidth_bps"] for p in plans] == [25e9, 25e9]
    assert plans[0]["total_time_s"] > 8 * 2**30 * 8 / 25e9  # shop's 8 GiB first pass alone


def test_nic_offload_runs_every_site() -> None:
    sites = json.loads(cloudtwin("nic", "offload", CLOUD, "--json").stdout)["sites"]
    assert list(sites) == ["east", "west"]
    # west's host 7 fails measured boot (nic.boot_faults): quarantined there, nowhere else
    assert [sites[s]["totals"]["quarantined_hosts"] for s in ("east", "west")] == [0, 1]


@pytest.mark.parametrize(
    "command", [("compare", "examples/leaf-spine-perftest.yaml"), ("evaluate", CLOUD, "--no-store")]
)
def test_an_unknown_strategy_is_blamed_on_the_flag(command: tuple[str, ...]) -> None:
    done = cloudtwin(*command, "--strategies", "ecmp,bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("cloudtwin: error: --strategies: unknown strategy 'bogus'")


def test_train_says_which_node_and_model_it_used() -> None:
    done = cloudtwin("train", CLOUD)
    assert "Used: node a100-80g-8, vm; model 24 layers, hidden 4096, 32 heads, sequence 2048." in done.stdout


def test_run_and_compare_give_the_fault_free_figures_evaluate_reports(tmp_path: Path) -> None:
    compared = json.loads(cloudtwin("compare", CLOUD, "--strategies", "ecmp,pinning", "--json").stdout)
    alone = json.loads(cloudtwin("run", CLOUD, "--json").stdout)
    evaluated = json.loads(
        cloudtwin("evaluate", CLOUD, "--strategies", "ecmp,pinning", "--no-store", "--json").stdout
    )
    assert alone == compared["strategies"]["ecmp"]  # the cloud's own strategy, as compare runs it
    for name in ("ecmp", "pinning"):
        run, full = compared["strategies"][name], evaluated["strategies"][name]
        assert run["completion_s"] == full["performance"]["completion_s"]
        assert run["sites"]["east"]["completion_s"] == full["sites"]["east"]["completion_s"]
        assert run["migrations"]["shop"]["total_time_s"] == full["migrations"]["shop"]["total_time_s"]
