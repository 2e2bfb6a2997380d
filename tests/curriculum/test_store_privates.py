"""No module reaches into the task store's private state.

`TaskStore` owns the run's in-memory state and `PoolIndex` its columns; the helpers beside
them (writes, reads, replay, references, stats, export, ...) get what they need through
arguments and public methods and return values. This test keeps it so, by reading the source.

The rule, checked on every module under `selfplay/`:

* The private names of an owner class are the `_name` (not `__dunder__`) attributes it
  assigns on `self` or `cls` and the `_name` methods and class attributes it defines.
* An attribute access `x._name`, where `_name` is a private name of an owner, is an error
  unless `x` is `self` or `cls` (an object's own attribute, whatever its class), or `x` is
  a module, bound by `import x` or, for this project's modules, `from package import x`
  (`writes._row`: a module-private helper used within its package is that module's
  business, not the store's), or the access is inside a class owning `_name` (another
  instance of the same class).

Other private names (`os._exit`, `argparse._SubParsersAction`) are not the store's, and
are not checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWNERS = {
    "TaskStore": "selfplay/curriculum/store.py",
    "PoolIndex": "selfplay/curriculum/pool.py",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def private_names(source: str, owner: str) -> set[str]:
    """The private attributes and methods the class `owner` in `source` defines."""
    tree = ast.parse(source)
    [cls] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner]
    names = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return {n for n in names if _private(n)}


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names a module of this project (found by its file, not imported)."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _module_names(tree: ast.Module, package: str) -> set[str]:
    """Names in a module that its imports bind to modules: every `import x`, and the
    project's modules imported by `from package import module`."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            bound |= {a.asname or a.name for a in node.names if _is_module(f"{base}.{a.name}")}
    return bound


def violations(source: str, package: str, owned: dict[str, set[str]]) -> list[tuple[int, str]]:
    """(line, access) of every forbidden access in `source`; `owned` maps a private name to
    the classes that own it."""
    tree = ast.parse(source)
    modules = _module_names(tree, package)
    found = []

    def visit(node: ast.AST, classes: tuple[str, ...]) -> None:
        if isinstance(node, ast.ClassDef):
            classes = (*classes, node.name)
        if isinstance(node, ast.Attribute) and node.attr in owned:
            base = node.value
            name = base.id if isinstance(base, ast.Name) else None
            inside = not owned[node.attr].isdisjoint(classes)
            allowed = name in ("self", "cls") or name in modules or inside
            if not allowed:
                found.append((node.lineno, f"{ast.unparse(base)}.{node.attr}"))
        for child in ast.iter_child_nodes(node):
            visit(child, classes)

    visit(tree, ())
    return found


def _owned() -> dict[str, set[str]]:
    owned: dict[str, set[str]] = {}
    for owner, path in OWNERS.items():
        for name in private_names((ROOT / path).read_text(), owner):
            owned.setdefault(name, set()).add(owner)
    return owned


def test_owners_have_the_private_state_the_rule_protects():
    owned = _owned()
    assert owned["_p_cache"] == owned["_estimates"] == {"TaskStore"}
    assert owned["_data"] == {"PoolIndex"}


def test_the_rule_flags_foreign_access_only():
    source = (
        "from selfplay.curriculum import writes\n"
        "class TaskStore:\n"
        "    def f(self, other):\n"
        "        return self._p_cache, other._p_cache, self.index._data\n"
        "def g(store):\n"
        "    return store._p_cache, writes._row\n"
    )
    owned = {"_p_cache": {"TaskStore"}, "_data": {"PoolIndex"}, "_row": {"Writes"}}
    found = violations(source, "selfplay.curriculum", owned)
    assert found == [(4, "self.index._data"), (6, "store._p_cache")]


def test_no_module_touches_the_store_privates():
    owned = _owned()
    found = []
    for path in sorted((ROOT / "selfplay").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, access in violations(path.read_text(), package, owned):
            found.append(f"{path.relative_to(ROOT)}:{line}: {access}")
    assert found == []


STATE = ("engine", "run_id", "run", "config", "answers", "index", "abilities", "recorded")


def test_the_store_state_is_read_only_from_outside(tmp_path):
    """Only the store changes its state: from outside, its attributes can be read, not set."""
    import pytest

    from selfplay.curriculum import TaskStore
    from selfplay.distributed import Ranks, SharedStore

    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r")
    shared = SharedStore(store, Ranks())
    try:
        for name in (*STATE, "trajectories"):
            getattr(store, name)
            with pytest.raises(AttributeError):
                setattr(store, name, None)
        assert shared.local is store and shared.config is store.config
        for name in ("local", "ranks"):
            with pytest.raises(AttributeError):
                setattr(shared, name, None)
    finally:
        store.close()
