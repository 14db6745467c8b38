"""What one statement of a generated CUDA host function does to names: which it reads,
which it assigns, and which arrays it may write in place (read from its ``ast``; a call
whose callee is not known to only read is taken to write every array it is passed, and
through any view of it).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

# names the host function reads from its module, never arrays of its own
_GLOBALS = frozenset({"np", "numba", "rt", "rtc", "transfers", "CompiledCodeError",
                      *dir(builtins)})
# NumPy functions that write into an argument (every other np.<name> only reads)
_NUMPY_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal"})
# array methods that only read the array
_READING_METHODS = frozenset({
    "reshape", "copy", "astype", "ravel", "transpose", "sum", "max", "min", "any", "all",
    "conj", "conjugate", "dot", "item", "tolist", "view", "flatten", "argmax", "argmin",
    "mean", "prod", "cumsum", "nonzero", "copy_to_host"})
# helpers of the CPU runtime (`compiler.runtime`) that only read their arguments (a helper
# not listed is taken to write every array it is passed)
_READING_HELPERS = frozenset({"start_index", "gather", "arg_extremum", "batched_matmul",
                              "batched_matmul_views",
                              "batched_matmul_loops", "factor_or_solve", "slogdet"})
# Python builtins the host function calls on its values (none writes its arguments)
_PURE_BUILTINS = frozenset({"min", "max", "int", "float", "bool", "complex", "abs", "range",
                            "len", "divmod", "round", "tuple", "list", "zip", "enumerate"})


@dataclass
class Statement:
    """What one host statement does to names: reads, assigns, may write in place."""

    reads: list[str]
    assigns: list[str]
    writes: set[str]


def _call_writes(call: ast.Call) -> set[str]:
    """Names a call may write: every array argument, unless the callee only reads."""
    func = call.func
    args = [*call.args, *(k.value for k in call.keywords)]
    out = {k.value.id for k in call.keywords if k.arg == "out" and isinstance(k.value, ast.Name)}
    if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS:
        return out
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "rt" and func.attr in _READING_HELPERS:
            return out
        if isinstance(owner, ast.Name) and owner.id == "np":
            return out | (viewed_names(args[:1]) if func.attr in _NUMPY_WRITERS else set())
        if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) \
                and owner.value.id == "np":  # np.add.at(a, ...) writes a; np.add.reduce reads
            return out | (viewed_names(args[:1]) if func.attr == "at" else set())
        if isinstance(owner, ast.Name) and owner.id not in ("rt", "rtc") \
                and func.attr not in _READING_METHODS:
            return out | {owner.id} | viewed_names(args)
        if isinstance(owner, ast.Name) and owner.id not in ("rt", "rtc"):
            return out
    return out | viewed_names(args)


def viewed_names(nodes: list[ast.AST]) -> set[str]:
    """The array names passed as ``nodes`` (a name, or a view of one).

    >>> sorted(viewed_names(ast.parse("f(x, y[0], z.reshape(2), 1.0)").body[0].value.args))
    ['x', 'y', 'z']
    """
    found = set()
    for node in nodes:
        # x[...], x.T, x.reshape(...): a callee may write through a view of x
        while isinstance(node, (ast.Subscript, ast.Attribute)) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            node = node.func.value if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Name):
            found.add(node.id)
    return found


def _base(target: ast.AST) -> str | None:
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def parse_statement(text: str) -> Statement:
    """The names a host statement (or block header) reads, assigns and may write in place.

    >>> s = parse_statement("y[0] = np.sin(x) + rt.fill(z, w[1:]) + rt.gather(v, i, 0)")
    >>> s.reads, s.assigns, sorted(s.writes)
    (['y', 'x', 'z', 'w', 'v', 'i'], [], ['w', 'y', 'z'])
    >>> parse_statement("for i in range(n):").assigns
    ['i']
    """
    text = text.strip()
    if text.endswith(":"):
        header = text[:-1]
        if header == "else":
            return Statement([], [], set())
        if header.startswith("elif "):
            header = "if " + header[5:]
        text = header + ": pass"
    tree = ast.parse(text)
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    reads = list(dict.fromkeys(n.id for n in nodes if isinstance(n.ctx, ast.Load)
                               and n.id not in _GLOBALS))
    assigns = list(dict.fromkeys(n.id for n in nodes if isinstance(n.ctx, ast.Store)))
    writes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            writes |= _call_writes(node)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            base = _base(node)
            if base is not None:
                writes.add(base)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            reads.append(node.target.id)
    return Statement(reads, assigns, writes)
