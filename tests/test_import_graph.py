"""The repository read as imports between its files: no circle, no import up the floors,
no Python file over ``MAX_LINES``.

Every ``.py`` outside hidden folders (``.venv``, ``.asv``, ``.cache``, ...) and ``html``
is parsed (ast), and each ``import`` and ``from ... import`` in it, at module level or
inside a function, is an edge to the repository's file it names. Imports by name in a
string (``importlib.import_module``, a worker's ``"kperf.suites.case:handle"``) are not
edges: they are chosen at run time.

Floors, bottom to top (``FLOORS``, docs/architecture.md): what every part of kperf shares
(``kperf.project``, ``paths``, ``config``); the measurement core ``kperf.core`` (never the
code under test, nor anything of kperf above it) beside the op contract ``kperf.ops``; the
asv suites ``kperf.suites`` (the glue between the two) beside ``kperf.machine`` (what this
machine and its stack are) and ``kperf.toolchains`` (the gfx942 compilers); then the
tools: the gate (its verdicts serve the site, the history and stack comparisons), the
site, running the history, stacks (the history run across stacks), and kperf's commands at
the top. Outside kperf: the code under test ``kernels`` (it may import only the op
contract), the project's ``benchmarks`` (only kperf's suites), the maintainers' ``tools``
(lab, mutation), and ``tests`` above all.

The size rule covers the folders in ``SIZE_CHECKED``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIPPED_FOLDERS = ("html", "__pycache__", "examples")  # and every hidden folder; examples/
# holds projects of their own (a team's repository and its library), not this one
MAX_LINES = 450
SIZE_CHECKED = ("kperf", "kernels", "benchmarks", "tools", "tests")
# kperf's floors, bottom to top; a module of kperf not named here is a command (the top)
FLOORS = (("kperf.project", "kperf.paths", "kperf.config", "kperf.results", "kperf.specs"),
          ("kperf.core", "kperf.ops"),
          ("kperf.suites", "kperf.machine", "kperf.toolchains"), ("kperf.gate",),
          ("kperf.site",), ("kperf.history",), ("kperf.stacks",))
# what each top-level package may import of the repository (None: anything)
MAY_IMPORT = {"kernels": ("kernels", "kperf.ops"), "benchmarks": ("benchmarks", "kperf.suites"),
              "kperf": ("kperf",), "tools": ("tools", "kperf"), "tests": None}


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


def floor(module: str) -> int | None:
    """A kperf module's floor (``FLOORS``; the commands above them all); None outside."""
    if module.split(".")[0] != "kperf":
        return None
    if module == "kperf":  # its __init__: the version, nothing else
        return 0
    for level, names in enumerate(FLOORS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return level
    return len(FLOORS)


def _above(module: str, target: str) -> bool:
    allowed = MAY_IMPORT.get(module.split(".")[0], ())
    if allowed is not None and not any(target == a or target.startswith(a + ".")
                                       for a in allowed):
        return True
    mine, theirs = floor(module), floor(target)
    if mine is None or theirs is None:
        return False
    # the core and the op contract share a floor but never import each other
    if {".".join(module.split(".")[:2]), ".".join(target.split(".")[:2])} == {"kperf.core",
                                                                              "kperf.ops"}:
        return True
    return theirs > mine


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} imports {target}" for module, targets in sorted(graph.items())
            for target in sorted(targets) if _above(module, target)]


def test_the_imports_form_no_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_floor_imports_one_above_it() -> None:
    assert upward_imports(import_graph()) == []


def test_every_package_of_kperf_has_its_floor_and_says_its_purpose() -> None:
    """A new package of kperf would otherwise count as a command, at the top."""
    for init in sorted((REPO / "kperf").glob("*/__init__.py")):
        name = f"kperf.{init.parent.name}"
        if init.parent.name != "reference":
            assert floor(name) < len(FLOORS), f"{name}: no floor in FLOORS"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{name}: no docstring saying its purpose"


def test_no_python_file_is_over_the_limit() -> None:
    long = [f"{path.relative_to(REPO)}: {n} lines" for folder in SIZE_CHECKED
            for path in python_files(REPO / folder)
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert long == []


def test_the_figures_page_holds_current_figures_only() -> None:
    """Issue 48: docs/perf.md is where things stand, at most 300 lines; the dated detail is
    the journal's."""
    lines = (REPO / "docs" / "perf.md").read_text().splitlines()
    assert len(lines) <= 300, f"docs/perf.md: {len(lines)} lines"


def test_the_graph_reader_sees_circles_and_floors(tmp_path: Path) -> None:
    """The rules themselves, on a small tree: a circle through a relative import inside a
    function, and the core importing the code under test."""
    files = {"kperf/core/__init__.py": "", "kperf/core/a.py": "from kperf.core import b\n",
             "kperf/core/b.py": "def f():\n    from . import a\n",
             "kernels/__init__.py": "", "kperf/core/c.py": "import kperf.ops.op\n",
             "kperf/ops/op.py": "", ".venv/x.py": "import kperf.core.a\n",
             "kernels/k.py": "from kperf.core import a\nfrom kperf.ops import op\n",
             "tools/__init__.py": "", "kperf/paths.py": "", "kperf/site/__init__.py": "",
             "kperf/history/__init__.py": "", "kperf/history/run.py": "import kperf.paths\n",
             "kperf/site/page.py": "def f():\n    from kperf.history import run\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    assert ".venv.x" not in graph
    assert cycles(graph) == [["kperf.core.a", "kperf.core.b"]]
    assert upward_imports(graph) == ["kernels.k imports kperf.core",
                                     "kernels.k imports kperf.core.a",
                                     "kperf.core.c imports kperf.ops.op",
                                     "kperf.site.page imports kperf.history",
                                     "kperf.site.page imports kperf.history.run"]
