"""Finding the answer in model text: the pieces both role parsers share.

Models answer in many shapes: reasoning first, then the answer; `<think>...</think>` followed by
`<answer>...</answer>`; fenced blocks with or without a language tag (```python, ```py, ```,
~~~); a block left open when the text was cut off; labels such as `Input:` or `Output:`;
`assert f(...) == ...` lines. These functions read all of them and never raise on model text.
Nothing here evaluates model text: only `ast.parse` looks at it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = [
    "ANSWER_STOP",
    "Block",
    "answer_region",
    "fenced_blocks",
    "program_blocks",
    "clean_program",
    "call_arguments",
    "labelled",
    "is_argument_list",
    "strip_value",
]

#: Generation can end at the end of the answer: what follows is never read, and an answer
#: section cut there (unclosed) runs to the end of the text, which reads the same.
ANSWER_STOP = ("</answer>",)

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n`]*$")
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.S | re.I)
_THINK_END = re.compile(r"</think(?:ing)?>", re.I)
_DEFINES_F = re.compile(r"^[ \t]*def[ \t]+f[ \t]*\(", re.M)


@dataclass(frozen=True)
class Block:
    """A fenced block: its language tag (lower case, may be empty) and body."""

    lang: str
    body: str
    closed: bool


def answer_region(text: str) -> str:
    """The part of a completion that holds the final answer.

    The last `<answer>` section if there is one (an unclosed one runs to the end), else what
    follows the last `</think>`, else the whole text.
    """
    answers = _ANSWER.findall(text)
    if answers:
        return answers[-1]
    ends = list(_THINK_END.finditer(text))
    return text[ends[-1].end() :] if ends else text


def fenced_blocks(text: str) -> list[Block]:
    """Fenced blocks in order. A closing fence may end a line of code (`return x```); a block
    still open at the end of the text is returned with `closed=False`."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2).lower()
        body, i, closed = [], i + 1, False
        while i < len(lines):
            line = lines[i].rstrip()
            i += 1
            if line.endswith(fence[:3]):
                tail = line[: -len(fence[:3])].rstrip("`~")
                if tail.strip():
                    body.append(tail)
                closed = True
                break
            body.append(lines[i - 1])
        blocks.append(Block(lang, "\n".join(body).strip("\n"), closed))
    return blocks


def program_blocks(text: str) -> list[str]:
    """Candidate programs defining `f`: fenced blocks first; else unfenced code from the first
    `def f(` line to the end of its indented body (and what follows it that is indented or a
    further definition)."""
    fenced = [b.body for b in fenced_blocks(text) if _DEFINES_F.search(b.body)]
    if fenced:
        return fenced
    match = _DEFINES_F.search(text)
    if not match:
        return []
    start = text.rfind("\n", 0, match.start()) + 1
    kept = []
    for line in text[start:].split("\n"):
        indented = line.startswith((" ", "\t")) or not line.strip()
        if kept and not indented and not line.startswith(("def ", "class ", "@")):
            break
        kept.append(line)
    # Imports written just above the function belong to it.
    before = text[:start].rstrip("\n").split("\n")
    imports = []
    while before and re.match(r"^(import|from)\s+\w", before[-1]):
        imports.insert(0, before.pop())
    return ["\n".join(imports + kept).strip("\n")]


def _is_definition(node: ast.stmt, functions: set[str]) -> bool:
    keep = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    if isinstance(node, keep):
        return True
    # Constants and tables at module level (`LIMIT = 10`, `VOWELS = set('aeiou')`) are part of
    # the program; a demonstration assigned at module level is not: a value that names `f`,
    # `print` or `input` (`result = f(3)`, `xs = list(map(f, data))`, `n = int(input())`) or
    # calls another function the program defines (`status = main()`).
    if isinstance(node, ast.Assign | ast.AnnAssign):
        value = node.value
        return value is not None and not any(_demonstrates(n, functions) for n in ast.walk(value))
    return False


def _demonstrates(node: ast.AST, functions: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("f", "print", "input")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions
    )


def _functions(tree: ast.Module) -> set[str]:
    """The names of the functions a program defines at top level."""
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def clean_program(source: str) -> tuple[str, list[str]]:
    """The program without its top-level test code, and the argument texts of top-level calls
    to `f` found in that code (`print(f([1, 2]))`, `assert f(3) == 9`, `x = f('a')`).

    Models often demonstrate their function after defining it; those lines would run on every
    validation and are not part of the task. A program that does not parse loses only its
    top-level lines that are exactly a call `f(...)`, whose arguments are collected; the rest
    is returned as it is, so that the executor reports the syntax error (a broken program in
    the requested layout is an invalid task, not a completion without a task).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _clean_unparsed(source)
    lines = source.split("\n")
    kept, calls = [], []
    functions = _functions(tree)
    for node in tree.body:
        if _is_definition(node, functions):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            kept.append("\n".join(lines[first - 1 : node.end_lineno]))
            continue
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            nodes = [n for s in node.body for n in ast.walk(s)]
        else:
            nodes = list(ast.walk(node))
        for sub in nodes:
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "f":
                args = call_arguments(ast.get_source_segment(source, sub) or "")
                if args is not None:
                    calls.append(args)
    return "\n\n".join(kept), calls


def _clean_unparsed(source: str) -> tuple[str, list[str]]:
    kept, calls = [], []
    for line in source.split("\n"):
        args = None if line[:1].isspace() else call_arguments(line)
        if args is None:
            kept.append(line)
        else:
            calls.append(args)
    return "\n".join(kept).rstrip() + ("\n" if source.endswith("\n") else ""), calls


def has_test_code(source: str) -> bool:
    """Whether a program that parses demonstrates itself at top level: a statement
    `clean_program` leaves out that is a call (`print(f(6))`, `check()`), asserts, or names `f`
    or `print` anywhere in it (`x = f(1)`, the same under `if __name__ == ...`). A docstring,
    `pass`, a guarded import or a constant built with a call (`VOWELS = set('aeiou')`) is none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    functions = _functions(tree)
    for node in tree.body:
        if _is_definition(node, functions):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            return True
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assert) or _demonstrates(sub, {"f", "print"}):
                return True
    return False


def call_arguments(text: str) -> str | None:
    """`a, b` for text that is exactly a call `f(a, b)`; None otherwise. The arguments are what
    the parsed call holds between its parentheses, so that a comment after the call, which
    may hold parentheses of its own (`f('ab')  # kept (as is)`), stays out of them."""
    source = text.strip()
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "f"):
        return None
    call = ast.get_source_segment(source, node) or ""
    return call[call.index("(", len(node.func.id)) + 1 : -1].strip()


def is_argument_list(text: str) -> bool:
    """Whether `text` parses as the arguments of a call (`[1, 2], 'a'`, `x=3`)."""
    if not text.strip():
        return False
    try:
        node = ast.parse(f"f({text}\n)", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return isinstance(node, ast.Call)


def labelled(text: str, *labels: str) -> list[str]:
    """Values written after a label on its line (`Input: [1, 2]`, `**Output:** 3`), in order."""
    names = "|".join(re.escape(label) for label in labels)
    label = rf"^[ \t*#>-]*(?:{names})(?:[ \t]*\d+)?"  # `Input 2`, `**Input**`, `- input`
    pattern = re.compile(label + r"[ \t*]*[:=][ \t*]*(.+)$", re.M | re.I)
    return [strip_value(m.group(1)) for m in pattern.finditer(text)]


def strip_value(text: str) -> str:
    """A value without surrounding blanks, inline backticks or a sentence's final full stop."""
    text = text.strip()
    while len(text) >= 2 and text[0] == text[-1] == "`":
        text = text[1:-1].strip()
    if text.endswith(".") and not text.endswith(".."):
        try:
            ast.parse(text, mode="eval")
        except SyntaxError:
            text = text[:-1].rstrip()
    return text
