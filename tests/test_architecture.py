"""The house rules that keep the code readable from its folder names, checked on every CI run.

- No import circle among the project's modules (any import, at module level or inside a function), and none among its
  packages (a package's modules import only packages below it); `core`, `store` and `plumbing` import no domain.
- `store/` imports nothing above it (no other `lev` module, no `handlers`, `tasks`).
- No function-level import of a project module: such an import exists only to dodge a circle.
- No product module reaches 400 lines.
- Only the composition root (lev/app.py, serve.py, cli.py, runtime.py, embedded.py) imports `handlers/` or `tasks/`.
- `store/`, `handlers/`, `tasks/` live where their import names say (`lev/store/`, `lev/handlers/`, `lev/tasks/`); the
  design card's top-level names are links to them, and the code imports them only as `lev.store`, `lev.handlers`,
  `lev.tasks`: a top-level `store` would collide with other software.
- `lev/` keeps at most 12 modules directly; the rest live in domain packages whose `__init__` lists their rooms.
- Every domain package has a test that imports it.
- One way to open a session: from the `Database` the composition root hands in (`Deps.db`, carrying the job queue
  an after-commit nudge goes to); `lev.store.db` has no module-level session function, and only the root asks it
  for the process's database.
- docs/architecture.md has a line for every package and module (under the package's heading,
  `### lev/<package>/` in backticks), and a row for every documented error code.
- Settings are read from the environment (`get_settings()`) only by the root modules and the worker's entry point;
  everything else is handed its settings.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"lev": "lev"}
LINKED = ("store", "handlers", "tasks")
MAX_LINES = 400
ROOT_MODULES = ("lev.app", "lev.middleware", "lev.serve", "lev.cli", "lev.runtime", "lev.embedded", "lev.supervisor")
MAX_TOP_MODULES = 12


def _modules() -> dict[str, Path]:
    out = {}
    for folder, name in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):  # rglob does not enter lev/'s links
            parts = [name, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    """The project module an imported name lives in (`lev.core.errors.ApiError` -> `lev.core.errors`)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """(imported project module, inside a function?) for every import statement of a module."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + [base]).strip(".")
                names = [f"{base}.{a.name}" for a in child.names] + [base]
            for name in names:
                target = _target(name)
                if target is not None and target != module:
                    found.append((target, inner))
            visit(child, inner)

    visit(tree, False)
    return found


GRAPH = {m: sorted({t for t, _ in _imports(m, p)}) for m, p in MODULES.items()}


def _circles(graph: dict[str, list[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan) of `graph` (the module graph by default)."""
    graph = GRAPH if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_no_import_circles() -> None:
    assert not _circles(), f"import circles: {_circles()}"


def _package(module: str) -> str:
    """The room a module belongs to at package level: `lev.auth.policy` -> `lev.auth`; a module directly in `lev/`
    (the composition root) is a room of its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[module].name == "__init__.py" else module


def _package_graph() -> dict[str, list[str]]:
    """Package -> the packages its modules import (`lev` itself, the front door that only names the version, is
    left out: `from lev import runtime` is an arrow to `lev.runtime`)."""
    out: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        if module == "lev":
            continue
        room = out.setdefault(_package(module), set())
        room.update(_package(t) for t in targets if t != "lev" and _package(t) != _package(module))
    return {room: sorted(targets) for room, targets in out.items()}


PACKAGES_GRAPH = _package_graph()
BASE = {"lev.core": set(), "lev.store": set(), "lev.plumbing": {"lev.core", "lev.store"}}


def test_no_import_circle_between_packages() -> None:
    """Eight packages once stood in one circle (core -> ingest -> webhooks -> ingest, limits <-> auth): each
    package's modules may import only packages below it."""
    assert not _circles(PACKAGES_GRAPH), f"package circles: {_circles(PACKAGES_GRAPH)}"


def test_the_base_and_the_plumbing_import_no_domain() -> None:
    """`core` and `store` import nothing of Lev's (the store: nothing but itself); `plumbing`, which every domain
    may import, imports only them: the interfaces of what it hands out live in `plumbing.ports`."""
    wrong = {room: sorted(set(PACKAGES_GRAPH.get(room, [])) - allowed) for room, allowed in BASE.items()}
    assert not {room: extra for room, extra in wrong.items() if extra}, wrong


def test_store_depends_on_nothing_above_it() -> None:
    upward = {m: [t for t in ts if not t.startswith("lev.store")] for m, ts in GRAPH.items()
              if m.startswith("lev.store")}
    assert not {m: ts for m, ts in upward.items() if ts}, upward


def test_no_function_level_project_imports() -> None:
    nested = {m: sorted({t for t, inner in _imports(m, p) if inner}) for m, p in MODULES.items()}
    assert not {m: ts for m, ts in nested.items() if ts}, nested


def test_product_modules_stay_small() -> None:
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert not {m: n for m, n in sizes.items() if n >= MAX_LINES}, sorted(sizes.items(), key=lambda kv: -kv[1])[:5]


def test_only_the_composition_root_imports_handlers_and_tasks() -> None:
    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    outside = {m: [t for t in ts if room(t) in ("lev.handlers", "lev.tasks") and room(t) != room(m)]
               for m, ts in GRAPH.items() if m not in ROOT_MODULES}
    assert not {m: ts for m, ts in outside.items() if ts}, outside


def test_lev_keeps_few_modules_and_packages_list_their_rooms() -> None:
    top = sorted(p.name for p in (ROOT / "lev").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    for init in sorted(p for p in (ROOT / "lev").glob("*/__init__.py") if p.parent.name not in LINKED):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        rooms = sorted(p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py")
        unlisted = [r for r in rooms if f"`{r}`" not in doc]
        assert not unlisted, f"{init.relative_to(ROOT)} does not list its rooms {unlisted}"


def test_every_domain_package_has_a_test_that_imports_it() -> None:
    rooms = ["lev." + p.parent.name for p in (ROOT / "lev").glob("*/__init__.py")]
    imported: set[str] = set()
    for test in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(test.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
    untested = [r for r in rooms if not any(i == r or i.startswith(r + ".") for i in imported)]
    assert not untested, untested


def test_only_the_root_reads_the_settings() -> None:
    allowed = {*ROOT_MODULES, "lev.core.settings", "lev.tasks.worker"}
    readers = sorted(m for m, p in MODULES.items() if m not in allowed and "get_settings" in p.read_text())
    assert not readers, f"{readers} read the settings themselves: take them as a parameter instead"


def test_every_session_comes_from_the_injected_database() -> None:
    tree = ast.parse(MODULES["lev.store.db"].read_text())
    module_level = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    assert not module_level & {"transaction", "read_session", "read_snapshot", "engine"}, module_level
    asking = []
    for module, path in MODULES.items():
        if module in ROOT_MODULES or module == "lev.store.db":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "lev.store.db":
                asking += [f"{module}: {a.name}" for a in node.names if a.name in ("database", "init_engine")]
            elif isinstance(node, ast.Attribute) and node.attr in ("database", "init_engine") \
                    and isinstance(node.value, ast.Name) and node.value.id == "db":
                asking.append(f"{module}: db.{node.attr}")
    assert not asking, f"{asking}: take the Database you are handed (Deps.db) instead"


def test_the_design_card_folders_install_under_lev_and_are_imported_by_that_name() -> None:
    for folder in LINKED:  # the import path and the file path agree; the card's names are links to them
        real, link = ROOT / "lev" / folder, ROOT / folder
        assert real.is_dir() and not real.is_symlink(), real
        assert link.is_symlink() and link.resolve() == real.resolve(), link
    for name in ("web", "openapi.yaml", "mcp_tools.json"):  # package data, linked into the package
        link = ROOT / "lev" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link
    bare = []
    for folder in ("lev", "tests", "contract_tests", "bench", "cluster"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in LINKED]
    assert not bare, bare


def test_the_checker_sees_a_circle() -> None:
    """The circle finder itself: a two-module cycle in a made-up graph is found."""
    saved = dict(GRAPH)
    try:
        GRAPH.clear()
        GRAPH.update({"a": ["b"], "b": ["a"], "c": ["a"]})
        assert _circles() == [["a", "b"]]
        assert _circles({"x": ["y"], "y": ["z"], "z": []}) == []
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


def test_the_release_is_named_once_in_code_and_matches_pyproject() -> None:
    import tomllib

    from lev.core.packagedata import VERSION

    assert VERSION == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _doc_sections() -> dict[str, str]:
    """docs/architecture.md's sections headed by a folder of lev/ in backticks: the folder -> their text."""
    sections: dict[str, str] = {}
    current = None
    for line in ARCHITECTURE.read_text().splitlines():
        if line.startswith("### `lev/"):
            current = line.split("`")[1]
            sections[current] = ""
        elif line.startswith("#"):
            current = None
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def test_the_architecture_page_names_every_package_and_module() -> None:
    sections = _doc_sections()
    missing = []
    for module, path in MODULES.items():
        if module == "lev" or "migrations" in path.parts:
            continue
        folder = str(path.parent.relative_to(ROOT)) + "/"
        if path.name == "__init__.py":
            if folder not in sections:
                missing.append(f"a section for {folder}")
        elif f"`{path.stem}`" not in sections.get(folder, ""):
            missing.append(f"{path.relative_to(ROOT)} (a line under ### `{folder}`)")
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_the_architecture_page_says_where_each_error_code_is_produced() -> None:
    import yaml

    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    codes = spec["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
    rows = {line.split("`")[1] for line in ARCHITECTURE.read_text().splitlines() if line.startswith("| `")}
    assert not set(codes) - rows, f"no row in docs/architecture.md for {sorted(set(codes) - rows)}"
