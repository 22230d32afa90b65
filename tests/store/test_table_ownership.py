"""The store owns every table it holds: SQL that makes or writes a table lives only in store/."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "cloudtwin"

#: SQL that creates, alters, fills or empties a table (or a view, index or sequence).
TABLE_WRITES = re.compile(
    r"\b(CREATE\s+(OR\s+REPLACE\s+)?(TEMP(ORARY)?\s+)?(TABLE|VIEW|INDEX|SEQUENCE)"
    r"|ALTER\s+TABLE|DROP\s+(TABLE|VIEW)|INSERT\s+(OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET"
    r"|COPY\s+\w+\s+FROM)\b",
    re.IGNORECASE,
)


def table_writes_outside_the_store(src: Path) -> list[str]:
    """`path:line: text` of every table-writing statement under `src` but outside store/."""
    found = []
    for path in sorted(src.rglob("*.py")):
        if path.relative_to(src).parts[0] == "store":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if TABLE_WRITES.search(line):
                found.append(f"{path.relative_to(src)}:{number}: {line.strip()}")
    return found


def test_no_table_is_made_or_written_outside_the_store() -> None:
    assert table_writes_outside_the_store(SRC) == []


def test_the_check_sees_a_stray_table(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "ok.py").write_text('DDL = "CREATE TABLE runs (id INTEGER)"\n')
    (tmp_path / "diagnosis").mkdir()
    (tmp_path / "diagnosis" / "stray.py").write_text(
        'DDL = "create table twin_x (a INT)"\nSQL = "INSERT INTO twin_x BY NAME SELECT * FROM rows"\n'
    )
    assert [hit.split(":")[:2] for hit in table_writes_outside_the_store(tmp_path)] == [
        ["diagnosis/stray.py", "1"],
        ["diagnosis/stray.py", "2"],
    ]
