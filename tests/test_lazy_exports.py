"""Packages whose public names are imported on first use (`cloudtwin.lazy_exports`): every
name in `__all__` is there and is its module's object, and `cloudtwin nic run` starts
without importing the other commands or the scenario models."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from cloudtwin import _type_checking_imports

LAZY = ["cloudtwin.p4", "cloudtwin.scenario", "cloudtwin.store", "cloudtwin.sweep"]


@pytest.mark.parametrize("package", LAZY)
def test_every_public_name_is_its_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    sources = _type_checking_imports(module.__file__ or "")
    eager = set(module.__all__) - set(sources)
    assert eager <= set(vars(module))  # a name not imported lazily is there from the start
    for name in set(module.__all__) - eager:
        assert getattr(module, name) is getattr(importlib.import_module(sources[name]), name)
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_nic_run_starts_without_the_other_commands_or_the_scenario_models() -> None:
    code = (
        "import sys\n"
        "from cloudtwin.cli.app import _click_command\n"
        "_click_command('nic')\n"
        "from cloudtwin.p4 import load_datapath, run_pcap, run_stf\n"
        "heavy = ['cloudtwin.scenario.model', 'cloudtwin.store.database', 'cloudtwin.cli.logs',\n"
        "         'cloudtwin.cli.federate', 'cloudtwin.engine', 'duckdb']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_cli_package_exports_main_and_the_app_module_builds_the_typer_app() -> None:
    import typer

    import cloudtwin.cli
    import cloudtwin.cli.app

    assert cloudtwin.cli.main is cloudtwin.cli.app.main
    assert isinstance(cloudtwin.cli.app.app, typer.Typer)
