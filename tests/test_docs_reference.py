"""The reference docs stay reference: docs/strength.md and docs/performance.md open with a
current-figures table; bench/results/README.md indexes every stored result and names none that
is gone; every `bench/results/...` path a doc or the code cites exists (or names the commit
that holds it); no doc and no file name
refers to an internal work step ("stop 22")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
INDEX = RESULTS / "README.md"
FIGURES_HEADER = "| figure | value | command | date | machine |"
WORK_STEP = re.compile(r"\b[Ss]top[ _-]?\d")
RESULT_NAME = re.compile(r"[A-Za-z0-9_.-]+\.(?:jsonl|json|png|txt)\b")


def _stored_results() -> set[str]:
    """The files kept in bench/results/ (run directories and *.tmp are ignored by git)."""
    return {
        p.name
        for p in RESULTS.iterdir()
        if p.is_file() and p.name != "README.md" and not p.name.endswith(".tmp")
    }


def _docs() -> list[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "CHANGELOG.md", INDEX]


@pytest.mark.parametrize("doc", ["strength.md", "performance.md"])
def test_reference_docs_open_with_current_figures(doc):
    text = (ROOT / "docs" / doc).read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings and headings[0] == "## Current figures", headings[:1]
    section = text.split("## Current figures", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows and rows[0] == FIGURES_HEADER, rows[:1]
    # Every figure row names a date (YYYY-MM-DD) or points at the doc that holds the figure.
    for row in rows[2:]:
        assert re.search(r"\d{4}-\d{2}-\d{2}", row) or "](" in row, row


def test_the_results_index_names_every_stored_file_and_nothing_else():
    indexed = set(RESULT_NAME.findall(INDEX.read_text()))
    stored = _stored_results()
    assert stored - indexed == set(), "not in bench/results/README.md"
    # Names in the index that are not stored: only example output names (F.json, X.json, ...)
    # and the benchmarks' default patterns may be absent.
    missing = {n for n in indexed - stored if "<" not in n and n[0].islower() and len(n) > 8}
    assert missing == set(), "indexed but not in bench/results/"


def _expand(token: str) -> list[str]:
    """`a-{x,y}-b.json` -> [a-x-b.json, a-y-b.json]."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [
        name
        for alt in m.group(1).split(",")
        for name in _expand(token[: m.start()] + alt + token[m.end() :])
    ]


def test_every_cited_result_path_exists():
    stored = _stored_results()
    # `c3b8c3a:bench/results/NAME`: a superseded result named at the commit that holds it
    cited = re.compile(
        r"(?<![0-9a-f]:)bench/results/([A-Za-z0-9_.{},-]+\.(?:jsonl|json|png|txt))\b"
    )
    code = [*sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "tests").glob("*.py"))]
    sources = [*_docs(), *code]
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources
        for token in cited.findall(path.read_text())
        for name in _expand(token)
        if name not in stored
    ]
    assert missing == []


def test_no_doc_and_no_file_name_names_a_work_step():
    found = [
        f"{doc.relative_to(ROOT)}:{i}: {line.strip()}"
        for doc in _docs()
        for i, line in enumerate(doc.read_text().splitlines(), 1)
        if WORK_STEP.search(line)
    ]
    assert found == []
    names = [
        str(path.relative_to(ROOT))
        for top in ("bench", "docs", "examples", "src", "tests")
        for path in (ROOT / top).rglob("*")
        if "__pycache__" not in path.parts
    ]
    assert [n for n in names if WORK_STEP.search(n)] == []
