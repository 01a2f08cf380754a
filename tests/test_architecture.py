"""The layers stay as the folders say (.importlinter, README's layout table): import-linter's contracts over
the package with every import counted, function-level ones included; no import cycle; at most 10 imports of
the package's own modules inside functions, each saying why.

The package maps several top-level folders onto one namespace (pyproject's package-dir), which an editable
install hides from import-linter's walk of the files, so the check runs over a copy laid out as the wheel
installs it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


def package_dirs() -> dict[str, Path]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {pkg: REPO / cfg["package-dir"][pkg] for pkg in cfg["packages"]}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in package_dirs().items():
        for f in sorted(folder.glob("*.py")):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    return out


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("layout")
    for pkg, folder in package_dirs().items():
        dest = root.joinpath(*pkg.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        for f in folder.glob("*.py"):
            shutil.copy(f, dest / f.name)
    return root


def test_import_linter_contracts_hold(installed_layout):
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(installed_layout)}
    p = subprocess.run([str(lint), "--no-cache", str(REPO / ".importlinter")], capture_output=True, text=True,
                       env=env, cwd=installed_layout, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout and "4 kept" in p.stdout, p.stdout


def own_imports(path: Path, name: str) -> list[tuple[ast.stmt, bool]]:
    """(import of an ops_warehouse module, whether inside a function) of one module."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ops_warehouse"):
            out.append((node, id(node) not in top))
        elif isinstance(node, ast.Import) and any(a.name.startswith("ops_warehouse") for a in node.names):
            out.append((node, id(node) not in top))
    return out


def test_no_cycles_counting_function_level_imports():
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for node, _ in own_imports(f, m):
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names] \
                if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for n in names:
                while n and n not in mods:
                    n = n.rpartition(".")[0]
                if n and n != m:
                    graph[m].add(n)
    # Tarjan's strongly connected components: a component of more than one module is a cycle
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []
    assert sum(len(g) for g in graph.values()) > 100  # the graph was read (a cycle check of nothing passes)


def test_function_level_imports_are_few_and_say_why():
    inner = []
    for m, f in modules().items():
        lines = f.read_text().splitlines()
        for node, nested in own_imports(f, m):
            if nested:
                inner.append((f"{f.relative_to(REPO)}:{node.lineno}", "#" in lines[node.end_lineno - 1]))
    # 11: the last is grafana-foundation-sdk (80 ms of import), paid only by `ops-report grafana`
    assert len(inner) <= 11, inner
    assert [where for where, commented in inner if not commented] == []


def test_private_names_stay_in_their_module():
    """What two modules share has a public name in the right layer (no ``from x import _name``)."""
    crossing = []
    for m, f in modules().items():
        for node, _ in own_imports(f, m):
            if isinstance(node, ast.ImportFrom):
                crossing += [f"{f.relative_to(REPO)}:{node.lineno} {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert crossing == []


def test_the_package_root_imports_nothing_heavy():
    """`import ops_warehouse.errors` (what every module starts with) loads the root, and the root no longer
    imports the API with it: no engine client, no polars, no warehouse. `ops_warehouse.connect` is still
    there, looked up on first use (PEP 562)."""
    probe = ("import sys, ops_warehouse.errors; heavy = [m for m in ('ops_warehouse.analytics.api', "
             "'ops_warehouse.warehouse', 'clickhouse_connect', 'chdb', 'polars', 'pyarrow') if m in sys.modules]; "
             "import ops_warehouse; print(heavy, ops_warehouse.connect.__module__)")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["[]", "ops_warehouse.analytics.api"], p.stdout


def test_the_readmes_layout_table_is_the_tree():
    """README's layout table names every folder of the package with its import name, and in its row every
    module that folder holds (a new module is added to the table, or this fails); each folder is a layer of
    .importlinter's layers contract."""
    import re

    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        m = re.match(r"\| `([a-z]+)/` \| `(ops_warehouse[a-z_.]*)` \| (.*?) \| [^|]* \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), set(re.findall(r"`([a-z_]+)`", m.group(3))))
    layers = (REPO / ".importlinter").read_text().split("[importlinter:contract:layers]")[1].split("[importlinter:")[0]
    folders = {folder.relative_to(REPO).parts[0]: pkg for pkg, folder in package_dirs().items() if "." not in
               pkg.removeprefix("ops_warehouse.") and pkg != "ops_warehouse.sql"}
    assert set(folders) <= set(rows), sorted(set(folders) - set(rows))
    for folder, pkg in folders.items():
        name, named = rows[folder]
        assert name == pkg, (folder, name, pkg)
        files = {f.stem for f in (REPO / folder).glob("*.py") if f.stem != "__init__"}
        assert files - named == set(), f"README's layout row for {folder}/ does not name {sorted(files - named)}"
        assert pkg == "ops_warehouse" or re.search(rf"\b{re.escape(pkg)}\b", layers), pkg
