"""The package layering of DESIGN.md, checked on the source: imports go one way, only
`twin/run.py` (besides the engine itself) calls the engine's simulation entry points, and
the P4 package is reached through its face."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "cloudtwin"
DESIGN = Path(__file__).resolve().parents[2] / "shared" / "DESIGN.md"

#: DESIGN.md's package table, from the bottom floor up: a package imports only from the
#: rows before its own (the shared vocabulary may use itself).
FLOORS: list[tuple[str, ...]] = [
    ("errors", "files", "flows", "hashing", "headers"),
    ("scenario",),
    ("ops", "p4"),
    ("topology", "cluster", "store"),
    ("tenancy",),
    ("engine",),
    ("routing", "smartnic", "workloads", "intercloud"),
    ("faults", "mobility"),
    ("twin",),
    ("evaluation", "diagnosis"),
    ("sweep",),
    ("cli", "service"),
]
#: Names that DESIGN.md's table may not list yet (it lives outside the repository; the lead
#: engineer adds them there): a module of the bottom floor, and the P4 package, which DESIGN
#: places on the floor of `ops/`.
UNLISTED = {"files", "p4"}
FLOOR = {name: i for i, row in enumerate(FLOORS) for name in row}
ENTRY_POINTS = {"simulate", "Simulation"}
MAY_SIMULATE = {"engine"}
THE_DOOR = Path("twin") / "run.py"
#: A package that others import through its `__init__` only (its face).
FACED = {"p4"}


def _package(module: str) -> str | None:
    """`cloudtwin.twin.jobs` -> `twin`; the root package itself -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "cloudtwin" and len(parts) > 1 else None


def _sources() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        out.append((relative.parts[0].removesuffix(".py"), path))
    return out


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names imported from it, line) of every import, in functions and
    TYPE_CHECKING blocks too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [alias.name for alias in node.names]
            found.append((node.module, names, node.lineno))
            found += [(f"{node.module}.{n}", [], node.lineno) for n in names]
    return found


def test_every_package_has_a_floor() -> None:
    here = {package for package, path in _sources() if package != "__init__"}
    assert sorted(here - set(FLOOR)) == [], "a package missing from DESIGN.md's table"


def test_no_package_imports_one_above_it() -> None:
    bad = []
    for package, path in _sources():
        if package == "__init__":
            continue
        for module, _, line in _imports(path):
            target = _package(module)
            if target is None or target == package or target not in FLOOR:
                continue
            same_vocabulary = FLOOR[package] == FLOOR[target] == 0
            if FLOOR[target] >= FLOOR[package] and not same_vocabulary:
                bad.append(f"{path.relative_to(SRC)}:{line} imports {module}")
    assert bad == []


def test_only_the_twin_calls_the_engine() -> None:
    bad = []
    for package, path in _sources():
        if package in MAY_SIMULATE or path.relative_to(SRC) == THE_DOOR:
            continue
        for module, names, line in _imports(path):
            if _package(module) == "engine" and ENTRY_POINTS & set(names):
                bad.append(f"{path.relative_to(SRC)}:{line} imports {sorted(ENTRY_POINTS & set(names))}")
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bengine(\.simulator)?\.(simulate|Simulation)\b", text):
            bad.append(f"{path.relative_to(SRC)} reaches the engine through its module")
    assert bad == []


def test_the_door_is_where_the_check_looks() -> None:
    text = (SRC / THE_DOOR).read_text(encoding="utf-8")
    assert "Simulation(" in text


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from cloudtwin.evaluation.run import run_scenario\n")
    assert _imports(source)[0][0] == "cloudtwin.evaluation.run"
    assert FLOOR["evaluation"] > FLOOR["twin"] > FLOOR["faults"] > FLOOR["engine"]


@pytest.mark.skipif(not DESIGN.exists(), reason="DESIGN.md is kept beside the repository (../shared)")
def test_floors_are_designs_table() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    table = text[text.index("| package | holds |") :].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    names = [re.findall(r"`([a-z_]+(?:/|\.py))`", row.split("|")[1]) for row in rows]
    floors = [tuple(name.strip("/").removesuffix(".py") for name in row) for row in names]
    def listed(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        return [tuple(name for name in row if name not in UNLISTED) for row in rows]

    assert listed(floors) == listed(FLOORS)


@pytest.mark.skipif(not DESIGN.exists(), reason="DESIGN.md is kept beside the repository (../shared)")
def test_every_name_in_designs_table_is_in_the_tree() -> None:
    missing = [
        name
        for row in FLOORS
        for name in row
        if not (SRC / name).is_dir() and not (SRC / f"{name}.py").is_file()
    ]
    assert missing == []



def _is_face_name(module: str) -> bool:
    """`cloudtwin.p4.run_pcap` (a name of the face, as `_imports` lists `from cloudtwin.p4
    import run_pcap`) rather than a module or package inside the package."""
    parts = module.split(".")
    inside = SRC.joinpath(*parts[1:])
    return len(parts) == 3 and not inside.with_suffix(".py").exists() and not inside.is_dir()


def _around_the_face(sources: list[tuple[str, Path]]) -> list[str]:
    """Imports of a module inside a faced package from outside it."""
    bad = []
    for package, path in sources:
        for module, _, line in _imports(path):
            target = _package(module)
            inside = len(module.split(".")) > 2 and not _is_face_name(module)
            if target in FACED and target != package and inside:
                bad.append(f"{path.name}:{line} imports {module}")
    return bad


def _private_crossings(sources: list[tuple[str, Path]]) -> list[str]:
    """Private (underscore) names imported from a module of a faced package, or by one."""
    bad = []
    for package, path in sources:
        for module, names, line in _imports(path):
            if module.startswith("cloudtwin.") and (_package(module) in FACED or package in FACED):
                private = [n for n in names if n.startswith("_")]
                if private:
                    bad.append(f"{path.name}:{line} imports {private} from {module}")
    return bad


def test_faced_packages_are_reached_through_their_face() -> None:
    assert _around_the_face(_sources()) == []


def test_no_private_name_crosses_a_module_of_a_faced_package() -> None:
    assert _private_crossings(_sources()) == []


def test_the_face_checks_see_a_violation(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        "from cloudtwin.p4 import run_pcap\n"
        "from cloudtwin.p4.arch import pna\n"
        "from cloudtwin.p4.datapath import Datapath, _private\n"
    )
    assert _around_the_face([("smartnic", source)]) == [
        "x.py:2 imports cloudtwin.p4.arch",
        "x.py:2 imports cloudtwin.p4.arch.pna",
        "x.py:3 imports cloudtwin.p4.datapath",
        "x.py:3 imports cloudtwin.p4.datapath.Datapath",
        "x.py:3 imports cloudtwin.p4.datapath._private",
    ]
    assert _around_the_face([("p4", source)]) == []  # inside the package: any of its modules
    assert _private_crossings([("p4", source)]) == ["x.py:3 imports ['_private'] from cloudtwin.p4.datapath"]
