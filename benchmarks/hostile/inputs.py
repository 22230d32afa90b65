"""Hostile inputs of the scenario, flow-file and number readers (issue 24, room `inputs`).

Files that are not files (FIFOs, devices, /proc, folders, symlink loops) where a scenario,
a flow file or a token file is meant; sizes taken from the input instead of from limits
(a 10M-row flow CSV, limits raised to 2e7 and 1e9 flows, storms of 1e6 s and 1e9 s,
limits.memory past the machine); and numbers that are not plain ASCII decimal (Arabic-
Indic and full-width digits, `1__000`, ` 5`, `0x10`, `1e400`, `nan`, `inf`) in flow files,
--set values and flags. `cases(tmp)` is read by benchmarks/bad_inputs.py.
"""

from __future__ import annotations

import os
from pathlib import Path

SMALL = "name: s\nfabric: {kind: leaf-spine, leaves: 2, spines: 2, hosts_per_leaf: 2}\n"
HEADER = "source,destination,bytes\n"
ARABIC_2, FULL_2 = "\u0662", "\uff12"

Case = tuple[str, list[str], bytes | None]


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _not_files(tmp: Path) -> dict[str, Path]:
    """Paths that name anything but a regular file."""
    fifo = tmp / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    loop_a, loop_b = tmp / "loop-a", tmp / "loop-b"
    if not loop_a.is_symlink():
        loop_a.symlink_to(loop_b)
        loop_b.symlink_to(loop_a)
    dangling = tmp / "dangling"
    if not dangling.is_symlink():
        dangling.symlink_to(tmp / "nowhere")
    folder = tmp / "folder"
    folder.mkdir(exist_ok=True)
    return {
        "FIFO": fifo,
        "/dev/zero": Path("/dev/zero"),
        "/dev/urandom": Path("/dev/urandom"),
        "/proc/self/mem": Path("/proc/self/mem"),
        "/proc/self/status": Path("/proc/self/status"),
        "a folder": folder,
        "a symlink loop": loop_a,
        "a dangling symlink": dangling,
    }


def _flow_scenario(tmp: Path, name: str, flow_file: str | Path, extra: str = "") -> str:
    text = SMALL + f"workload: {{kind: flows, file: '{flow_file}'}}\n" + extra
    return str(_write(tmp / f"{name}.yaml", text))


def _file_cases(tmp: Path) -> list[Case]:
    out: list[Case] = []
    db = str(tmp / "serve.duckdb")
    for label, path in _not_files(tmp).items():
        out.append((f"run scenario {label}", ["run", str(path)], None))
        out.append((f"evaluate scenario {label}", ["evaluate", str(path), "--no-store"], None))
        out.append((f"federate plan scenario {label}", ["federate", "plan", str(path)], None))
        scenario = _flow_scenario(tmp, f"flows-{label.strip('/').replace('/', '-')}", path)
        out.append((f"run flow file {label}", ["run", scenario], None))
        if label != "/proc/self/status":  # a small readable file: not a token, but no hang
            out.append(
                (f"serve --token-file {label}", ["serve", "--db", db, "--token-file", str(path)], None)
            )
    big = _write(tmp / "big.yaml", "name: b\n" + "# " + "x" * (5 << 20) + "\n")
    out.append(("run scenario of 5 MiB", ["run", str(big)], None))
    return out


def _size_cases(tmp: Path) -> list[Case]:
    ten_million = _write(tmp / "ten-million.csv", HEADER.encode() + b"0,1,9\n" * 10_000_000)
    small = _write(tmp / "small.csv", HEADER + "0,2,1000\n1,3,1000\n")
    huge = str(
        _write(tmp / "huge.yaml", "name: h\nfabric: {kind: leaf-spine, leaves: 16, hosts_per_leaf: 62500}\n")
    )
    storm = (
        "nic:\n  profile: janus-100g\n  new_flows_per_s: 20000\n"
        "  storm: {{new_flows_per_s: 300000, start: 100ms, duration: {d}, flow_lifetime: 10ms}}\n"
    )
    out: list[Case] = [
        (
            "run 10M-row flow CSV (60 MB) over limits.flows",
            ["run", _flow_scenario(tmp, "ten-million", ten_million)],
            None,
        ),
        (
            "run 10M-row flow CSV, limits.flows=1000",
            ["run", _flow_scenario(tmp, "ten-million", ten_million), "--set", "limits.flows=1000"],
            None,
        ),
    ]
    for flows in ("20000000", "1000000000", "2e7"):
        out.append(
            (
                f"run small flow file, limits.flows={flows}",
                ["run", _flow_scenario(tmp, "small-flows", small), "--set", f"limits.flows={flows}"],
                None,
            )
        )
    for duration in ("1000000s", "1000000000s", "100min", "1e400s"):
        path = _write(tmp / f"storm-{duration}.yaml", SMALL + storm.format(d=duration))
        out.append((f"nic offload storm {duration}", ["nic", "offload", str(path)], None))
    for memory in ("1000TiB", "1EiB", "2EiB"):
        out.append(
            (
                f"run huge fabric limits.memory={memory}",
                ["run", huge, "--set", f"limits.memory={memory}", "--set", "limits.flows=2000000"],
                None,
            )
        )
    return out


def _flow_row_cases(tmp: Path) -> list[Case]:
    rows = {
        "two bytes columns": "source,destination,bytes,bytes\n0,2,1000,5\n",
        "two source columns": "source,source,destination,bytes\n0,1,2,1000\n",
        "looping path": "source,destination,bytes,path\n"
        "0,2,1000,host0/nic0 leaf0 spine0 leaf0 spine1 leaf1 host2/nic0\n",
        "path back to the source": "source,destination,bytes,path\n0,2,1000,host0/nic0 leaf0 host0/nic0\n",
        "Arabic-Indic destination": f"{HEADER}0,{ARABIC_2},1000\n",
        "full-width destination": f"{HEADER}0,host{FULL_2},1000\n",
        "full-width bytes": f"{HEADER}0,2,\uff11\uff10\uff10\uff10\n",
        "Arabic-Indic start": "source,destination,bytes,start\n0,2,1000,\u0661\n",
        "Arabic-Indic qps": f"source,destination,bytes,qps\n0,2,1000,{ARABIC_2}\n",
        "bytes 1__000": f"{HEADER}0,2,1__000\n",
        "bytes 1_000 (grouped digits: read)": f"{HEADER}0,2,1_000\n",
        "bytes 0x10": f"{HEADER}0,2,0x10\n",
        "bytes 1e400": f"{HEADER}0,2,1e400\n",
        "bytes nan": f"{HEADER}0,2,nan\n",
        "bytes inf": f"{HEADER}0,2,inf\n",
        "start nan": "source,destination,bytes,start\n0,2,1000,nan\n",
        "start inf": "source,destination,bytes,start\n0,2,1000,inf\n",
        "start 1e400": "source,destination,bytes,start\n0,2,1000,1e400\n",
        "qps 0x10": "source,destination,bytes,qps\n0,2,1000,0x10\n",
        "qps 1e400": "source,destination,bytes,qps\n0,2,1000,1e400\n",
    }
    out: list[Case] = []
    for i, (label, text) in enumerate(rows.items()):
        path = _write(tmp / f"rows-{i}.csv", text)
        out.append((f"run flow file: {label}", ["run", _flow_scenario(tmp, f"rows-{i}", path)], None))
    inline = (
        SMALL + "workload: {kind: flows, rows: [{source: 0, destination: 2, bytes: 1000, start: .nan}]}\n"
    )
    out.append(
        ("run inline flow row start .nan", ["run", str(_write(tmp / "inline-nan.yaml", inline))], None)
    )
    return out


def _number_cases(tmp: Path) -> list[Case]:
    small = str(_write(tmp / "small-scenario.yaml", SMALL))
    sets = {
        "fabric.leaves": [
            ARABIC_2,
            FULL_2,
            "1__0",
            "0x10",
            "1e400",
            "nan",
            "inf",
            ".inf",
            "1:30",
            "'\u0662'",
        ],
        "seed": ["1_000", " 5", "0x10", "1e400", "nan", "-.inf"],
        "limits.flows": ["1e400", "inf", "\uff11\uff10"],
        "fabric.host_link": ["\u0661\u0660\u0660Gbps", "nanGbps", "1e400Gbps"],
        "workload.size": ["1EiB", "2EiB", "\uff11GiB"],
    }
    out: list[Case] = []
    for key, values in sets.items():
        for value in values:
            out.append((f"run --set {key}={value!r}", ["run", small, "--set", f"{key}={value}"], None))
    plan = ["migrate", "plan", "--memory", "4GiB", "--bandwidth", "10Gbps"]
    for flag, value in [
        ("--dirty-rate", "0MiB/s"),
        ("--dirty-rate", "0"),
        ("--dirty-rate", "\u0665\u0660MiB/s"),
        ("--dirty-rate", "nanMiB/s"),
        ("--dirty-rate", "1e400MiB/s"),
        ("--working-set", "0GiB"),
        ("--memory", "1EiB"),
        ("--memory", "2EiB"),
        ("--memory", "\uff14GiB"),
    ]:
        out.append((f"migrate plan {flag} {value!r}", [*plan, flag, value], None))
    db = str(tmp / "none.duckdb")
    for value in ["\u0663", "\uff13", " 3", "3 ", "0x10", "1e400", "nan", "inf", "1__0"]:
        out.append(
            (f"logs search --limit {value!r}", ["logs", "search", "x", "--db", db, "--limit", value], None)
        )
        out.append((f"results show {value!r}", ["results", "show", value, "--db", db], None))
    examples = Path(__file__).resolve().parents[2] / "examples"
    for value in ["\u0666\u0664", "6\uff14", "64,1e400", "nan"]:
        out.append((f"train --gpus {value!r}", ["train", str(examples / "vela.yaml"), "--gpus", value], None))
    return out


def cases(tmp: Path) -> list[Case]:
    """Every case of the room: label, cloudtwin argv, stdin."""
    return _file_cases(tmp) + _size_cases(tmp) + _flow_row_cases(tmp) + _number_cases(tmp)
