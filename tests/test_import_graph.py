"""The repository read as imports between its files: no circle, no import up the floors,
no Python file over ``MAX_LINES``.

Every ``.py`` outside hidden folders (``.venv``, ``.asv``, ``.cache``, ...) and ``html``
is parsed (ast), and each ``import`` and ``from ... import`` in it, at module level or
inside a function, is an edge to the repository's file it names. Imports by name in a
string (``importlib.import_module``, a worker's ``"benchmarks._case:handle"``) are not
edges: they are chosen at run time.

Floors: the measurement core ``harness`` (never imports the code under test: asv loads it
from the working tree for every commit, benchmarks/__init__.py) and the code under test
``kernels`` stand side by side at the bottom; ``benchmarks`` (asv's suites, the glue
between the two) above them; ``tools`` above that; ``tests`` above all. Inside tools/,
bottom to top (``TOOL_FLOORS``): what every part shares (tools/config.py, paths.py,
machine.py), the gate (its verdicts serve the site, the history and stack comparisons),
the site, running the history, stacks (the history run across stacks), the lab.

The size rule covers the folders in ``SIZE_CHECKED``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIPPED_FOLDERS = ("html", "__pycache__")  # and every hidden folder
MAX_LINES = 450
SIZE_CHECKED = ("harness", "kernels", "benchmarks", "tools", "tests")
# For each top-level package, those it must never import.
NEVER_IMPORTS = {
    "harness": ("kernels", "benchmarks", "tools", "tests"),
    "kernels": ("harness", "benchmarks", "tools", "tests"),
    "benchmarks": ("tools", "tests"),
    "tools": ("tests",),
}
TOOL_FLOORS = ("gate", "site", "history", "stacks", "lab")  # above the shared modules


def python_files(root: Path = REPO) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        folders = path.relative_to(root).parts[:-1]
        if not any(f.startswith(".") or f in SKIPPED_FOLDERS for f in folders):
            yield path


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Every module name an import statement of ``path`` names, relative ones made absolute:
    ``from a import b`` names both ``a.b`` and ``a`` (``b`` may be a module or a name)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *filter(None, [base])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def deepest_known(name: str, known: set[str]) -> str | None:
    """The repository module that importing ``name`` runs last (None: not ours)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the repository's modules it imports."""
    files = {module_name(p, root): p for p in python_files(root)}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = {deepest_known(name, known) for name in imported_names(path, module)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def tool_floor(module: str) -> int | None:
    """0 for tools/'s shared modules, 1.. for its parts in ``TOOL_FLOORS``; None outside."""
    parts = module.split(".")
    if parts[0] != "tools":
        return None
    return TOOL_FLOORS.index(parts[1]) + 1 if parts[1:2] and parts[1] in TOOL_FLOORS else 0


def _above(module: str, target: str) -> bool:
    if target.split(".")[0] in NEVER_IMPORTS.get(module.split(".")[0], ()):
        return True
    mine, theirs = tool_floor(module), tool_floor(target)
    return mine is not None and theirs is not None and theirs > mine


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} imports {target}" for module, targets in sorted(graph.items())
            for target in sorted(targets) if _above(module, target)]


def test_the_imports_form_no_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_floor_imports_one_above_it() -> None:
    assert upward_imports(import_graph()) == []


def test_every_package_of_tools_has_its_floor_and_says_its_purpose() -> None:
    """A new package under tools/ would otherwise count as the shared floor."""
    for init in sorted((REPO / "tools").glob("*/__init__.py")):
        name = init.parent.name
        assert name in TOOL_FLOORS, f"tools/{name}: no floor in TOOL_FLOORS"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.splitlines()) == 1, f"tools/{name}: no one-line purpose"


def test_no_python_file_is_over_the_limit() -> None:
    long = [f"{path.relative_to(REPO)}: {n} lines" for folder in SIZE_CHECKED
            for path in python_files(REPO / folder)
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert long == []


def test_the_graph_reader_sees_circles_and_floors(tmp_path: Path) -> None:
    """The rules themselves, on a small tree: a circle through a relative import inside a
    function, and the core importing the code under test."""
    files = {"harness/__init__.py": "", "harness/a.py": "from harness import b\n",
             "harness/b.py": "def f():\n    from . import a\n",
             "kernels/__init__.py": "", "harness/c.py": "import kernels.op\n",
             "kernels/op.py": "", ".venv/x.py": "import harness.a\n",
             "tools/__init__.py": "", "tools/paths.py": "", "tools/site/__init__.py": "",
             "tools/history/__init__.py": "", "tools/history/run.py": "import tools.paths\n",
             "tools/site/page.py": "def f():\n    from tools.history import run\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    assert ".venv.x" not in graph
    assert cycles(graph) == [["harness.a", "harness.b"]]
    assert upward_imports(graph) == ["harness.c imports kernels.op",
                                     "tools.site.page imports tools.history",
                                     "tools.site.page imports tools.history.run"]
