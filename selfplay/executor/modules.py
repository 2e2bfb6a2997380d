"""The modules a sandboxed program may import, served as read-only proxies.

Both sides use the tables (the static policy refuses other imports before anything runs); the
sandbox side builds the proxies once per worker, before it forks.

A proxy is a fresh module object holding a module's public functions, classes and immutable
constants, minus the names refused below. Mutable module state (dicts, lists, default decimal
contexts) is left out, so that one run cannot leave state behind for the next run in the same
process; per-run state that must exist (the decimal context, the recursion limit, the `random`
generator) is reset before every run by `reset_run_state`.

`sys` is a proxy of constants (`maxsize`, `float_info`, ...) and a capped `setrecursionlimit`.
`random` and `hashlib` are opt-in (`ExecutorConfig.extra_modules`), for benchmark test code:
`random` is deterministic (reseeded with 0 before every run; no OS entropy), and both make
self-proposed tasks unpredictable, hence unlearnable, so self-play leaves them off.
"""

from __future__ import annotations

import types

from selfplay.executor.guards import (
    PolicyError,
    guarded_getattr,
    init_library_tables,
    is_metaclass,
)

__all__ = [
    "ALLOWED_MODULES",
    "OPTIONAL_MODULES",
    "import_refusal",
    "prepare",
    "run_globals",
    "reset_run_state",
]


class Only(frozenset):
    """An allow-list of names (where a plain frozenset lists refused names)."""


#: Allowed modules and, for each, the public names refused (or `Only` the names allowed).
ALLOWED_MODULES: dict[str, frozenset] = {
    "math": frozenset(),
    "cmath": frozenset(),
    "itertools": frozenset(),
    "functools": frozenset({"singledispatch", "singledispatchmethod"}),  # eval annotations
    "operator": frozenset(),
    "collections": frozenset(),
    "collections.abc": frozenset(),
    "heapq": frozenset(),
    "bisect": frozenset(),
    "re": frozenset(),
    "string": frozenset({"Formatter"}),  # get_field walks attributes unguarded
    "fractions": frozenset(),
    "decimal": frozenset({"DefaultContext", "BasicContext", "ExtendedContext"}),
    "statistics": frozenset(),
    "numbers": frozenset({"ABCMeta"}),  # metaclasses: `guards.is_metaclass`
    "typing": frozenset(
        {"get_type_hints", "ForwardRef", "get_overloads", "clear_overloads", "ABCMeta"}
        | {"NamedTupleMeta"}
    ),
    "dataclasses": frozenset({"make_dataclass"}),
    "enum": frozenset({"EnumMeta", "EnumType"}),
    "abc": frozenset({"ABCMeta"}),
    "copy": frozenset(),
    "json": frozenset(),
    "array": frozenset(),
    "textwrap": frozenset(),
    "unicodedata": frozenset(),
    "datetime": frozenset(),
    "queue": frozenset(),
    "__future__": frozenset(),  # compile-time flags such as `annotations`
    "sys": Only(
        """maxsize maxunicode float_info int_info byteorder version_info hexversion
        float_repr_style setrecursionlimit getrecursionlimit getsizeof""".split()
    ),
}

_RANDOM_FUNCTIONS = """random uniform triangular randint randrange choice choices shuffle sample
    gauss normalvariate lognormvariate expovariate vonmisesvariate gammavariate betavariate
    paretovariate weibullvariate getrandbits randbytes seed""".split()

#: Modules a configuration may add (`ExecutorConfig.extra_modules`).
OPTIONAL_MODULES: dict[str, frozenset] = {
    "random": Only({*_RANDOM_FUNCTIONS, "Random"}),
    "hashlib": frozenset({"file_digest"}),
}

DEFAULT_RECURSION_LIMIT = 1000
MAX_RECURSION_LIMIT = 10_000


def _table(extra: tuple[str, ...]) -> dict[str, frozenset]:
    return {**ALLOWED_MODULES, **{name: OPTIONAL_MODULES[name] for name in extra}}


def import_refusal(module: str, names: list[str], extra: tuple[str, ...] = ()) -> str | None:
    """Why `from module import names` (or `import module`, names empty) is refused, or None."""
    table = _table(extra)
    if module not in table:
        return f'import of "{module}" is not allowed'
    listed = table[module]
    for name in names:
        if (name not in listed) if isinstance(listed, Only) else (name in listed):
            return f'"{module}.{name}" is not allowed'
    return None


# ---------------------------------------------------------------------------------------------
# Sandbox side

_IMMUTABLE_SCALARS = (int, float, complex, str, bytes, bool, type(None))


def _is_constant(value: object) -> bool:
    if isinstance(value, _IMMUTABLE_SCALARS):
        return True
    if type(value) in (tuple, frozenset):
        return all(_is_constant(v) for v in value)
    return False


def _proxy_value(module_name: str, value: object) -> bool:
    """Functions, classes and immutable constants; enum members (`re.IGNORECASE`) and typing
    constructs are immutable too. Never a module, a metaclass or mutable state."""
    import enum

    if isinstance(value, types.ModuleType) or is_metaclass(value):
        return False
    if callable(value) or _is_constant(value) or isinstance(value, enum.Enum):
        return True
    return module_name in ("typing", "__future__", "sys")  # sys: struct sequences (float_info)


def _attrgetter(*names: str):
    """`operator.attrgetter` whose lookups go through the guards."""
    for name in names:
        if type(name) is not str:
            raise TypeError("attribute name must be a string")

    def get(obj):
        out = []
        for name in names:
            value = obj
            for part in name.split("."):
                value = guarded_getattr(value, part)
            out.append(value)
        return out[0] if len(out) == 1 else tuple(out)

    return get


def _methodcaller(name: str, /, *args, **kwargs):
    """`operator.methodcaller` whose lookup goes through the guards."""
    if type(name) is not str:
        raise TypeError("method name must be a string")
    return lambda obj: guarded_getattr(obj, name)(*args, **kwargs)


def _setrecursionlimit(limit: int) -> None:
    import sys

    if not isinstance(limit, int) or limit < 1:
        raise ValueError("recursion limit must be a positive int")
    sys.setrecursionlimit(min(limit, MAX_RECURSION_LIMIT))


def _random_replacements() -> dict[str, object]:
    import random

    class Random(random.Random):
        """`random.Random` seeded with 0 where Python's would take the operating system's
        entropy or the clock (no seed, or None)."""

        def __init__(self, x=0):
            super().__init__(0 if x is None else x)

        def seed(self, a=0, version=2):
            super().seed(0 if a is None else a, version)

    shared = Random()
    _RUN_STATE["random"] = shared
    table: dict[str, object] = {name: getattr(shared, name) for name in _RANDOM_FUNCTIONS}
    table["Random"] = Random
    return table


def _replacements(name: str) -> dict[str, object]:
    if name == "operator":
        return {"attrgetter": _attrgetter, "methodcaller": _methodcaller}
    if name == "sys":
        return {"setrecursionlimit": _setrecursionlimit}
    if name == "random":
        return _random_replacements()
    return {}


def _build_proxy(name: str, listed: frozenset) -> types.ModuleType | None:
    import importlib

    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    proxy = types.ModuleType(name, getattr(module, "__doc__", None))
    replacements = _replacements(name)
    for attr in dir(module):
        if attr.startswith("_"):
            continue
        if (attr not in listed) if isinstance(listed, Only) else (attr in listed):
            continue
        value = replacements.get(attr, getattr(module, attr))
        if _proxy_value(name, value):
            setattr(proxy, attr, value)
    return proxy


_PROXIES: dict[str, types.ModuleType] = {}
_TEMPLATE: dict = {}
_RUN_STATE: dict = {}


def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    """`__import__` for the sandbox: allowed modules only, served as proxies."""
    if level != 0:
        raise ImportError("relative imports are not allowed")
    if name not in _PROXIES:
        raise PolicyError("import", f"import of {name!r} is not allowed")
    if fromlist:
        proxy = _PROXIES[name]
        for item in fromlist:
            if not hasattr(proxy, item):
                raise ImportError(f"cannot import name {item!r} from {name!r}")
        return proxy
    return _PROXIES[name.partition(".")[0]]


def prepare(extra: tuple[str, ...] = ()) -> None:
    """Import the allowed modules and build the proxies; once per worker, before forking."""
    from selfplay.executor.guards import namespace_template

    if _TEMPLATE:
        return
    for name, listed in _table(tuple(extra)).items():
        proxy = _build_proxy(name, listed)
        if proxy is not None:
            _PROXIES[name] = proxy
    for name, proxy in _PROXIES.items():  # submodules as attributes of their parents
        parent, _, child = name.rpartition(".")
        if parent in _PROXIES:
            setattr(_PROXIES[parent], child, proxy)
    init_library_tables(_PROXIES.values())
    _refuse_private_enum_members()
    _TEMPLATE.update(namespace_template(guarded_import))


def _refuse_private_enum_members() -> None:
    """`Enum('E', {'__init_subclass__': hook})` would give a class the dunder methods that a
    `class` statement may not define: in the sandbox the functional API takes public member
    names only."""
    import enum

    create = enum.EnumType._create_  # a method of the metaclass: `cls` is the enum class

    def _create_(cls, class_name, names, **kwargs):
        if isinstance(names, str):
            listed = names.replace(",", " ").split()
        elif isinstance(names, dict) or hasattr(names, "keys"):
            listed = list(names.keys())
        else:
            names = list(names)
            listed = [item if isinstance(item, str) else item[0] for item in names]
        if any(not isinstance(name, str) or name.startswith("_") for name in listed):
            raise PolicyError("private_name", "an enum member's name may not start with '_'")
        return create(cls, class_name, names, **kwargs)

    enum.EnumType._create_ = _create_


def reset_run_state() -> None:
    """Per-process state a run may change, put back before the next run."""
    import decimal
    import sys

    decimal.setcontext(decimal.Context())
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    if "random" in _RUN_STATE:
        _RUN_STATE["random"].seed(0)


def run_globals() -> dict:
    """A fresh namespace for one run of one program."""
    prepare()
    return dict(_TEMPLATE)
