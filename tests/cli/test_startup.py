"""The command line answers at once: `cloudtwin --help` lists the commands without
importing any of them, and `cloudtwin CMD --help` imports that command's module alone,
none of the heavy libraries (numpy, scipy, DuckDB, lark, numba, pyarrow) nor the
pydantic models of the engine. Each case runs in a fresh interpreter and reads its
`sys.modules`."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from cloudtwin.cli.app import COMMANDS, _full_app, main
from cloudtwin.cli.startup import BLAS_THREADS, collector_paused, thawed_at_end

REPO = Path(__file__).resolve().parents[2]

HEAVY = ("numpy", "scipy", "duckdb", "lark", "numba", "pyarrow", "pandas")

#: Runs `cloudtwin ARGS` in this interpreter, then prints what it imported: the heavy
#: libraries, the cloudtwin modules that define pydantic models, and the command modules.
PROBE = """
import contextlib, io, json, sys
from cloudtwin.cli.app import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
loaded = list(sys.modules.items())
BaseModel = sys.modules["pydantic"].BaseModel if "pydantic" in sys.modules else None
models = sorted(
    name for name, module in loaded if name.startswith("cloudtwin.") and BaseModel is not None
    and any(isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == name
            for v in vars(module).values())
)
print(json.dumps({
    "code": code, "help": out.getvalue(),
    "heavy": sorted({n.partition(".")[0] for n, _ in loaded} & set(HEAVY)),
    "models": models,
    "commands": sorted(n for n, _ in loaded if n.startswith(("cloudtwin.cli.", "cloudtwin.service."))),
}))
""".replace("HEAVY", repr(HEAVY))


def _probe(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_root_help_lists_every_command_without_importing_one() -> None:
    found = _probe("--help")
    assert found["code"] == 0 and (found["heavy"], found["models"]) == ([], [])
    modules = {where.partition(":")[0] for where, _ in COMMANDS.values()}
    assert not modules & set(found["commands"])  # type: ignore[arg-type]
    listed = [line.split()[0] for line in str(found["help"]).split("Commands:")[1].splitlines() if line]
    assert listed == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_commands_help_imports_neither_heavy_libraries_nor_engine_models(name: str) -> None:
    found = _probe(name, "--help")
    assert found["code"] == 0 and f"Usage: cloudtwin {name}" in str(found["help"])
    assert (found["heavy"], found["models"]) == ([], [])
    others = {where.partition(":")[0] for n, (where, _) in COMMANDS.items()}
    others -= {COMMANDS[name][0].partition(":")[0]}
    assert not others & set(found["commands"])  # type: ignore[arg-type]


def test_each_listed_line_is_its_commands_own_help() -> None:
    """The lines `cloudtwin --help` shows come from COMMANDS, not from the commands
    themselves (they are not imported): each must be the first paragraph of its command's help."""
    group = typer.main.get_command(_full_app())
    ctx = typer.Context(group)
    for name, (_, line) in COMMANDS.items():
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert command.get_short_help_str(10**6) == line, name


MISSING = "no-such-scenario.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["run", MISSING],
        ["compare", MISSING],
        ["nccl-tests", MISSING],
        ["train", MISSING],
        ["hpl", MISSING],
        ["evaluate", MISSING],
        ["diagnose", MISSING],
        ["sweep", MISSING, "--vary", "seed=1,2"],
        ["federate", "plan", MISSING],
        ["migrate", "run", MISSING],
        ["nic", "offload", MISSING],
        ["nic", "run", "no-such-program.p4", "--pcap", "examples/p4/host-frames.pcap"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_a_missing_input_file_is_refused_before_the_command_imports_its_work(args: list[str]) -> None:
    """The input file is checked while the line is parsed (the same line reading it would
    give), so a typo costs a blink, not the simulator's imports."""
    found = _probe(*args)
    assert found["code"] == 2 and (found["heavy"], found["models"]) == ([], [])


def test_start_up_pauses_the_collector_freezes_what_it_made_and_the_command_thaws_it() -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with thawed_at_end():
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # resumed once, at the outermost
            made = [[i] for i in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= len(made)
    assert gc.get_freeze_count() == 0


def test_main_leaves_the_collector_running_and_nothing_frozen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nic", "--help"]) == 0 and "Usage: cloudtwin nic" in capsys.readouterr().out
    assert gc.isenabled() and gc.get_freeze_count() == 0


FAULTS = """
import resource, sys
import numpy as np
from cloudtwin.cli.startup import keep_freed_blocks
if sys.argv[1] == "keep" and not keep_freed_blocks():
    print("no mallopt")
    raise SystemExit
np.ones(48 << 20, dtype=np.uint8)  # made and freed once first
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    np.ones(48 << 20, dtype=np.uint8)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_kept_freed_blocks_are_not_faulted_in_again() -> None:
    """A 48 MiB array made and freed ten times: mapped fresh each time by default (its pages
    faulted in each time: 12,288, numpy asked not to take huge pages), served from the
    kept heap after `keep_freed_blocks`."""
    faults = {}
    # numpy asks for huge pages for arrays of 4 MiB and more: where the kernel has them, a
    # fresh 48 MiB array faults in 24 pages, not 12,288, and the two cases look alike
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0"}
    for how in ("default", "keep"):
        done = subprocess.run(
            [sys.executable, "-c", FAULTS, how], capture_output=True, text=True, check=True, env=env
        )
        if done.stdout.strip() == "no mallopt":
            pytest.skip("the C library has no mallopt (not glibc)")
        faults[how] = int(done.stdout)
    assert faults["default"] > 1000 and faults["keep"] * 10 < faults["default"]


def test_the_cli_asks_openblas_for_one_thread_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command runs numpy's OpenBLAS with one thread (its pool cost about 0.09 s of CPU
    at numpy's import); a thread count the user set is left as it is."""
    for name in BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    assert main(["nic", "--help"]) == 0
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert main(["nic", "--help"]) == 0
    assert "OPENBLAS_NUM_THREADS" not in os.environ


THREADS = """
import os, sys
from cloudtwin.cli.app import main
main(sys.argv[1:])
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_a_command_that_imports_numpy_runs_one_thread(tmp_path: Path) -> None:
    p4 = REPO / "examples" / "p4"
    args = ["nic", "run", str(p4 / "vxlan_gateway.p4"), "--entries", str(p4 / "vxlan_gateway.entries.yaml")]
    args += ["--pcap", str(p4 / "host-frames.pcap"), "--out", str(tmp_path / "out.pcap")]
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS} | {"XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", THREADS, *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "1"
