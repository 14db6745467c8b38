"""Kernels that are the same but for their names, written once (CUDA target).

numba-cuda compiles each kernel of a module on its own (typing, LLVM, NVVM: about a second
each when the cache is cold), and the host function's text repeats code: the D-LSTM's
gradient has the same gate kernel in each of its layers and passes (26 kernels, 20
different). A kernel whose text, with its names numbered in order of appearance, is an
earlier one's is dropped, and its launches launch the earlier one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from .kernels import MODULE_NAMES


def _shape(kernel: str, fixed: frozenset[str] = frozenset()) -> str:
    """``kernel``'s text (a decorated function) with its own name left out and every other
    name it binds or reads, but the module's and the ``fixed`` ones (functions it calls),
    numbered in order of appearance."""
    function = ast.parse(kernel).body[0]
    assert isinstance(function, ast.FunctionDef)
    nodes = sorted((n for n in ast.walk(function) if isinstance(n, (ast.Name, ast.arg))),
                   key=lambda n: (n.lineno, n.col_offset))
    numbered: dict[str, str] = {}
    for node in nodes:
        attribute = "id" if isinstance(node, ast.Name) else "arg"
        name = getattr(node, attribute)
        if name not in MODULE_NAMES and name not in fixed:
            setattr(node, attribute, numbered.setdefault(name, f"n{len(numbered)}"))
    function.name = "_"
    return ast.dump(function)


def deduplicated(kernels: Sequence[str], host: Sequence[str],
                 fixed: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """``kernels`` without those that repeat an earlier one but for names (but the ``fixed``
    names: device functions they call), and the ``host`` lines launching the earlier one
    instead.

    >>> a = "@cuda.jit\\ndef nest1(x1, y1):\\n    y1[0] = x1[0] * 2.0"
    >>> b = "@cuda.jit\\ndef nest2(x2, y2):\\n    y2[0] = x2[0] * 2.0"
    >>> deduplicated([a, b], ["    rtc.launch(nest2, 1, 1, (u_d, v_d, ))"])[1]
    ['    rtc.launch(nest1, 1, 1, (u_d, v_d, ))']
    """
    first: dict[str, str] = {}      # shape -> the name of the first kernel of that shape
    renamed: dict[str, str] = {}    # a dropped kernel -> the kernel it repeats
    kept = []
    for kernel in kernels:
        name = re.search(r"^def (\w+)\(", kernel, re.M).group(1)
        earlier = first.setdefault(_shape(kernel, fixed), name)
        if earlier == name:
            kept.append(kernel)
        else:
            renamed[name] = earlier
    if not renamed:
        return list(kernels), list(host)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")

    def rename(text: str) -> str:
        return pattern.sub(lambda m: renamed[m.group(1)], text)
    # a loop's kernel calls device functions: those dropped are called by the kept names
    return [rename(kernel) for kernel in kept], [rename(line) for line in host]
