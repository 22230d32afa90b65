"""Hostile regular expressions (log formats, masks) on the CLI, and probes of a running service.

`cases` are CLI runs for `benchmarks/bad_inputs.py`: formats and masks that backtrack
catastrophically in Python's `re` (nested quantifiers, alternation blow-ups) must parse
in linear time (ok), and those RE2 cannot run in linear time (back-references,
look-around, possessive and atomic groups, huge repetition counts) must be refused in
one line (clean). `probes` start `cloudtwin serve` on a free local port: a hostile ingest
must leave `GET /api/runs` answering within 1 s, SIGTERM must end it within 2 s, and bad
jobs must be 400 naming the field.

    python benchmarks/hostile/service.py       # runs the cases and probes, prints outcomes
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

CLOUDTWIN = Path(sys.executable).with_name("cloudtwin")

#: Formats whose regular expression backtracks exponentially in Python over a's: RE2 runs
#: them in linear time (the lines do not fit, so they are stored as unparsed).
BACKTRACKING_FORMATS = [
    "(a+)+b<Content>",
    "(a*)*b<Content>",
    "((a+)+)+b <Content>",
    "(a|a)+b<Content>",
    "(a|aa)+b<Content>",
    "(a|a?)+b<Content>",
    "(.*a){25}b<Content>",
    "(\\w+\\s?)+$ <Content>",
    "<Level> (a+)+b <Content>",
]
#: Formats RE2 cannot run in linear time (or at all): refused in one line.
REFUSED_FORMATS = [
    "(a)\\1<Content>",
    "(?P<x>a)(?P=x)<Content>",
    "(?=a)a<Content>",
    "(?!b)a<Content>",
    "a++<Content>",
    "(?>a+)b<Content>",
    "a{100000}{100000}<Content>",
    "(?:a{1000}){1000}<Content>",
    "a{1001}<Content>",
]
BACKTRACKING_MASKS = ["(a+)+b", "(a|aa)*c", "(x+x+)+y", "(.*a){25}b", "(a|a?)+$"]
REFUSED_MASKS = ["(a)\\1", "(?<=a)b", "(?<!a)b", "a(?=b)", "a{100000}{100000}", "(?:a{1000}){1000}",
                 "a++", "("]


def _hostile_log(tmp: Path) -> Path:
    path = tmp / "aaaa.log"
    path.write_text(("a" * 30 + "\n") * 20 + ("a" * 5000 + "\n") * 20 + "x" * 40 + "\n")
    return path


def cases(tmp: Path) -> list[tuple[str, list[str], bytes | None]]:
    log = str(_hostile_log(tmp))
    a_lines = ("a" * 40 + "\n").encode() * 50
    out: list[tuple[str, list[str], bytes | None]] = []
    for fmt in BACKTRACKING_FORMATS + REFUSED_FORMATS:
        out.append((f"logs parse --format {fmt!r}", ["logs", "parse", log, "--format", fmt, "--json"], None))
    for fmt in BACKTRACKING_FORMATS[:3] + REFUSED_FORMATS[:3]:
        store = ["--format", fmt, "--db", str(tmp / "hostile-ingest.duckdb")]
        out.append((f"logs ingest --format {fmt!r}", ["logs", "ingest", log, *store], None))
        out.append((f"logs ingest - --format {fmt!r} (stdin)",
                    ["logs", "ingest", "-", "--source", f"s{len(out)}", *store], a_lines))
    for mask in BACKTRACKING_MASKS + REFUSED_MASKS:
        out.append((f"logs parse --mask {mask!r}",
                    ["logs", "parse", log, "--format", "<Content>", "--mask", mask, "--json"], None))
        out.append((f"logs ingest --mask {mask!r}",
                    ["logs", "ingest", log, "--format", "<Content>", "--mask", mask,
                     "--db", str(tmp / "hostile-masks.duckdb")], None))
    notduck = tmp / "notduck.duckdb"
    notduck.write_text("not a database\n")
    out.append(("serve --db a text file", ["serve", "--db", str(notduck), "--port", "0",
                                           "--token-file", str(tmp / "never.token")], None))
    out.append(("serve --db a folder", ["serve", "--db", str(tmp), "--port", "0",
                                        "--token-file", str(tmp / "never.token")], None))
    return out


# -- probes of a running service ------------------------------------------------------


class _Service:
    """One `cloudtwin serve` for the probes, started by the first that needs it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""

    def start(self) -> None:
        if self.process is not None:
            return
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = self.tmp / "probe.token"
        log = (self.tmp / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [str(CLOUDTWIN), "serve", "--db", str(self.tmp / "probe.duckdb"), "--port", str(port),
             "--token-file", str(token)], stdout=log, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.request("GET", "/api/runs", timeout=2)[0] == 200:
                self.token = token.read_text().strip()
                return
            time.sleep(0.2)
        raise RuntimeError("cloudtwin serve did not start")

    def request(
        self, method: str, path: str, body: object = None, timeout: float = 10
    ) -> tuple[int, dict[str, object]]:
        """(status, JSON body); status 0 when the service did not answer in time."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"}
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")
        except (OSError, TimeoutError):
            return 0, {}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _field_error(status: int, body: dict[str, object], field: str) -> tuple[str, str]:
    error = body.get("error") if isinstance(body, dict) else None
    named = error.get("field") if isinstance(error, dict) else None
    message = str(error.get("message")) if isinstance(error, dict) else str(body)
    if status == 400 and named == field:
        return "clean", message
    return f"status {status} field {named!r}", message


def probes(tmp: Path) -> list[tuple[str, Callable[[], tuple[str, str]]]]:
    service = _Service(tmp)
    hostile = {"format": "(a+)+b<Content>", "source": "hostile", "text": ("a" * 40 + "\n") * 50}

    def hostile_then_runs() -> tuple[str, str]:
        service.start()
        status, body = service.request("POST", "/api/logs/ingest", hostile)
        if status != 202:
            return f"ingest status {status}", str(body)
        status, _ = service.request("GET", "/api/runs", timeout=1)
        return ("ok", "GET /api/runs answered") if status == 200 else ("hang", f"GET status {status}")

    def refused(body: dict[str, object], path: str, field: str) -> Callable[[], tuple[str, str]]:
        def probe() -> tuple[str, str]:
            service.start()
            return _field_error(*service.request("POST", path, body), field)

        return probe

    def sigterm() -> tuple[str, str]:
        service.start()
        assert service.process is not None
        service.request("POST", "/api/logs/ingest", hostile)
        service.process.send_signal(signal.SIGTERM)
        try:
            code = service.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            service.stop()
            return "hang", "still running 2 s after SIGTERM"
        return "ok", f"ended with {code} within 2 s of SIGTERM"

    example = "leaf-spine-perftest"
    return [
        ("service: hostile ingest, then GET /api/runs within 1 s", hostile_then_runs),
        ("service: unknown strategy is 400 naming strategies",
         refused({"example": example, "strategies": ["nosuch"]}, "/api/jobs", "strategies")),
        ("service: unknown strategy in an evaluate job",
         refused({"kind": "evaluate", "example": example, "strategies": ["ecmp", "x:y"]}, "/api/jobs",
                 "strategies")),
        ("service: unknown scenario key is 400 naming it",
         refused({"scenario_yaml": "name: x\nfabric:\n  spinez: 3\n"}, "/api/jobs", "fabric.spinez")),
        ("service: override without = names overrides",
         refused({"example": example, "overrides": ["fabric.leaves"]}, "/api/jobs", "overrides")),
        ("service: back-reference format is 400 naming format",
         refused({**hostile, "format": "(a)\\1<Content>"}, "/api/logs/ingest", "format")),
        ("service: look-ahead format is 400 naming format",
         refused({**hostile, "format": "(?=a)a<Content>"}, "/api/logs/ingest", "format")),
        ("service: SIGTERM with a hostile ingest ends within 2 s", sigterm),
    ]


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bad_inputs import run_one  # type: ignore[import-not-found]

    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.chdir(tmp)
        results = [(label, *run_one(argv, stdin)[::3]) for label, argv, stdin in cases(tmp)]
        results += [(label, *probe()) for label, probe in probes(tmp)]
        for label, kind, last in results:
            counts[kind] = counts.get(kind, 0) + 1
            flag = "" if kind in ("ok", "clean") else "  <--"
            print(f"{kind:9} {label}: {str(last)[:110]}{flag}", flush=True)
    print(json.dumps(counts, sort_keys=True))


if __name__ == "__main__":
    main()
