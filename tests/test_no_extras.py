"""Without its extras cloudtwin still runs its core commands, and a command that needs an
extra says which one in one line (`pip install 'cloudtwin[nic]'`), never a traceback.

Two checks: a cheap one that blocks the optional packages in a subprocess (an entry of None
in `sys.modules` makes their import fail as if they were not installed), and a slow one that
installs the package without extras into a fresh venv, as a user's `pip install` would: pip
builds and installs the wheel from this tree, and the core dependencies come from the
environment the tests run in (exactly the distributions that `[project] dependencies` needs,
found from their metadata), so only a change to the dependencies sends pip to an index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]

#: The import names of every optional dependency (pyproject.toml's extras).
OPTIONAL = (
    "numba",  # fast
    "fastapi", "starlette", "uvicorn", "httpx", "jinja2", "plotly",  # web
    "lark", "scapy", "cryptography",  # nic (cryptography: mobility too)
    "ray",  # ray
)

#: Modules that exist for an extra and may need it when imported (nothing core imports them
#: at module level): the service and the federation's HTTP side (web), the P4 datapath (nic).
EXTRA_MODULES = (
    "cloudtwin.service.",
    "cloudtwin.intercloud.api",
    "cloudtwin.intercloud.client",
    "cloudtwin.p4",
    "cloudtwin.smartnic.control",
)

_BLOCK = f"import sys\nfor _name in {OPTIONAL!r}:\n    sys.modules[_name] = None\n"


def _python(code: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter on this tree's sources, the optional packages blocked."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-c", _BLOCK + textwrap.dedent(code), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _python("from cloudtwin.cli.app import main\nsys.exit(main(sys.argv[1:]))", *args)


def test_every_core_module_imports_without_the_extras() -> None:
    result = _python(
        """
        import importlib, pkgutil
        import cloudtwin

        for info in pkgutil.walk_packages(cloudtwin.__path__, "cloudtwin.", onerror=lambda name: None):
            try:
                importlib.import_module(info.name)
            except ImportError as err:
                print(info.name, err.name)
        """
    )
    assert result.returncode == 0, result.stderr
    failed = [line.split()[0] for line in result.stdout.splitlines()]
    assert "cloudtwin.service.app" in failed  # the block works: the service does need fastapi
    core = [line for line in result.stdout.splitlines() if not line.startswith(EXTRA_MODULES)]
    assert core == [], "core modules import an optional package (named last) at module level"


APACHE_LOG = (
    "[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/httpd/conf/workers2.properties\n"
    "[Sun Dec 04 04:47:44 2005] [error] mod_jk child workerEnv in error state 6\n"
)

#: The core commands, as the README and docs run them (small sizes): none needs an extra.
CORE_COMMANDS = {
    "help": ("--help",),
    "run": ("run", "examples/leaf-spine-perftest.yaml"),
    "compare": ("compare", "examples/leaf-spine-perftest.yaml", "--strategies", "ecmp"),
    "evaluate": ("evaluate", "examples/routing-strategies.yaml", "--strategies", "ecmp", "--no-store"),
    "nccl-tests": (
        "nccl-tests", "examples/routing-strategies.yaml", "-b", "1G", "-e", "1G", "--strategies", "ecmp",
    ),
    "train": ("train", "examples/vela.yaml"),
    "hpl": ("hpl", "examples/vela-hpl.yaml"),
    "migrate-plan": (
        "migrate", "plan", "--memory", "4GiB", "--dirty-rate", "50MiB/s", "--working-set", "1GiB",
        "--bandwidth", "1Gbps",
    ),
    "logs-parse": ("logs", "parse", "{log}", "--format", "apache"),
}


@pytest.mark.parametrize("args", CORE_COMMANDS.values(), ids=CORE_COMMANDS.keys())
def test_core_commands_run_without_the_extras(args: tuple[str, ...], tmp_path: Path) -> None:
    log = tmp_path / "apache.log"
    log.write_text(APACHE_LOG)
    result = _cli(*(arg.format(log=log) for arg in args))
    assert result.returncode == 0, result.stderr
    if args[0] == "compare":
        assert "aggregate (Gbps)" in result.stdout


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("nic", "boot", "examples/smartnic.yaml"), "nic"),
        (
            (
                "nic", "run", "examples/p4/vxlan_gateway.p4", "--entries",
                "examples/p4/vxlan_gateway.entries.yaml", "--pcap", "examples/p4/network-frames.pcap",
            ),
            "nic",
        ),
        (("nic", "stf", "examples/p4/security_groups.p4", "examples/p4/security_groups.stf"), "nic"),
        (("evaluate", "examples/migration.yaml", "--strategies", "ecmp", "--no-store"), "mobility"),
        (("serve", "--port", "0"), "web"),
        (("federate", "serve", "--state", "unused-state.json"), "web"),
    ],
    ids=["nic-boot", "nic-run", "nic-stf", "migration", "serve", "federate-serve"],
)
def test_a_missing_extra_is_one_line_naming_it(args: tuple[str, ...], extra: str) -> None:
    result = _cli(*args)
    assert result.returncode == 2, result.stderr
    assert f"pip install 'cloudtwin[{extra}]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (REPO / "unused-state.json").exists()


# -- a real install without extras ------------------------------------------------------------

_NO_NETWORK = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "No matching distribution found",
    "Could not find a version that satisfies",
    "ProxyError",
    "ReadTimeoutError",
)


def _plain_env() -> dict[str, str]:
    """The environment without this test run's own Python setup (PYTHONPATH would hide the install)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _core_distributions() -> list[metadata.Distribution] | None:
    """The installed distributions that this tree's core dependencies need, transitively (each
    requirement's markers and extras followed as pip follows them); None when one is missing, its
    installed version does not satisfy the requirement or it has no RECORD of its files: then pip
    must fetch it."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    todo = [(Requirement(line), "") for line in declared]
    found: dict[str, tuple[metadata.Distribution, set[str]]] = {}
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            return None
        if not requirement.specifier.contains(dist.version, prereleases=True) or not dist.files:
            return None
        dist, followed = found.setdefault(canonicalize_name(requirement.name), (dist, set()))
        for wanted in ({"", *requirement.extras} - followed):
            followed.add(wanted)
            todo.extend((Requirement(line), wanted) for line in dist.requires or [])
    return [dist for dist, _ in found.values()]


def _top_levels(dist: metadata.Distribution) -> dict[str, list[str]]:
    """The entries of site-packages that `dist` has files in, each with those files (RECORD's
    paths), leaving out files outside site-packages and the shared bytecode cache."""
    tops: dict[str, list[str]] = {}
    for file in dist.files or []:
        top = str(file).split("/")[0]
        if top not in ("..", "__pycache__"):
            tops.setdefault(top, []).append(str(file))
    return tops


def _link_distributions(dists: list[metadata.Distribution], site: Path) -> None:
    """Make `dists` importable in `site` by symbolic links to their installed files, and nothing
    else: an entry of site-packages that another distribution also has files in is linked file
    by file."""
    owners: dict[str, int] = {}
    for dist in metadata.distributions():
        for top in _top_levels(dist):
            owners[top] = owners.get(top, 0) + 1
    for dist in dists:
        base = Path(str(dist.locate_file(""))).absolute()
        for top, files in _top_levels(dist).items():
            for link in [top] if owners[top] == 1 else files:
                (site / link).parent.mkdir(parents=True, exist_ok=True)
                if not (site / link).is_symlink():
                    (site / link).symlink_to(base / link)


def _pip_install(venv: Path, *args: str) -> None:
    """`pip install ARGS` into `venv` (skips when no package index can be reached)."""
    try:
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
             *args],
            env=_plain_env(), capture_output=True, text=True, timeout=900,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("pip install did not finish in 15 minutes (a slow or absent network)")
    if pip.returncode != 0:
        if any(sign in pip.stderr for sign in _NO_NETWORK):
            pytest.skip(f"pip cannot reach a package index: {pip.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip install failed:\n{pip.stderr[-2000:]}")


@pytest.fixture(scope="module")
def plain_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install <this tree>` (core dependencies only); its bin folder."""
    venv = tmp_path_factory.mktemp("no-extras") / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], env=_plain_env(), capture_output=True,
        text=True, timeout=300,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot make a venv here: {made.stderr.strip()[-300:]}")
    core = _core_distributions()
    if core is None:  # the dependencies changed since this environment was installed
        _pip_install(venv, str(REPO))
    else:
        _pip_install(venv, "--no-deps", str(REPO))
        site = Path(subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=_plain_env(), capture_output=True, text=True, check=True, timeout=120,
        ).stdout.strip())
        _link_distributions(core, site)
    return venv / "bin"


def _installed_package(bin_dir: Path) -> Path:
    where = "import cloudtwin, pathlib; print(pathlib.Path(cloudtwin.__file__).parent)"
    found = subprocess.run(
        [str(bin_dir / "python"), "-c", where],
        env=_plain_env(), capture_output=True, text=True, timeout=120, cwd="/",
    )
    assert found.returncode == 0, found.stderr
    return Path(found.stdout.strip())


@pytest.mark.slow
def test_a_plain_install_has_no_extras_and_ships_the_examples(plain_install: Path) -> None:
    package = _installed_package(plain_install)
    assert REPO not in package.parents, "the venv imports this tree, not the installed package"
    assert (package / "examples" / "leaf-spine-perftest.yaml").is_file()
    for name in ("cryptography", "lark", "fastapi", "numba", "ray"):
        probe = subprocess.run(
            [str(plain_install / "python"), "-c", f"import {name}"], env=_plain_env(), capture_output=True,
            timeout=120,
        )
        assert probe.returncode != 0, f"{name} came with the core dependencies: the checks below mean little"


@pytest.mark.slow
def test_a_plain_install_compares_and_hints_at_the_nic_extra(plain_install: Path) -> None:
    package = _installed_package(plain_install)  # run from it: `examples/...` are the shipped ones
    cloudtwin = str(plain_install / "cloudtwin")
    env = {**_plain_env(), "COLUMNS": "120"}
    compare = subprocess.run(
        [cloudtwin, "compare", "examples/leaf-spine-perftest.yaml", "--strategies", "ecmp"],
        cwd=package, env=env, capture_output=True, text=True, timeout=600,
    )
    assert compare.returncode == 0, compare.stderr
    assert "aggregate (Gbps)" in compare.stdout and "ecmp" in compare.stdout
    boot = subprocess.run(
        [cloudtwin, "nic", "boot", "examples/smartnic.yaml"],
        cwd=package, env=env, capture_output=True, text=True, timeout=600,
    )
    assert boot.returncode == 2, boot.stderr
    assert "pip install 'cloudtwin[nic]'" in boot.stderr
    assert len(boot.stderr.strip().splitlines()) == 1 and "Traceback" not in boot.stderr, boot.stderr


@pytest.mark.slow
def test_a_plain_install_sweeps_on_the_local_pool(plain_install: Path, tmp_path: Path) -> None:
    """The process pool's workers start afresh, so only a real install shows them without numba."""
    package = _installed_package(plain_install)
    sweep = subprocess.run(
        [
            str(plain_install / "cloudtwin"), "sweep", "examples/leaf-spine-perftest.yaml",
            "--vary", "seed=1..2", "--db", str(tmp_path / "sweeps.duckdb"),
        ],
        cwd=package, env={**_plain_env(), "COLUMNS": "120"}, capture_output=True, text=True, timeout=600,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert "2 run" in sweep.stdout, sweep.stdout
