"""Imports that would run backwards, and test modules importing each other, fail here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "croupier"


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", [a.name for a in node.names]))
    return out


def test_the_api_does_not_import_the_dashboard_except_at_the_composition_root():
    """The dashboard builds on the API (keys, request stats); only api/app.py wires it in."""
    found = [
        f"{path.name}: {module}"
        for path in sorted((SRC / "api").glob("*.py"))
        if path.name != "app.py"
        for module, _ in imports(path)
        if module.startswith("croupier.dashboard")
    ]
    assert not found, found


def test_the_arena_imports_no_script_and_no_private_name():
    found = [
        f"{path.name}: {module} {names}"
        for path in sorted((SRC / "arena").glob("*.py"))
        for module, names in imports(path)
        if module.startswith("croupier.")
        and (module == "croupier.demo" or any(n.startswith("_") for n in names))
    ]
    assert not found, found


def test_test_modules_never_import_each_other():
    found = [
        f"{path.name}: {module}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for module, _ in imports(path)
        if module.startswith("tests.test_")
    ]
    assert not found, found


# The data stages in flow order. The server's own layers (api, sessions, and the dashboard on top
# of them) receive a request and drive the stages after it, so they may import them; the data
# stages never import the server's layers, nor a stage after their own.
DATA_STAGES = ("games", "engine", "policies", "trajectories", "link", "trainer", "arena")
SERVER_LAYERS = ("api", "sessions", "dashboard", "cli", "demo")


def test_no_data_stage_imports_a_later_stage_or_the_server_layers():
    found = []
    for i, stage in enumerate(DATA_STAGES):
        forbidden = (*DATA_STAGES[i + 1 :], *SERVER_LAYERS)
        for path in sorted((SRC / stage).rglob("*.py")):
            for module, _ in imports(path):
                parts = module.split(".")
                if parts[0] == "croupier" and len(parts) > 1 and parts[1] in forbidden:
                    found.append(f"{path.relative_to(SRC)}: {module}")
    assert not found, found


def test_a_long_module_says_at_its_top_why_it_is_one_module():
    """Past ~400 lines a module's docstring gives its reason ("Why ~450 lines in one module:
    ..."), so a reader knows it is long on purpose (the restructuring issue's rule)."""
    import re

    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") <= 420:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not re.search(r"\b\d+ lines\b", doc):
            found.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines, no reason")
    assert not found, found
