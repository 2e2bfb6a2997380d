"""MBPP records as seed candidates: each test assert becomes a deduction and an abduction task.

An MBPP record (the full set's JSONL or the sanitized set's JSON array) holds a solution
(`code`), a description (`text` or `prompt`), test asserts (`test_list`) and sometimes setup
code or imports for the tests. An assert of the shape

    assert name(arg, ...) == expected

where `name` is a function the solution defines and every argument is a Python literal gives
one (program, input, output) triplet: the solution with `name` renamed to `f` (the name the
executor calls), the argument text, and `expected` (checked against what the program returns,
like any given output, with Python's == as the assert has it: `240` matches a returned
`240.0`, and the task keeps `240.0`). Every other assert is skipped with a counted reason:

  mbpp:syntax              the assert or the solution does not parse
  mbpp:not_an_equality     not `assert <call> == <expected>` (e.g. `math.isclose(...)`)
  mbpp:not_a_direct_call   the left side wraps the call (`set(name(...)) == ...`)
  mbpp:not_defined         the called name is not a function the solution defines
  mbpp:argument_not_literal an argument is not a literal (a variable, a call)
  mbpp:name_f_taken        the solution already uses the name `f` for something else
  mbpp:test_setup_code     the record needs setup code before its tests (objects, classes)

Renaming works on tokens, so the program keeps its text (comments, layout) and only the
function's own name changes: its definition and its (recursive) calls, never an attribute
of the same name.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings

from selfplay.datasets.candidates import Candidate, Reject

KINDS = ("deduction", "abduction")


def is_mbpp(record: dict) -> bool:
    return "code" in record and "test_list" in record


def candidates(record: dict, line: int) -> list[Candidate | Reject]:
    """Two candidates per usable assert, two rejects (one per kind) per skipped one.
    ValueError when the record itself is malformed."""
    source_id = str(record.get("task_id", f"line {line}"))
    code, tests = record["code"], record["test_list"]
    if not isinstance(code, str):
        raise ValueError("field 'code' must be a string")
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise ValueError("field 'test_list' must be a list of strings")
    imports = record.get("test_imports") or []
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise ValueError("field 'test_imports' must be a list of strings")
    message = record.get("text") or record.get("prompt") or ""
    out: list[Candidate | Reject] = []
    for number, test in enumerate(tests):
        where = f"{source_id}/{number}"
        if str(record.get("test_setup_code") or "").strip():
            found = ("mbpp:test_setup_code", "the tests need setup code")
        else:
            found = triplet(code, test)
        if isinstance(found, tuple) and len(found) == 2:
            reason, detail = found
            out += [Reject(line, where, kind, reason, detail) for kind in KINDS]
            continue
        program, arguments, expected = found
        if imports:
            program = "\n".join(imports) + "\n" + program
        out += [
            Candidate(
                line, where, kind, program, (arguments,), (expected,), str(message), None, True
            )
            for kind in KINDS
        ]
    return out


def triplet(code: str, test: str) -> tuple[str, str, str] | tuple[str, str]:
    """(program defining f, argument text, expected text), or (reason, detail) to skip."""
    try:
        node = _parse(test.strip())
        tree = _parse(code)
    except SyntaxError as err:
        return "mbpp:syntax", str(err)
    statement = node.body[0] if len(node.body) == 1 else None
    if not isinstance(statement, ast.Assert):
        return "mbpp:not_an_equality", test[:80]
    check = statement.test
    if not (
        isinstance(check, ast.Compare) and len(check.ops) == 1 and isinstance(check.ops[0], ast.Eq)
    ):
        return "mbpp:not_an_equality", test[:80]
    call = check.left
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return "mbpp:not_a_direct_call", test[:80]
    name = call.func.id
    defined = {d.name for d in tree.body if isinstance(d, ast.FunctionDef)}
    if name not in defined:
        inner = [
            n for n in ast.walk(call) if isinstance(n, ast.Name) and n.id in defined
        ]  # a solution function inside a wrapper such as set(...)
        reason = "mbpp:not_a_direct_call" if inner else "mbpp:not_defined"
        return reason, f"{name} is not a function the solution defines"
    values = [*call.args, *(k.value for k in call.keywords)]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return "mbpp:argument_not_literal", "unpacked arguments"
    for value in values:
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return "mbpp:argument_not_literal", ast.get_source_segment(test.strip(), value) or ""
    source = test.strip()
    parts = [ast.get_source_segment(source, a) for a in call.args]
    parts += [f"{k.arg}={ast.get_source_segment(source, k.value)}" for k in call.keywords]
    expected = ast.get_source_segment(source, check.comparators[0])
    if name != "f" and _uses_f(tree):
        return "mbpp:name_f_taken", "the solution already uses the name f"
    return rename(code, name), ", ".join(parts), expected


def _parse(text: str) -> ast.Module:
    """Parse quietly: MBPP solutions have escapes such as '\\d' in plain strings, which
    Python warns about (the executor compiles them again and decides)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text)


def _uses_f(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "f":
            return True
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == "f":
            return True
        if isinstance(node, ast.arg) and node.arg == "f":
            return True
    return False


def rename(code: str, name: str) -> str:
    """`code` with the module-level function `name` renamed to f: its definition and every
    plain name that refers to it (calls, recursion), never an attribute or a method."""
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.splitlines(keepends=True)
    tree = _parse(text)
    wanted = {_char_position(lines, n.lineno, n.col_offset) for n in ast.walk(tree)
              if isinstance(n, ast.Name) and n.id == name}  # fmt: skip
    definitions = {d.lineno for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == name}
    edits, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == name:
            defines = previous == "def" and tok.start[0] in definitions
            if defines or tok.start in wanted:
                edits.append(tok.start)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for row, column in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:column] + "f" + line[column + len(name) :]
    return "".join(lines)


def _char_position(lines: list[str], row: int, byte_column: int) -> tuple[int, int]:
    """ast counts columns in UTF-8 bytes, tokenize in characters."""
    return row, len(lines[row - 1].encode("utf-8")[:byte_column].decode("utf-8", "replace"))
