"""Configuration: frozen dataclasses with one line of documentation per field.

Every knob of the system is a field here, with its default; nothing else silently overrides it.
A recipe (YAML) only overrides fields; `section.field=value` arguments on the command line
override the recipe; the resolved configuration is written into the run folder. Unknown keys,
wrong types and out-of-range values are refused with the dotted name of the field.

`selfplay config` prints every field with its type, default and documentation.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from selfplay.executor.modules import OPTIONAL_MODULES

__all__ = [
    "knob",
    "ExecutorConfig",
    "Config",
    "ConfigError",
    "load",
    "from_dict",
    "to_dict",
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


ISOLATION_LAYERS = ("namespaces", "landlock", "seccomp", "rlimits")


@dataclass(frozen=True)
class ExecutorConfig:
    """The sandboxed executor that validates tasks and verifies answers."""

    workers: int = knob(0, "sandbox worker processes; 0 = one per CPU core (at least 2)")
    run_timeout_s: float = knob(1.0, "CPU seconds one validation run may use")
    verify_time_factor: float = knob(
        20.0, "a verification run may use this multiple of its task's CPU time at validation"
    )
    verify_time_floor_s: float = knob(
        0.002, "but never less than this many CPU seconds (a CRUXEval run takes ~15 us)"
    )
    wall_slack_s: float = knob(
        1.0, "a run is killed after 2 x its CPU limit + this many wall seconds"
    )
    memory_mb: int = knob(512, "address space a sandboxed process may add beyond its start, MiB")
    runs_per_child: int = knob(
        256, "runs one forked child executes before it is replaced (1 = a fresh process per run)"
    )
    max_program_chars: int = knob(20_000, "longest program accepted")
    max_value_chars: int = knob(20_000, "longest canonical text of an input, output or answer")
    max_value_depth: int = knob(32, "deepest nesting of an input, output or answer")
    max_value_items: int = knob(10_000, "most items in one input, output or answer")
    max_int_digits: int = knob(4_300, "most digits of an int in an input, output or answer")
    extra_modules: tuple[str, ...] = knob(
        (), "opt-in modules for benchmark test code: random (reseeded every run), hashlib"
    )
    hash_seed: int = knob(1, "PYTHONHASHSEED of worker 0; worker i uses hash_seed + i")
    startup_timeout_s: float = knob(30.0, "seconds a worker may take to start")
    batch_grace_s: float = knob(
        10.0, "a worker whose batch overruns the sum of its runs' limits by this is killed"
    )
    isolation: tuple[str, ...] = knob(ISOLATION_LAYERS, "isolation layers that must be active")
    accept_missing: tuple[str, ...] = knob(
        (), "layers of `isolation` a run may go without when the machine lacks them"
    )
    bwrap: str = knob("bwrap", "bubblewrap executable used for the namespaces layer")

    def __post_init__(self) -> None:
        for name in (*self.isolation, *self.accept_missing):
            if name not in ISOLATION_LAYERS:
                raise ConfigError(
                    f"executor: unknown isolation layer {name!r}; know {ISOLATION_LAYERS}"
                )
        for name in self.extra_modules:
            if name not in OPTIONAL_MODULES:
                raise ConfigError(
                    f"executor.extra_modules: {name!r} is not one of {OPTIONAL_MODULES}"
                )
        if self.workers == 1:
            raise ConfigError("executor.workers must be 0 or at least 2 (determinism needs two)")
        _positive(self, "run_timeout_s", "verify_time_factor", "verify_time_floor_s", "memory_mb")
        _positive(self, "runs_per_child", "max_value_chars", "max_value_depth", "max_value_items")


def _positive(obj, *names: str) -> None:
    for name in names:
        if getattr(obj, name) <= 0:
            raise ConfigError(f"{type(obj).__name__}.{name} must be positive")


@dataclass(frozen=True)
class Config:
    """A whole run."""

    executor: ExecutorConfig = section(ExecutorConfig, "the sandboxed executor")


# ---------------------------------------------------------------------------------------------
# dict <-> dataclass


def _hints(cls) -> dict[str, object]:
    return typing.get_type_hints(cls)


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
    if origin is typing.Literal:
        if value not in typing.get_args(hint):
            raise ConfigError(f"{where}: {value!r} is not one of {typing.get_args(hint)}")
        return value
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint)[:1]
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and type(value) is not hint:
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def from_dict(cls, data: dict, where: str = ""):
    """Build `cls` from a (partial) mapping; unknown keys and wrong types raise `ConfigError`."""
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigError(
            f"unknown config key {prefix}{unknown[0]}; known: {', '.join(sorted(names))}"
        )
    kwargs = {
        name: _coerce(value, hints[name], f"{where}.{name}" if where else name)
        for name, value in data.items()
    }
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ConfigError(f"{where or cls.__name__}: {err}") from None


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
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {key} is not a section")
    node[keys[-1]] = value


def load(recipe: str | Path | None = None, overrides: Sequence[str] = (), cls=Config):
    """Defaults, then the recipe's values, then `a.b=value` overrides (values parsed as YAML)."""
    data: dict = {}
    if recipe is not None:
        try:
            loaded = yaml.safe_load(Path(recipe).read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"recipe {recipe} is not valid YAML: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"recipe {recipe} must be a mapping at the top level")
        data = loaded
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like section.field=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        _set_dotted(data, key.strip(), value)
    return from_dict(cls, data)


def describe(cls=Config, prefix: str = "") -> Iterator[str]:
    """One line per field: dotted name, type, default and documentation."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        if dataclasses.is_dataclass(hints[f.name]):
            yield f"{name}:  {f.metadata.get('doc', '')}"
            yield from describe(hints[f.name], name + ".")
        else:
            kind = getattr(hints[f.name], "__name__", str(hints[f.name]))
            yield f"  {name} ({kind}, default {f.default!r}): {f.metadata.get('doc', '')}"
