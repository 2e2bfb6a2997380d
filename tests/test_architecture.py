"""The package's rooms import one another without a circle.

A room is a module file or a subpackage directly under `selfplay/` (`loop`, `runs`, `config`,
`curriculum`, ...). Every `import selfplay.x` and `from ... import` of the project's modules
anywhere in a file counts, at the top, inside functions and under TYPE_CHECKING alike, with
relative imports resolved: a circle between rooms is one however its imports are deferred.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "selfplay"

#: circles that remain, each as its rooms in order, with why (none today)
KNOWN_CIRCLES: list[tuple[str, ...]] = []


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The dotted names a file imports (for `from a import b`, both `a` and `a.b`)."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def _room(name: str) -> str | None:
    """The room a dotted name lies in, or None outside the project or for the package itself."""
    parts = name.split(".")
    if parts[0] != "selfplay" or len(parts) < 2:
        return None
    room = parts[1]
    exists = (PACKAGE / room).is_dir() or (PACKAGE / f"{room}.py").is_file()
    return room if exists else None


def import_graph() -> dict[str, dict[str, str]]:
    """room -> {room it imports: the first file that does}."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        source = _room(module)
        if source is None:  # selfplay/__init__.py
            continue
        graph.setdefault(source, {})
        tree = ast.parse(path.read_text(), str(path))
        for name in _imported(tree, module, path.name == "__init__.py"):
            target = _room(name)
            if target is not None and target != source:
                where = str(path.relative_to(PACKAGE.parent))
                graph[source].setdefault(target, where)
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One circle through each strongly connected group of rooms (Tarjan), as a room list
    whose last room imports the first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in graph.get(room, {}):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == room:
                    break
            if len(group) > 1:
                groups.append(group)

    for room in sorted(graph):
        if room not in index:
            visit(room)
    return [_circle(graph, group) for group in groups]


def _circle(graph: dict[str, dict[str, str]], group: set[str]) -> list[str]:
    """A shortest circle from the group's first room back to it, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for room in frontier:
            for other in sorted(graph[room]):
                if other == start:
                    return paths[room]
                if other in group and other not in paths:
                    paths[other] = [*paths[room], other]
                    following.append(other)
        frontier = following
    raise AssertionError(f"no circle in {group}")


def _describe(graph: dict[str, dict[str, str]], circle: list[str]) -> str:
    steps = zip(circle, [*circle[1:], circle[0]], strict=True)
    return " -> ".join(f"{a} ({graph[a][b]})" for a, b in steps) + f" -> {circle[0]}"


def _same(circle: list[str], known: tuple[str, ...]) -> bool:
    return set(circle) <= set(known)


def test_the_rooms_import_one_another_without_a_circle():
    graph = import_graph()
    found = [c for c in cycles(graph) if not any(_same(c, k) for k in KNOWN_CIRCLES)]
    assert not found, "import circles between rooms:\n" + "\n".join(
        _describe(graph, c) for c in found
    )


def test_the_graph_sees_every_kind_of_import():
    """Deferred, TYPE_CHECKING and relative imports all count, and a circle is named."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import stages\n"
        "if TYPE_CHECKING:\n"
        "    from selfplay.runs import Run\n"
        "def f():\n"
        "    import selfplay.config.fields\n"
    )
    names = _imported(ast.parse(source), "selfplay.loop", is_package=False)
    assert {_room(n) for n in names} - {None} == {"stages", "runs", "config"}
    graph = {"a": {"b": "a.py"}, "b": {"c": "b.py"}, "c": {"a": "c.py"}, "d": {"a": "d.py"}}
    [circle] = cycles(graph)
    assert _describe(graph, circle) == "a (a.py) -> b (b.py) -> c (c.py) -> a"


def test_the_configuration_depends_on_itself_and_the_records_only():
    assert set(import_graph()["config"]) <= {"types"}
