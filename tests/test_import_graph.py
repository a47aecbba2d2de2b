"""The package's import graph, read from the source: no circles, and nothing installed imports
the experiments folder (it is not installed).

Every import counts: at the top, inside a function (a lazy import still ties the two modules
together) and under `TYPE_CHECKING` (a circle a type checker walks is one a reader walks)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Circles known and being taken apart elsewhere; each entry says why it may stand meanwhile.
PENDING: set[frozenset[str]] = set()


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for path in src.rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool) -> list[tuple[str, str]]:
    """What an import statement names: (a name, the module it is in if not a module itself)
    pairs (`from a import b`: `a.b`, else `a`; `import a.b`: `a.b`)."""
    if isinstance(node, ast.Import):
        return [(a.name, a.name) for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the module's package up
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        name = ".".join([*base, *([node.module] if node.module else [])])
    else:
        name = node.module or ""
    return [(f"{name}.{a.name}", name) for a in node.names]


def import_graph(src: Path = SRC, package: str = "croupier") -> dict[str, set[str]]:
    """Each module of `package` under `src` and the modules of it that it imports."""
    modules = _modules(src)

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        if not module.startswith(package):
            continue
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name, within in _imported(node, module, path.name == "__init__.py"):
                if within == package or within.startswith(package + "."):
                    deps.add(name if name in modules else owner(within))
        graph[module] = deps - {None, module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_circle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.b"}
    assert circles(graph) == [{"pkg.a", "pkg.b"}]


def test_no_import_circles_in_the_package():
    found = [c for c in circles(import_graph()) if frozenset(c) not in PENDING]
    assert not found, f"import circles: {[sorted(c) for c in found]}"


def test_nothing_installed_imports_the_experiments():
    importers = []
    for path in sorted((SRC / "croupier").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] == "experiments" for name in names):
                importers.append(str(path.relative_to(SRC)))
    assert not importers, f"installed modules importing experiments/: {importers}"
