"""What a sandboxed program sees at run time: builtins, guard functions and allowed modules.

Sandbox side: imported only inside worker processes, standard library only.

RestrictedPython rewrites the program (see `policy.py`) so that every attribute read goes
through `_getattr_`, every item or attribute write through `_write_`, every iteration through
`_getiter_`, every `print` through `_print_`, and so on. This module supplies those functions.
Together with the static checks they enforce:

* no dunder attributes except a short list of harmless ones (`__name__`, `__class__`,
  `__init__`, arithmetic and comparison methods ...); no frame, code, generator or traceback
  internals; no `mro` (it reaches `BaseException`); no `str.format` field traversal;
* private (`_x`) attributes only on objects the program itself created;
* writes only to the program's own objects and to plain containers (list, dict, deque, ...);
* imports only from an allow-list, served as read-only proxies (see `modules.py`); never a
  real module object (any attribute that would return one fails);
* no sources of nondeterminism (`random`, `time`, `id`, `datetime.now` ...), no `eval`, `exec`,
  `compile`, `open`, `input`, `globals`, `vars`, `dir`, `breakpoint`;
* `BaseException` is an alias of `Exception` and a bare `except:` means `except Exception:`,
  so the executor's own interrupt (`RunTimeout`) cannot be caught by the program.

This is a policy, not a sandbox: the process that runs it is also confined by the operating
system (see `hardening.py` and `runner.py`).
"""

from __future__ import annotations

import builtins
import operator
import string
import types
from collections.abc import Callable

__all__ = ["SANDBOX_MODULE", "PolicyError", "RunTimeout", "guarded_getattr", "namespace_template"]

#: `__name__` of the program's namespace; classes and functions it defines carry it in
#: `__module__`, which is how guards tell the program's own objects from library objects.
SANDBOX_MODULE = "__sandbox__"


class PolicyError(Exception):
    """A guard refused an operation at run time; `rule` becomes the reason `policy:<rule>`."""

    def __init__(self, rule: str, detail: str):
        super().__init__(detail)
        self.rule = rule


class RunTimeout(BaseException):
    """Raised into the program when its CPU budget is spent; programs cannot name or catch it."""


# ---------------------------------------------------------------------------------------------
# Attributes

#: Frame, code, generator, coroutine and traceback internals (the `inspect` module's list).
INSPECT_ATTRIBUTES = frozenset(
    """tb_frame tb_next f_back f_builtins f_code f_generator f_globals f_locals f_trace co_code
        gi_frame gi_code gi_yieldfrom cr_await cr_frame cr_code cr_origin ag_await ag_frame
        ag_code""".split()
)

#: Public names that are still refused on library objects: `mro` leads to `BaseException`,
#: `register` would change library ABCs for later runs in the same process.
DENIED_PUBLIC_ATTRIBUTES = INSPECT_ATTRIBUTES | {"mro"}
LIBRARY_ONLY_DENIED = frozenset({"register"})

#: Dunder attributes a program may read: names, its own class, and special methods it may call
#: explicitly (`super().__init__()`, `self.__class__.__name__`, `x.__len__()`).
SAFE_DUNDERS = frozenset(
    """__init__ __new__ __name__ __qualname__ __doc__ __module__ __class__ __len__ __iter__
        __next__ __contains__ __getitem__ __setitem__ __delitem__ __missing__ __reversed__
        __str__ __repr__ __format__ __hash__ __bool__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
        __add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__
        __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__
        __divmod__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ __or__ __ror__ __xor__
        __rxor__ __lshift__ __rshift__ __matmul__ __int__ __float__ __index__ __round__
        __call__ __enter__ __exit__ __post_init__ __copy__ __deepcopy__""".split()
)


def is_own_object(obj: object) -> bool:
    """True for classes, instances and functions the sandboxed program itself defined."""
    cls = obj if isinstance(obj, type) else type(obj)
    if getattr(cls, "__module__", None) == SANDBOX_MODULE:
        return True
    return type(obj) is types.FunctionType and obj.__module__ == SANDBOX_MODULE


def check_attribute(obj: object, name: object, writing: bool = False) -> None:
    """Raise `PolicyError` unless the program may read (or write) `obj.<name>`."""
    if type(name) is not str:
        raise TypeError("attribute name must be a string")
    if name.startswith("__") and name.endswith("__"):
        if writing or name not in SAFE_DUNDERS:
            raise PolicyError("dunder", f"access to {name!r} is not allowed")
    elif name.startswith("_"):
        if not is_own_object(obj):
            raise PolicyError("private", f"private attribute {name!r} of a library object")
    elif name in DENIED_PUBLIC_ATTRIBUTES:
        raise PolicyError("introspection", f"access to {name!r} is not allowed")
    elif name in LIBRARY_ONLY_DENIED and not is_own_object(obj):
        raise PolicyError("introspection", f"{name!r} of a library object")
    elif name in _CLOCK_METHODS and issubclass(
        obj if isinstance(obj, type) else type(obj), _CLOCK_CLASSES
    ):
        raise PolicyError("nondeterminism", f"{name!r} reads the clock")


class _SafeFormatter(string.Formatter):
    """`str.format` whose `{0.attr}` and `{0[key]}` fields go through the guards."""

    def get_field(self, field_name, args, kwargs):
        first, rest = _formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = guarded_getattr(obj, key) if is_attr else obj[key]
        return obj, first


def _formatter_field_name_split(field_name):
    import _string

    return _string.formatter_field_name_split(field_name)


_FORMATTER = _SafeFormatter()


def _safe_format(template: str, /, *args, **kwargs) -> str:
    if type(template) is not str:
        raise TypeError("format() needs a str")
    return _FORMATTER.vformat(template, args, kwargs)


def _safe_format_map(template: str, mapping, /) -> str:
    if type(template) is not str:
        raise TypeError("format_map() needs a str")
    return _FORMATTER.vformat(template, (), mapping)


def guarded_getattr(obj: object, name: str, *default):
    check_attribute(obj, name)
    if name in ("format", "format_map") and (isinstance(obj, str) or obj is str):
        fn = _safe_format if name == "format" else _safe_format_map
        return fn if obj is str else (lambda *a, **k: fn(obj, *a, **k))
    value = getattr(obj, name, *default)
    if isinstance(value, types.ModuleType) and value not in _PROXY_SET:
        raise PolicyError("module", f"attribute {name!r} is a module")
    if is_metaclass(value):
        raise PolicyError("metaclass", f"attribute {name!r} is a metaclass")
    return value


def is_metaclass(value: object) -> bool:
    """`type`, `abc.ABCMeta`, `enum.EnumType`...: called with three arguments, one makes a class
    with any dunder method (`__del__`), which the policy allows a `class` statement only
    within its list (`policy._DUNDER_DEFS`); a program never holds one."""
    return isinstance(value, type) and issubclass(value, type)


def guarded_hasattr(obj: object, name: str) -> bool:
    try:
        guarded_getattr(obj, name)
    except (AttributeError, PolicyError):
        return False
    return True


def guarded_setattr(obj: object, name: str, value: object) -> None:
    check_attribute(obj, name, writing=True)
    setattr(guarded_write(obj), name, value)


def guarded_delattr(obj: object, name: str) -> None:
    check_attribute(obj, name, writing=True)
    delattr(guarded_write(obj), name)


# ---------------------------------------------------------------------------------------------
# Writes, iteration, calls, printing


def guarded_write(obj: object) -> object:
    """`_write_`: the object a program assigns into (`obj[k] = v`, `obj.a = v`, `del obj.a`)."""
    if type(obj) in _WRITABLE_TYPES or is_own_object(obj):
        return obj
    raise PolicyError("write", f"objects of type {type(obj).__name__!r} cannot be modified")


def guarded_unpack_sequence(it, spec, _getiter_):
    """`a, (b, c) = it`: unpack through `_getiter_`, recursively as `spec` describes."""
    out = list(_getiter_(it))
    if len(out) < spec["min_len"]:
        return out
    for index, child in spec["childs"]:
        out[index] = guarded_unpack_sequence(out[index], child, _getiter_)
    return out


def guarded_iter_unpack_sequence(it, spec, _getiter_):
    """`for a, b in it`: each element unpacked as in `guarded_unpack_sequence`."""
    for element in _getiter_(it):
        yield guarded_unpack_sequence(element, spec, _getiter_)


def _apply(fn, *args, **kwargs):
    return fn(*args, **kwargs)


_INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow,
    "<<=": operator.ilshift, ">>=": operator.irshift, "|=": operator.ior,
    "^=": operator.ixor, "&=": operator.iand, "@=": operator.imatmul,
}  # fmt: skip


def inplacevar(op: str, target, value):
    """`x op= y` as rewritten by RestrictedPython, with Python's in-place semantics."""
    return _INPLACE[op](target, value)


class PrintSink:
    """`print` inside the sandbox: formats like `print`, keeps at most `CAP` characters."""

    CAP = 10_000

    def __init__(self, _getattr_=None):
        self.parts: list[str] = []
        self.size = 0

    def _call_print(self, *objects, sep=" ", end="\n", file=None, flush=False):
        text = (" " if sep is None else str(sep)).join(map(str, objects))
        text += "\n" if end is None else str(end)
        if self.size < self.CAP:
            self.parts.append(text[: self.CAP - self.size])
            self.size += len(self.parts[-1])

    def __call__(self) -> str:
        return "".join(self.parts)


# ---------------------------------------------------------------------------------------------
# Builtins


def _type(obj, *rest):
    if rest:
        raise PolicyError("builtin", "type() with three arguments is not allowed")
    kind = type(obj)
    if is_metaclass(kind):  # `type(int)` is `type` itself
        raise PolicyError("metaclass", "type() of a class, its metaclass, is not available")
    return kind


_SAFE_BUILTIN_NAMES = """abs all any ascii bin bool bytearray bytes callable chr classmethod
    complex dict divmod enumerate filter float format frozenset hash hex int isinstance
    issubclass len list map max min next object oct ord pow property range repr reversed round
    set slice sorted staticmethod str sum super tuple zip iter NotImplemented Ellipsis
    Exception ArithmeticError AssertionError AttributeError EOFError FloatingPointError
    IndexError KeyError LookupError NameError NotImplementedError OverflowError RecursionError
    RuntimeError StopIteration TypeError UnboundLocalError UnicodeDecodeError
    UnicodeEncodeError UnicodeError ValueError ZeroDivisionError""".split()

#: Builtins a program may name but never have: the static policy rejects them by name.
FORBIDDEN_BUILTINS = frozenset(
    """eval exec compile open input globals locals vars dir id breakpoint help exit quit
        memoryview __import__ copyright credits license""".split()
)


def _build_builtins(import_fn: Callable) -> dict:
    table = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
    table.update(
        type=_type,
        getattr=guarded_getattr,
        hasattr=guarded_hasattr,
        setattr=guarded_setattr,
        delattr=guarded_delattr,
        BaseException=Exception,
        __import__=import_fn,
        __build_class__=builtins.__build_class__,
    )
    return table


# ---------------------------------------------------------------------------------------------
# Tables filled in by `modules.prepare` once the library modules are imported

#: `datetime.date.today()` and friends: deterministic within a day, so the two validation runs
#: would agree and only a later verification would disagree.
_CLOCK_METHODS = frozenset({"now", "today", "utcnow"})
#: Public attribute names the run-time guards refuse or replace for some objects (the clock,
#: `str.format`'s unguarded field look-ups): a class pattern, whose attribute reads no guard
#: sees, may not name them (`match_rules.py`).
GUARDED_PUBLIC_NAMES = frozenset({"format", "format_map"}) | _CLOCK_METHODS | LIBRARY_ONLY_DENIED
_CLOCK_CLASSES: tuple = ()
_WRITABLE_TYPES: set = {list, dict, bytearray, set}
#: The module proxies; any other module object is refused by `guarded_getattr`.
_PROXY_SET: set = set()


def init_library_tables(proxies) -> None:
    """Record the library types the guards need; `proxies` are the allowed module proxies."""
    global _CLOCK_CLASSES
    import array
    import collections
    import datetime
    import decimal

    _WRITABLE_TYPES.update(
        {collections.deque, collections.OrderedDict, collections.defaultdict,
         collections.Counter, array.array, decimal.Context}
    )  # fmt: skip
    _CLOCK_CLASSES = (datetime.date,)  # datetime.datetime is a subclass
    _PROXY_SET.update(proxies)


def namespace_template(import_fn: Callable) -> dict:
    """The names RestrictedPython's rewritten code expects, and the safe builtins."""
    return {
        "__builtins__": _build_builtins(import_fn),
        "__name__": SANDBOX_MODULE,
        "__metaclass__": type,
        "_getattr_": guarded_getattr,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_inplacevar_": inplacevar,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_apply_": _apply,
        "_print_": PrintSink,
    }


#: Names the call expression `f(<input>)` may use for literal spellings.
LITERAL_NAMES = {"__builtins__": {}, "set": set, "frozenset": frozenset, "float": float}
