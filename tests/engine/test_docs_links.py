"""The documents hold together: every relative link in README.md, docs/ and the top-level pages
leads to a file (and, with #anchor, to a heading of it), the README stays short with the two
commands on its first screen, and BENCHMARKS.md stays within its size."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set:
    """GitHub's anchors for the headings of a Markdown page (lower case, punctuation dropped,
    spaces to hyphens); fenced code is not headings."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def links(page: Path):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):          # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        yield target, (page.parent / path).resolve() if path else page, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target, path, anchor in links(page):
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_the_checker_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Using it, from Python\n\n[x](b.md) [y](a.md#using-it-from-python)"
                                   " [z](a.md#nowhere) [w](https://example.org/x.md)\n")
    found = {target: (path.exists(), anchor in anchors(path) if path.exists() else None)
             for target, path, anchor in links(tmp_path / "a.md")}
    assert found == {"b.md": (False, None), "a.md#using-it-from-python": (True, True),
                     "a.md#nowhere": (True, False)}


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:30])
    assert "make demo" in first_screen and "make test" in first_screen


def test_benchmarks_within_its_size():
    assert len((ROOT / "BENCHMARKS.md").read_text()) <= 40_000
