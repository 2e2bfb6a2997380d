"""The machinery of the configuration: documented fields, mapping <-> dataclass, overrides.

`selfplay/config/` declares the sections and their fields; this module turns recipes and
`a.b=value` overrides into those frozen dataclasses (refusing unknown keys, wrong types and
bad values with the dotted name of the field) and back into plain data.

A field whose values are a fixed set is typed `Literal[...]` (or a tuple of them): the
machinery refuses other values, naming the allowed ones, and `describe` lists them, so that
neither a section's `check` nor its documentation repeats the set. `Annotated[Literal[...],
"noun"]` names what a bad value is in the error ("unknown isolation layer 'x'").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import field
from pathlib import Path

import yaml

__all__ = [
    "knob",
    "section",
    "Checked",
    "ConfigError",
    "from_dict",
    "to_dict",
    "read_data",
    "describe",
]


def knob(default, doc: str):
    """A config field with its one-line documentation."""
    return field(default=default, metadata={"doc": doc})


def section(cls, doc: str):
    """A nested config section."""
    return field(default_factory=cls, metadata={"doc": doc})


class ConfigError(ValueError):
    """A recipe or override that does not fit the configuration schema."""


class _FieldError(ConfigError):
    """A section's field out of range, named by its class until `from_dict` knows its key."""

    def __init__(self, section: type, name: str, problem: str):
        super().__init__(f"{section.__name__}.{name} {problem}")
        self.section, self.name, self.problem = section, name, problem


class Checked:
    """Base of a config section: its `Literal` fields are checked whoever builds it, then `check`.

    `from_dict` checks recipes and overrides first, naming the dotted key; this also covers a
    section built in code (`CurriculumConfig(shape=...)`), which `from_dict` never sees.
    `retired` names the keys a section no longer has, each with what replaces it: a recipe or
    a saved configuration that still sets one is refused with that message. `ignored` names
    the keys it no longer has because nothing read them: one still set (say, in the
    `config.yaml` of an older run folder) is dropped with a notice on standard error, so that
    the folder still loads.
    """

    retired: typing.ClassVar[dict[str, str]] = {}
    ignored: typing.ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        for name, hint in _hints(type(self)).items():
            if _choices(hint):
                _coerce(getattr(self, name), hint, f"{type(self).__name__}.{name}")
        self.check()

    def check(self) -> None:
        """The section's range and cross-field checks (none unless it has some)."""


def positive(obj, *names: str) -> None:
    """Refuses NaN and infinity too (`nan <= 0` is false), for a section built in code."""
    for name in names:
        value = getattr(obj, name)
        if not (value > 0 and math.isfinite(value)):
            raise _FieldError(type(obj), name, "must be positive")


def not_negative(obj, *names: str) -> None:
    """0 or more, for a count or a length of time where a negative value has no meaning (it
    would not fail, only do something else: `step % -1` is always 0)."""
    for name in names:
        if not getattr(obj, name) >= 0:
            raise _FieldError(type(obj), name, "must be >= 0")


# ---------------------------------------------------------------------------------------------
# dict <-> dataclass


@functools.cache
def _hints(cls) -> dict[str, object]:
    return typing.get_type_hints(cls, include_extras=True)


def _choices(hint: object) -> tuple:
    """The values a `Literal` in `hint` allows (for a tuple: each item), or () if it has none."""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return typing.get_args(hint)
    if origin in (typing.Annotated, tuple, typing.Union, types.UnionType):
        return next((c for arg in typing.get_args(hint) if (c := _choices(arg))), ())
    return ()


# The words YAML 1.1 turns into False and True.
_YAML_WORDS = {False: ("no", "off", "false", "n"), True: ("yes", "on", "true", "y")}


def _choose(value: object, options: tuple, where: str, noun: str = "value") -> object:
    """`value` if it is one of `options`, of the same type (`True` is not `1`). YAML 1.1 reads
    `no`, `off`, `yes`, `on` as booleans, so a boolean for a set of words is taken back as the
    one such word in the set (`trainer.mixed_precision=no`)."""
    if isinstance(value, bool) and not any(isinstance(o, bool) for o in options):
        words = [o for o in options if str(o).lower() in _YAML_WORDS[value]]
        value = words[0] if len(words) == 1 else value
    if not any(value == option and type(value) is type(option) for option in options):
        allowed = ", ".join(map(str, options))
        raise ConfigError(f"{where}: unknown {noun} {value!r}; choose from {allowed}")
    return value


def _coerce(value: object, hint: object, where: str) -> object:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(hint, value, where)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if errors else f"{where}: invalid value {value!r}")
    if origin is typing.Annotated:  # Annotated[Literal[...], noun]
        literal, noun = typing.get_args(hint)
        return _choose(value, typing.get_args(literal), where, noun)
    if origin is typing.Literal:
        return _choose(value, typing.get_args(hint), where)
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint)[:1]
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is float and isinstance(value, int | str) and not isinstance(value, bool):
        with contextlib.suppress(ValueError, OverflowError):  # YAML 1.1 reads `1e-5` as text
            value = float(value)
    if hint is float and isinstance(value, float) and not math.isfinite(value):
        # no knob means anything by NaN or infinity, and NaN passes every `<`/`<=` range check
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    if hint in (int, float, str, bool) and type(value) is not hint:
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def from_dict(cls, data: dict, where: str = ""):
    """Build `cls` from a (partial) mapping; unknown keys and wrong types raise `ConfigError`."""
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    prefix = f"{where}." if where else ""
    for key in data:  # YAML reads `1:` or `null:` as a number or None, which no field is
        if not isinstance(key, str):
            raise ConfigError(f"config key {prefix}{key!r} is not a name; known: {_known(names)}")
    unknown = sorted(set(data) - names)
    for key in unknown:
        if key in getattr(cls, "retired", {}):
            raise ConfigError(f"config key {prefix}{key} was removed: {cls.retired[key]}")
    ignored = getattr(cls, "ignored", {})
    for key in [k for k in unknown if k in ignored]:
        print(f"config key {prefix}{key} is ignored: {ignored[key]}", file=sys.stderr)
        unknown.remove(key)
        data = {k: v for k, v in data.items() if k != key}
    if unknown:
        raise ConfigError(f"unknown config key {prefix}{unknown[0]}; known: {_known(names)}")
    kwargs = {
        name: _coerce(value, hints[name], f"{where}.{name}" if where else name)
        for name, value in data.items()
    }
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ConfigError(f"{where or cls.__name__}: {err}") from None
    except _FieldError as err:  # the dotted key the user wrote: `executor.memory_mb`
        if not where or err.section is not cls:
            raise
        raise ConfigError(f"{where}.{err.name} {err.problem}") from None


def _known(names: set[str]) -> str:
    return ", ".join(sorted(names))


def to_dict(obj) -> dict:
    """The resolved configuration as plain data (tuples become lists), for YAML or JSON."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _set_dotted(data: dict, dotted: str, value: object) -> None:
    """Set `dotted` to `value`; a mapping is merged into the section already there, so that
    `run={seed: 1}` changes the seed without dropping the recipe's other `run` fields."""
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: {key} is not a section")
        child = node[key] = dict(child)  # a copy: a YAML alias may share it with another key
        node = child
    node[keys[-1]] = _merged(node.get(keys[-1]), value)


def _merged(old: object, new: object) -> object:
    """`new` over `old`, mapping into mapping at every depth (a new dict: a YAML alias may
    share `old` with another section)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    return {**old, **{key: _merged(old.get(key), value) for key, value in new.items()}}


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, but a key given twice in one mapping is refused: the plain loader
    keeps the last value, so a second `run:` section or a repeated field would silently undo
    the first. Keys a merge (`<<: *base`) brings in may still be set again."""

    def construct_document(self, node):
        _refuse_duplicates(node, "", set())
        return super().construct_document(node)

    def construct_yaml_int(self, node):
        """YAML 1.1 reads `017` as octal 15 and `1:30` as sexagesimal 90: digits are read in
        base 10, and the `:` form is kept as the text it was (which a number field refuses)."""
        text = self.construct_scalar(node)
        digits = text.replace("_", "")
        if re.fullmatch(r"[-+]?[0-9]+", digits):
            return int(digits, 10)
        return text if ":" in text else super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        text = self.construct_scalar(node)
        return text if ":" in text else super().construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _refuse_duplicates(node: yaml.Node, where: str, seen: set[int]) -> None:
    if id(node) in seen:  # an alias of a node already checked
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicates(item, where, seen)
    if not isinstance(node, yaml.MappingNode):
        return
    lines: dict[tuple[str, str], int] = {}
    for key, value in node.value:
        if key.tag == "tag:yaml.org,2002:merge":
            _refuse_duplicates(value, where, seen)
            continue
        name = f"{where}.{key.value}" if where else str(key.value)
        if isinstance(key, yaml.ScalarNode):
            line = key.start_mark.line + 1
            if (key.tag, key.value) in lines:
                first = lines[(key.tag, key.value)]
                raise ConfigError(f"key {name} is given twice (lines {first} and {line})")
            lines[(key.tag, key.value)] = line
        _refuse_duplicates(value, name, seen)


def _load_yaml(text: str) -> object:
    return yaml.load(text, Loader=_Loader)  # a SafeLoader: builds no Python objects


def read_data(recipe: str | Path | None, overrides: Sequence[str]) -> dict:
    """The recipe's mapping with `a.b=value` overrides applied (values parsed as YAML)."""
    data: dict = {}
    if recipe is not None:
        try:
            loaded = _load_yaml(Path(recipe).read_text(encoding="utf-8")) or {}
        except UnicodeDecodeError as err:
            raise ConfigError(f"recipe {recipe} is not UTF-8 text: {err}") from None
        except yaml.YAMLError as err:
            raise ConfigError(f"recipe {recipe} is not valid YAML: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"recipe {recipe}: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"recipe {recipe} must be a mapping at the top level")
        data = loaded
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.field=value")
        try:
            value = _load_yaml(raw) if raw.strip() else ""
        except ConfigError as err:
            raise ConfigError(f"override {item!r}: {err}") from None
        except yaml.YAMLError as err:
            if _flow(err):  # meant as a list or mapping: taking it as text would mislead
                raise ConfigError(
                    f"override {item!r}: the list or mapping is not valid YAML "
                    f"({getattr(err, 'problem', None) or err}); quote items that hold braces, "
                    """as in 'seed.labeled=["{data}/set.jsonl"]' (single quotes for the shell)"""
                ) from None
            value = raw  # plain text that YAML cannot read, as {data}/set.jsonl
        _set_dotted(data, key.strip(), value)
    return data


def _flow(err: yaml.YAMLError) -> bool:
    """Whether YAML failed inside a flow list or mapping (`[...]`, `{...}`), as opposed to on
    text such as `{data}/set.jsonl` that merely begins with a brace."""
    context = getattr(err, "context", None) or ""
    return context.startswith("while parsing a flow")


def _kind(hint: object) -> str:
    """A field's type as `describe` shows it: a `Literal` by the type of its values."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _kind(args[0])
    if origin is typing.Literal:
        return type(args[0]).__name__
    if origin is tuple:
        return f"tuple[{_kind(args[0])}, ...]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(map(_kind, args))
    return getattr(hint, "__name__", str(hint))


def describe(cls, prefix: str = "") -> Iterator[str]:
    """One line per field: dotted name, type, default, documentation and allowed values."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        name, hint, doc = prefix + f.name, hints[f.name], f.metadata.get("doc", "")
        if dataclasses.is_dataclass(hint):
            yield f"{name}:  {doc}"
            yield from describe(hint, name + ".")
            continue
        if choices := _choices(hint):
            doc += f"; choose from {', '.join(str(c) if c != '' else repr(c) for c in choices)}"
        yield f"  {name} ({_kind(hint)}, default {f.default!r}): {doc}"
