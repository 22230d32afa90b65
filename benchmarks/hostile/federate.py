"""Hostile input for `cloudtwin federate` (issue 24): tokens files others can read, adapter
programs that answer half a line, garbage, huge lines or nothing, answers of the wrong
shape, command lines that do not split, federations of 10,000 and 100,000 sites, WAN links
listed twice in either order, and `federate serve` saying where it listens.

`cases` are single `cloudtwin` calls; `probes` need a controller running (the agent's) or
a server to ask (serve's URL). `benchmarks/bad_inputs.py` runs both (ok or clean is a pass).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "intercloud.yaml")
ONE_CLOUD = str(REPO / "examples" / "one-cloud.yaml")
CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")
ADMIN_ENV, SITE_ENV = "CLOUDTWIN_FEDERATION_TOKEN", "CLOUDTWIN_SITE_TOKEN"

Case = tuple[str, list[str], bytes | None]
Probe = tuple[str, Callable[[], tuple[str, str]]]


def _tokens_cases(tmp: Path) -> list[Case]:
    """Every command that reads a tokens file, with the file readable by others (or not a file)."""
    out: list[Case] = []
    body = json.dumps({"admin": "a" * 32, "sites": {"east": "e" * 32}})
    for mode in (0o644, 0o640, 0o666, 0o604, 0o660):
        folder = tmp / f"tokens-{mode:o}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "s.json").write_text("{}")
        tokens = folder / "s.json.tokens"
        tokens.write_text(body)
        tokens.chmod(mode)
        state = str(folder / "s.json")
        out += [
            (f"tokens {mode:o}: status", ["federate", "status", "--state", state], None),
            (f"tokens {mode:o}: apply", ["federate", "apply", EXAMPLE, "--state", state], None),
            (f"tokens {mode:o}: serve", ["federate", "serve", "--state", state, "--port", "0"], None),
        ]
    odd = tmp / "tokens-odd"
    odd.mkdir(parents=True, exist_ok=True)
    (odd / "dir.json.tokens").mkdir(mode=0o700, exist_ok=True)
    if not (odd / "zero.json.tokens").exists():
        (odd / "zero.json.tokens").symlink_to("/dev/zero")
    big = odd / "big.json.tokens"
    big.write_bytes(b" " * (5 << 20))
    big.chmod(0o600)
    for name in ("dir", "zero", "big"):
        argv = ["federate", "apply", EXAMPLE, "--state", str(odd / f"{name}.json")]
        out.append((f"tokens file {name}: apply", argv, None))
    return out


def _adapter_command_cases() -> list[Case]:
    agent = ["federate", "agent", "east", "--controller", "http://127.0.0.1:1", "--once", "--adapter"]
    command = [*agent, "command", "--adapter-command"]
    return [
        ("adapter-command unclosed single quote", [*command, "'adapter"], None),
        ("adapter-command unclosed double quote", [*command, 'run "half'], None),
        ("adapter-command trailing backslash", [*command, "run \\"], None),
        ("adapter-command empty", [*command, ""], None),
        ("adapter-command blank", [*command, "   "], None),
        ("adapter unknown", [*agent, "nonsense"], None),
        ("adapter-timeout 0", [*command, "true", "--adapter-timeout", "0"], None),
    ]


def _sites(n: int, wan: str = "") -> str:
    lines = ["sites:", *(f"- {{name: s{i}}}" for i in range(n))]
    if wan == "ring":
        lines += ["wan:", *(f"- {{between: [s{i}, s{(i + 1) % n}]}}" for i in range(n))]
    return "\n".join(lines) + "\n"


def _evaluate_cases(tmp: Path) -> list[Case]:
    files = {
        "10,000 sites, every pair joined": _sites(10_000),
        "10,000 sites in a WAN ring": _sites(10_000, "ring"),
        "100,000 sites": _sites(100_000),
        "1,001 sites": _sites(1_001),
    }
    out: list[Case] = []
    for label, text in files.items():
        path = tmp / f"sites-{label.split()[0].replace(',', '')}-{len(text)}.yaml"
        path.write_text(text)
        out.append((f"evaluate {label}", ["federate", "evaluate", str(path)], None))
    many = tmp / "sites-10000-every.yaml"
    many.write_text(_sites(10_000))
    out += [
        ("evaluate 10,000 sites, limits.sites lifted (memory refuses)",
         ["federate", "evaluate", str(many), "--set", "limits.sites=20000"], None),
        ("evaluate 10,000 sites via cloudtwin evaluate",
         ["evaluate", str(many), "--no-store", "--json"], None),
        ("evaluate limits.sites=0", ["federate", "evaluate", EXAMPLE, "--set", "limits.sites=0"], None),
        ("evaluate limits.sites=2", ["federate", "evaluate", EXAMPLE, "--set", "limits.sites=2"], None),
        ("evaluate limits.sites=x", ["federate", "evaluate", EXAMPLE, "--set", "limits.sites=x"], None),
    ]
    return out


def _wan_cases() -> list[Case]:
    twice = "wan=[{between: [east, west]}, {between: [east, west], bandwidth: 1Gbps}]"
    swapped = "wan=[{between: [east, west], bandwidth: 1Gbps}, {between: [west, east]}]"
    third = "wan=[{between: [east, lab]}, {between: [west, lab]}, {between: [lab, east]}]"
    cloud = "federation.wan=[{between: [east, west]}, {between: [west, east]}]"
    out: list[Case] = []
    for label, value in (("same order", twice), ("both orders", swapped), ("third link", third)):
        for command in ("plan", "evaluate", "apply", "reachability"):
            argv = ["federate", command, EXAMPLE, "--set", value]
            out.append((f"WAN pair twice, {label}: federate {command}", argv, None))
    argv = ["migrate", "run", ONE_CLOUD, "--json", "--set", cloud]
    out.append(("WAN pair twice in a cloud: migrate run", argv, None))
    return out


def cases(tmp: Path) -> list[Case]:
    """Each a single `cloudtwin` call."""
    return _tokens_cases(tmp) + _adapter_command_cases() + _evaluate_cases(tmp) + _wan_cases()


# -- probes: a served controller and an agent with a hostile adapter program ------------------

ADAPTERS = {
    "half a line, then silence": "w('{\"ok\": tr'); time.sleep(3600)",
    "half a line, then exit": "w('{\"ok\": tr')",
    "garbage bytes": "sys.stdout.buffer.write(bytes(range(256)) + b'\\n')",
    "a 20 MB line": "w('x' * (20 << 20) + '\\n'); time.sleep(3600)",
    "a 20 MB line, no newline": "w('x' * (20 << 20)); time.sleep(3600)",
    "never answers": "time.sleep(3600)",
    "never answers, ignores SIGTERM": "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)",
    "exits at once": "sys.exit(3)",
    "answers []": "w('[]\\n')",
    "answers \"ok\"": "w('\"ok\"\\n')",
    "answers null": "w('null\\n')",
    "segments a string": "w(json.dumps({'ok': True, 'segments': 'all'}) + '\\n')",
    "segments of numbers": "w(json.dumps({'ok': True, 'segments': [1, 2]}) + '\\n')",
    "a segment missing fields": "w(json.dumps({'ok': True, 'segments': [{'network': 'x'}]}) + '\\n')",
    "no segments": "w(json.dumps({'ok': True}) + '\\n')",
    "ok false, empty error": "w(json.dumps({'ok': False, 'error': ''}) + '\\n')",
    "ok false, error a number": "w(json.dumps({'ok': False, 'error': 5}) + '\\n')",
    "ok a string": "w(json.dumps({'ok': 'yes', 'segments': []}) + '\\n')",
    "deeply nested": "w('[' * 100000 + ']' * 100000 + '\\n')",
}


class _Controller:
    """A `federate serve` over the example's state, started on first use, stopped at exit."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.url: str | None = None
        self.process: subprocess.Popen[str] | None = None
        self.east = ""

    def start(self) -> str:
        if self.url is not None:
            return self.url
        state = self.tmp / "controller" / "s.json"
        env = {k: v for k, v in os.environ.items() if k != ADMIN_ENV}
        subprocess.run([str(CLOUDTWIN), "federate", "apply", EXAMPLE, "--state", str(state), "--json"],
                       env=env, capture_output=True, check=True, timeout=120)
        self.east = json.loads(state.with_name("s.json.tokens").read_text())["sites"]["east"]
        self.process = subprocess.Popen(
            [str(CLOUDTWIN), "federate", "serve", "--state", str(state), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        atexit.register(self.stop)
        assert self.process.stdout is not None
        if not select.select([self.process.stdout], [], [], 60)[0]:
            raise RuntimeError("federate serve printed no URL within 60 s")
        self.url = self.process.stdout.readline().split(" on ", 1)[1].split()[0].rstrip("/")
        return self.url

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def _run_one() -> Callable[[list[str], bytes | None], tuple[str, float, int, str]]:
    spec = importlib.util.spec_from_file_location("bad_inputs", REPO / "benchmarks" / "bad_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run_one


def _agent_probe(controller: _Controller, program: Path) -> Callable[[], tuple[str, str]]:
    def probe() -> tuple[str, str]:
        url = controller.start()
        argv = ["federate", "agent", "east", "--controller", url, "--once", "--adapter", "command",
                "--adapter-command", f"{sys.executable} {program}", "--adapter-timeout", "3"]
        os.environ[SITE_ENV] = controller.east
        try:
            kind, _, _, last = _run_one()(argv, None)
        finally:
            os.environ.pop(SITE_ENV, None)
        return kind, last

    return probe


def _serve_url_probe(tmp: Path) -> Callable[[], tuple[str, str]]:
    def probe() -> tuple[str, str]:
        import urllib.request

        server = subprocess.Popen(
            [str(CLOUDTWIN), "federate", "serve", "--state", str(tmp / "url" / "s.json"), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, ADMIN_ENV: "a" * 24},
        )
        try:
            assert server.stdout is not None
            if not select.select([server.stdout], [], [], 60)[0]:
                return "no URL", ""
            line = server.stdout.readline().strip()
            url = line.split(" on ", 1)[1].split()[0]
            with urllib.request.urlopen(f"{url}federation/status", timeout=10) as answer:
                return ("ok" if answer.status == 200 else f"HTTP {answer.status}"), line
        finally:
            server.terminate()
            server.wait(timeout=30)

    return probe


def probes(tmp: Path) -> list[Probe]:
    """An agent's adapter program per hostile behaviour, and serve's URL."""
    controller = _Controller(tmp)
    folder = tmp / "adapters"
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Probe] = [("federate serve prints a URL that answers", _serve_url_probe(tmp))]
    head = "import json, signal, sys, time\nw = lambda s: (sys.stdout.write(s), sys.stdout.flush())\n"
    for n, (label, body) in enumerate(ADAPTERS.items()):
        program = folder / f"adapter{n}.py"
        program.write_text(f"{head}sys.stdin.readline()\n{body}\n")
        out.append((f"agent --once, adapter {label}", _agent_probe(controller, program)))
    return out


if __name__ == "__main__":  # python benchmarks/hostile/federate.py: run this room's cases alone
    import tempfile

    run_one = _run_one()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chdir(tmp)
        failures = 0
        for label, argv, stdin in cases(tmp):
            kind, elapsed, _, last = run_one(argv, stdin)
            failures += kind not in ("ok", "clean")
            print(f"{kind:9} {elapsed:6.1f}s  {label}: {last[:110]}", flush=True)
        for label, check in probes(tmp):
            kind, last = check()
            failures += kind not in ("ok", "clean")
            print(f"{kind:9}         {label}: {last[:110]}", flush=True)
        print(f"{failures} failures")
