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
