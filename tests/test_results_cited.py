"""bench/results/ keeps what the docs cite: no file there that no doc names, and its index is
the one the tool writes (`bench/tools/results_cited.py`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location(
        "results_cited", ROOT / "bench/tools/results_cited.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_citation_forms_the_docs_use(tmp_path):
    tool = _tool()
    (tmp_path / "docs").mkdir()
    results = tmp_path / "bench" / "results"
    results.mkdir(parents=True)
    names = ["a-1.json", "a-1.png", "b-x.json", "b-y.json", "c-long-name.json", "d-0.1.json",
             "d-0.json", "e-kept.json", "f-gone.json"]  # fmt: skip
    for name in names:
        (results / name).write_text("{}")
    (tmp_path / "README.md").write_text("")
    at = "bench/results"  # (spelt apart: test_docs_reference checks the paths this file names)
    (tmp_path / "docs" / "x.md").write_text(
        f"`a-1.{{json,png}}`, `{at}/b-{{x,y}}.json`, `{at}/c-long-*` and `d-0.1.json`; "
        f"`...-kept.*`; superseded: `c3b8c3a:{at}/f-gone.json`"
    )
    cited = tool.citations(tmp_path)
    assert [f for f, docs in cited.items() if not docs] == ["d-0.json", "f-gone.json"]
    assert cited["a-1.png"] == ["docs/x.md"]


def test_every_result_file_is_cited_by_a_doc():
    uncited = [f for f, docs in _tool().citations().items() if not docs]
    assert not uncited, (
        f"bench/results/ files no doc cites (python bench/tools/results_cited.py --prune): "
        f"{uncited}"
    )


def test_the_index_is_the_tools():
    tool = _tool()
    cited = {f: docs for f, docs in tool.citations().items() if docs}
    assert (ROOT / "bench/results/README.md").read_text() == tool.index(cited), (
        "python bench/tools/results_cited.py --index > bench/results/README.md"
    )
