"""The static half of the execution policy: which programs may run, compiled with RestrictedPython.

Trusted side. `compile_program` parses a model-written program, checks it and rewrites it with
RestrictedPython so that attribute reads, writes, iteration and imports go through the run-time
guards of `guards.py`. The program text is parsed and compiled here, never executed.

RestrictedPython 9 refuses several things ordinary model code does; `SandboxTransformer`
allows them where that is safe:

* annotated assignments (`x: int = 0`, dataclass fields) and `match` statements (class
  patterns may only name public attributes, `__match_args__` cannot be set);
* augmented assignment to items and attributes (`counts[k] += 1`, `self.n -= 1`), rewritten
  to evaluate the container and key once, read through `_getitem_`/`_getattr_`, write through
  `_write_`, in Python's order;
* `nonlocal`; single-underscore names and attributes (`_cache`, `self._n`; the run-time guard
  limits private attributes to the program's own objects); dunder methods defined in classes
  (`__init__`, `__eq__`, `__lt__`, ...) except the few with effects outside normal calls
  (`__del__`, `__init_subclass__`, `__class_getitem__`, ...);
* `__name__` (so `if __name__ == "__main__":` works).

It adds: imports outside the allow-list, the forbidden builtins (`eval`, `open`, `id`, ...) and
dunder attributes outside the safe list are refused before anything runs, and a bare `except:`
becomes `except Exception:`.

A refusal has a rule, reported as the reason `policy:<rule>`:
`import`, `forbidden_name`, `private_name`, `dunder`, `introspection`, `construct`.
"""

from __future__ import annotations

import ast
import re
import warnings

from RestrictedPython.transformer import (
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

from selfplay.executor import values
from selfplay.executor.compiled import CompiledInput, CompiledProgram, PolicyRejection
from selfplay.executor.guards import DENIED_PUBLIC_ATTRIBUTES, FORBIDDEN_BUILTINS, SAFE_DUNDERS
from selfplay.executor.located import LocatedRewrites
from selfplay.executor.located import call as _call
from selfplay.executor.located import load as _load
from selfplay.executor.located import locate as _locate
from selfplay.executor.match_rules import MatchStatementRules
from selfplay.executor.modules import import_refusal
from selfplay.executor.reruns import PROCESS_WORDS, may_hold_set

__all__ = [
    "CompiledProgram",
    "CompiledInput",
    "PolicyRejection",
    "compile_program",
    "compile_input",
    "ENTRY_POINT",
    "INPUT_MODES",
]

#: How inputs (the text inside `f(...)`) are read: `literal` (the default, for model-written
#: inputs) accepts literals only; `expression` (for benchmark data such as CRUXEval, whose
#: inputs include `dict(a=1)` and lambdas) compiles the arguments under the same policy as
#: programs and evaluates them inside the sandbox, before the program runs, among the data of
#: a second instance of the program (it may read the program's data, not its functions,
#: classes or modules; see `worker._input_namespace`); `:=` is refused in them.
INPUT_MODES = ("literal", "expression")

ENTRY_POINT = "f"
#: how many levels deep the rewrite may recurse (the nodes it visits, and the subtrees the match
#: rules check without visiting: a pattern's dotted names): without a cap how deep the caller's
#: own stack is would decide whether a deeply nested program compiles (CRUXEval, HumanEval,
#: MBPP and AZR's seeds reach 32)
MAX_NESTING = 100

#: Dunder methods a class may define beyond `SAFE_DUNDERS`: attribute hooks and descriptors
#: only affect the program's own objects.
_EXTRA_DUNDER_DEFS = frozenset(
    ["__getattr__", "__setattr__", "__delattr__", "__get__", "__set__", "__delete__"]
)
_DUNDER_DEFS = SAFE_DUNDERS | _EXTRA_DUNDER_DEFS
#: Dunder names a class body may assign.
_CLASS_DUNDER_ASSIGNMENTS = frozenset({"__slots__", "__hash__"})
_RP_TEMPORARY = re.compile(r"_tmp\d+\Z")
_RESERVED = frozenset({"_print", "printed", "builtins", "breakpoint"})
_CONTEXTS = (ast.Load, ast.Store, ast.Del)


class _TooDeep(Exception):
    """The rewrite went more than `MAX_NESTING` levels deep."""


#: The words of a source: where none of an ASCII source's is a forbidden builtin's name, no name
#: the program reads is one, and the walk for the names it binds (~30 us a program) is not needed.
_WORD = re.compile(r"[A-Za-z_]\w*")


class SandboxTransformer(LocatedRewrites, MatchStatementRules, RestrictingNodeTransformer):
    """RestrictedPython's transformer with the relaxations and additions listed above (the
    rules of `match` statements: `match_rules.py`)."""

    def __init__(self, *args, extra_modules: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.extra_modules = extra_modules
        self.rules: list[str] = []
        self._class_depth = 0
        self._depth = 0  # levels of `visit` calls; not unwound after an exception (the
        # transformer is then thrown away)
        self._bound_names: set[str] = set()
        self._rule: str | None = None
        self.builds_sets = False  # a set display or comprehension (see PROCESS_WORDS)

    def count_levels(self, subtree: ast.AST) -> None:
        """Count a subtree that is checked without being visited (a pattern's dotted names)
        towards the nesting cap, as if it were visited."""
        if self._depth + _scan(subtree)[1] > MAX_NESTING:
            raise _TooDeep

    # -- traversal ---------------------------------------------------------------------------
    # `ast.NodeTransformer`'s, without its per-node string building, attribute look-ups and
    # generators (compilation is most of a validation's time on the trusted side)

    _methods: dict[type, object] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._methods = {}

    def visit(self, node: ast.AST):
        method = self._methods.get(type(node))
        if method is None:
            name = "visit_" + type(node).__name__
            method = getattr(type(self), name, None) or type(self).generic_visit
            self._methods[type(node)] = method
        # how deep the rewrite recurses is capped here, not by the caller's stack (RecursionError)
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise _TooDeep
        node = method(self, node)
        self._depth -= 1
        return node

    def node_contents_visit(self, node):
        visit = self.visit
        for field in node._fields:
            try:
                old = getattr(node, field)
            except AttributeError:
                continue
            if isinstance(old, list):
                new_values = []
                for value in old:
                    if isinstance(value, ast.AST):
                        value = visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, ast.AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old[:] = new_values
            elif isinstance(old, _CONTEXTS):
                continue  # `visit_Load` and the others return the (field-less) node itself
            elif isinstance(old, ast.AST):
                new_node = visit(old)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node

    # -- reporting ---------------------------------------------------------------------------

    def deny(self, node: ast.AST, rule: str, info: str) -> None:
        self._rule = rule
        self.error(node, info)

    def error(self, node: ast.AST, info: str) -> None:
        # RestrictedPython's own refusals (metaclass=, star imports, ...) are constructs.
        self.rules.append(getattr(self, "_rule", None) or "construct")
        self._rule = None
        super().error(node, info)

    def not_allowed(self, node: ast.AST) -> None:
        self.deny(node, "construct", f"{type(node).__name__} statements are not allowed.")

    # -- names -------------------------------------------------------------------------------

    def check_name(self, node, name, allow_magic_methods=False):
        if name is None or name in ("_", "__"):
            return
        if name.startswith("_") and name.endswith("_"):
            if allow_magic_methods and self._class_depth and name in _DUNDER_DEFS:
                return
            self.deny(node, "private_name", f'"{name}" is a reserved name')
        elif _RP_TEMPORARY.match(name) or name in _RESERVED or name.endswith("__roles__"):
            self.deny(node, "private_name", f'"{name}" is a reserved name')

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load):
            if node.id == "__name__":
                return node
            if node.id in FORBIDDEN_BUILTINS and node.id not in self._bound_names:
                self.deny(node, "forbidden_name", f'"{node.id}" is not available')
                return node
        elif (
            self._class_depth
            and isinstance(node.ctx, ast.Store)
            and node.id in _CLASS_DUNDER_ASSIGNMENTS
        ):
            return node
        return super().visit_Name(node)

    def visit_Call(self, node: ast.Call):
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("eval", "exec")
            and func.id not in self._bound_names
        ):
            self.deny(node, "forbidden_name", f'"{func.id}" is not available')
        return super().visit_Call(node)

    def visit_Nonlocal(self, node: ast.Nonlocal):
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler):
        if node.type is None:  # a bare except must not catch the executor's RunTimeout
            node.type = ast.Name("Exception", ast.Load())
            copy_locations(node.type, node)
        return super().visit_ExceptHandler(node)

    def visit_Set(self, node: ast.Set):
        self.builds_sets = True
        return super().visit_Set(node)

    def visit_SetComp(self, node: ast.SetComp):
        self.builds_sets = True
        return super().visit_SetComp(node)

    # -- attributes --------------------------------------------------------------------------

    def check_attribute_name(self, node: ast.AST, attr: str, ctx: ast.expr_context) -> None:
        if attr.startswith("__") and attr.endswith("__"):
            if not isinstance(ctx, ast.Load) or attr not in SAFE_DUNDERS:
                self.deny(node, "dunder", f'access to "{attr}" is not allowed')
        elif attr in DENIED_PUBLIC_ATTRIBUTES:
            self.deny(node, "introspection", f'access to "{attr}" is not allowed')

    def visit_Attribute(self, node: ast.Attribute):
        self.check_attribute_name(node, node.attr, node.ctx)
        node = self.node_contents_visit(node)
        # The new nodes get the attribute's location, as `copy_locations` would give them,
        # without its walk over the (already located) value below them.
        if isinstance(node.ctx, ast.Load):
            name, attr = ast.Name("_getattr_", ast.Load()), ast.Constant(node.attr)
            new = ast.Call(name, [node.value, attr], [])
            _locate(node, new, name, attr)
            return new
        name = ast.Name("_write_", ast.Load())
        node.value = ast.Call(name, [node.value], [])
        _locate(node, node.value, name)
        return node

    # -- statements RestrictedPython refuses -------------------------------------------------

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if isinstance(node.target, ast.Name):
            self.check_name(node, node.target.id)
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign):
        """`c[k] op= v` and `o.a op= v`, evaluating `c`, `k` and `o` once, in Python's order."""
        target = node.target
        if isinstance(target, ast.Name):  # RestrictedPython's `n = _inplacevar_("+=", n, v)`
            node = self.node_contents_visit(node)
            op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
            value = _call("_inplacevar_", op, _load(target.id), node.value)
            new = ast.Assign([node.target], value)
            _locate(node, new, value, value.func, op, value.args[1])
            return new
        if isinstance(target, ast.Attribute):
            self.check_attribute_name(target, target.attr, ast.Store())
        holder = self.gen_tmp_name()
        statements: list[ast.stmt] = [_assign(holder, self.visit(target.value))]
        temporaries = [holder]
        if isinstance(target, ast.Subscript):
            key = self.gen_tmp_name()
            temporaries.append(key)
            statements.append(_assign(key, self.visit(target.slice)))
            old = _call("_getitem_", _load(holder), _load(key))
            store = ast.Subscript(_call("_write_", _load(holder)), _load(key), ast.Store())
        else:
            old = _call("_getattr_", _load(holder), ast.Constant(target.attr))
            store = ast.Attribute(_call("_write_", _load(holder)), target.attr, ast.Store())
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        new_value = _call("_inplacevar_", op, old, self.visit(node.value))
        statements.append(ast.Assign([store], new_value))
        statements.append(ast.Delete([ast.Name(t, ast.Del()) for t in temporaries]))
        for statement in statements:
            copy_locations(statement, node)
        return statements

    def visit_FunctionDef(self, node: ast.FunctionDef):
        # A method's name belongs to its class scope; its body does not.
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        outer, self._class_depth = self._class_depth, 0
        try:
            with self.print_info.new_print_scope():
                node = self.node_contents_visit(node)
                self.inject_print_collector(node)
        finally:
            self._class_depth = outer
        return node

    def visit_ClassDef(self, node: ast.ClassDef):
        self._class_depth += 1
        try:
            return super().visit_ClassDef(node)
        finally:
            self._class_depth -= 1

    # -- imports -----------------------------------------------------------------------------

    def check_import_names(self, node):
        if isinstance(node, ast.Import):
            requests = [(alias.name, []) for alias in node.names]
        else:
            requests = [(node.module or "", [alias.name for alias in node.names])]
        for module, names in requests:
            refusal = import_refusal(module, names, self.extra_modules)
            if getattr(node, "level", 0):
                refusal = "relative imports are not allowed"
            if refusal:
                self.deny(node, "import", refusal)
        return super().check_import_names(node)


def _assign(name: str, value: ast.expr) -> ast.Assign:
    return ast.Assign([ast.Name(name, ast.Store())], value)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the program binds itself (so `def f(input):` may use `input`)."""
    return _scan(tree)[0]


def _scan(tree: ast.AST) -> tuple[set[str], int]:
    """The names the program binds itself, and how many levels deep its tree is (an upper
    bound), from one walk over every node, level by level."""
    names: set[str] = set()
    add = names.add
    AST, Name, Load = ast.AST, ast.Name, ast.Load
    level: list = [tree]
    depth = 0
    while level:  # every node, as ast.walk, without its generators
        depth += 1
        below: list = []
        extend, append = below.extend, below.append
        for node in level:
            if isinstance(node, Name):
                if not isinstance(node.ctx, Load):
                    add(node.id)
                continue  # its only child is the context
            if not isinstance(node, AST):  # names in Global, None in Dict keys, ...
                continue
            if (
                isinstance(node, ast.ExceptHandler)
                and node.name
                or isinstance(node, (ast.FunctionDef, ast.ClassDef))
            ):
                add(node.name)
            elif isinstance(node, ast.arg):
                add(node.arg)
            elif isinstance(node, ast.alias):
                add(node.asname or node.name.partition(".")[0])
            for field in node._fields:
                child = getattr(node, field, None)
                if type(child) is list:
                    extend(child)
                elif isinstance(child, AST):
                    append(child)
        level = below
    return names, depth


def _top_level_names(statements: list[ast.stmt]) -> set[str]:
    """Names bound by module-level statements, looking into `if`/`try`/`with`, not into defs."""
    names: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)):
            names |= _bound_names(stmt)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                names |= _top_level_names(getattr(stmt, field, []))
    return names


def compile_program(
    source: str, max_chars: int = 20_000, extra_modules: tuple[str, ...] = ()
) -> CompiledProgram | PolicyRejection:
    """Check and compile one program; never raises for anything the program contains."""
    if len(source) > max_chars:
        return PolicyRejection("program_too_large", f"program longer than {max_chars} characters")
    try:
        with warnings.catch_warnings():  # model code's invalid escapes are not our warnings
            warnings.simplefilter("ignore")
            tree = ast.parse(source, "<program>", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        return PolicyRejection("syntax", f"{type(err).__name__}: {err}")
    if ENTRY_POINT not in _top_level_names(tree.body):
        return PolicyRejection("no_f", f"the program does not define {ENTRY_POINT!r}")
    transformer = SandboxTransformer(extra_modules=extra_modules)
    words = _WORD.findall(source) if source.isascii() else None
    if words is None or not FORBIDDEN_BUILTINS.isdisjoint(words):
        # only then do the names the program binds matter (`def f(input):` may read `input`);
        # identifiers are NFKC-normalised, so a non-ASCII source may spell one unseen
        transformer._bound_names = _bound_names(tree)
    try:
        tree = transformer.visit(tree)
    except _TooDeep:  # refused whatever the caller's stack depth, not by RecursionError
        return PolicyRejection("syntax", f"program nested more than {MAX_NESTING} levels deep")
    except RecursionError:
        return PolicyRejection("syntax", "program nested too deeply")
    if transformer.errors:
        rule = transformer.rules[0] if transformer.rules else "construct"
        return PolicyRejection(f"policy:{rule}", "; ".join(transformer.errors[:3]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compile(tree, "<program>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return PolicyRejection("syntax", f"{type(err).__name__}: {err}")
    rerun = words is None or transformer.builds_sets or not PROCESS_WORDS.isdisjoint(words)
    return CompiledProgram(code=code, source=source, rerun=rerun)


def compile_input(text: str, mode: str, limits: values.Limits) -> CompiledInput | PolicyRejection:
    """Check and compile the argument text of `f(...)`; reasons start with `input:`."""
    if not isinstance(text, str):
        return PolicyRejection(
            "input:not_literal", f"an input must be text, not {type(text).__name__}"
        )
    if mode == "literal":
        try:
            normalised = values.parse_call_args(text, limits)
        except values.ValueRejected as err:
            why = "too_large" if isinstance(err, values.TooLarge) else "not_literal"
            return PolicyRejection(f"input:{why}", str(err))
        code = compile(f"_args_({normalised})", "<input>", "eval", dont_inherit=True)
        return CompiledInput(normalised, code, expression=False, rerun=may_hold_set(normalised))
    if mode != "expression":
        raise ValueError(f"unknown input mode {mode!r}; known: {INPUT_MODES}")
    if len(text) > limits.max_chars:
        return PolicyRejection(
            "input:too_large", f"input longer than {limits.max_chars} characters"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call = ast.parse(f"_args_({text}\n)", "<input>", "eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        return PolicyRejection("input:syntax", f"{type(err).__name__}: {err}")
    body = call.body
    if not (
        isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == "_args_"
    ):
        return PolicyRejection("input:syntax", "input is not an argument list")
    if _scan(body)[1] > MAX_NESTING:
        return PolicyRejection("input:syntax", f"input nested more than {MAX_NESTING} levels deep")
    if any(isinstance(node, ast.NamedExpr) for node in ast.walk(body)):
        return PolicyRejection("policy:assignment", "an input binds no names (':=')")
    parts = [ast.unparse(a) for a in call.body.args]
    parts += [
        ("**" if k.arg is None else f"{k.arg}=") + ast.unparse(k.value) for k in call.body.keywords
    ]
    transformer = SandboxTransformer()
    try:
        call.body.args = [transformer.visit(a) for a in call.body.args]
        call.body.keywords = [transformer.visit(k) for k in call.body.keywords]
    except _TooDeep:  # the walk above caps the depth already; kept for a changed rewrite
        return PolicyRejection("input:syntax", f"input nested more than {MAX_NESTING} levels deep")
    if transformer.errors:
        rule = transformer.rules[0] if transformer.rules else "construct"
        return PolicyRejection(f"policy:{rule}", "; ".join(transformer.errors[:3]))
    ast.fix_missing_locations(call)
    code = compile(call, "<input>", "eval", dont_inherit=True)
    rerun = transformer.builds_sets or not text.isascii()
    rerun = rerun or not PROCESS_WORDS.isdisjoint(_WORD.findall(text))
    return CompiledInput(", ".join(parts), code, expression=True, rerun=rerun)
