"""`python -m bench --markdown BENCHMARKS.md` keeps working on the document as it is laid out:
tables rewritten from the saved results land between the bench markers, each once, with the run
that measured it, and nothing outside the markers changes."""

import json
import shutil
from pathlib import Path

from bench.__main__ import END, START, write_markdown
from bench.common import Column, Table

ROOT = Path(__file__).resolve().parents[2]


def saved_tables():
    """Every table in bench/results/ as its run left it, with that run's meta."""
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        data = json.loads(path.read_text())
        yield Table(path.stem, data["title"], data["caption"], [Column(**c) for c in data["columns"]],
                    data["rows"]), data["meta"]


def outside_markers(text):
    head, rest = text.split(START, 1)
    return head, rest.split(END, 1)[1]


def test_saved_results_rewrite_the_tables_and_nothing_else(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    shutil.copy(ROOT / "BENCHMARKS.md", path)
    before = path.read_text()
    tables = list(saved_tables())
    assert tables
    for table, meta in tables:
        write_markdown(path, [table], meta)
    after = path.read_text()
    assert outside_markers(after) == outside_markers(before)
    block = after.split(START, 1)[1].split(END, 1)[0]
    for table, meta in tables:
        assert block.count(f"### {table.title}\n") == 1
        assert table.markdown() in block
        data_line = next(line for line in block.splitlines() if f"bench/results/{table.name}.json" in line)
        assert meta["date"] in data_line and meta["commit"] in data_line and meta["command"] in data_line
    for table, meta in tables:                         # a second pass changes nothing
        write_markdown(path, [table], meta)
    assert path.read_text() == after


def test_a_new_table_is_appended_and_replaced_in_place(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    shutil.copy(ROOT / "BENCHMARKS.md", path)
    table, meta = next(saved_tables())
    new = Table("made_up", "A made-up table", "Caption.", [Column("x", "x")], [{"x": 12345}])
    write_markdown(path, [new], meta)
    block = path.read_text().split(START, 1)[1].split(END, 1)[0]
    assert block.rindex("\n### ") == block.index("\n### A made-up table")      # after every other table
    assert f"### {table.title}" in block
    new.rows = [{"x": 67890}]
    write_markdown(path, [new], meta)
    block = path.read_text().split(START, 1)[1].split(END, 1)[0]
    assert block.count("### A made-up table") == 1 and "| 67890 |" in block and "| 12345 |" not in block
