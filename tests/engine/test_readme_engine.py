"""The README's engine example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_engine_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"<!-- tests/engine/test_readme_engine.py runs this block -->\s*```python\n(.*?)```", text, re.S)
    assert block, "the README lost its engine example"
    exec(compile(block.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed[0] == "True" and float(printed[1]) <= 6e-6
