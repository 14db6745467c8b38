"""Programs that also take their arguments keyed, such as an imported Qiskit circuit's
``{Parameter: value}``: `qm.run`, `qm.gradient` and `qdiff.grad` turn such arguments into
the program's positional ones, and key the gradient like them.

A program says it accepts keyed arguments by a method ``positional_arguments(args)`` that
returns the positional arguments and a function keying a gradient of them like ``args``
(None when ``args`` were positional already); the importer defines it
(`qdiff.quantum.qiskit.importer.ImportedCircuit`), so execution never imports Qiskit.

>>> class Keyed:
...     def positional_arguments(self, args):
...         return (args[0]["x"],), lambda g: {"x": g}
>>> positional(Keyed(), ({"x": 2.0},))[0], positional(print, (2.0,))
((2.0,), ((2.0,), None))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rekey = Callable[[Any], Any]


def positional(program: Any, args: tuple) -> tuple[tuple, Rekey | None]:
    """``args`` as ``program`` takes them positionally, and how to key a gradient of them
    like ``args`` (None: nothing to key, the arguments were positional)."""
    convert = getattr(program, "positional_arguments", None)
    return convert(tuple(args)) if callable(convert) else (tuple(args), None)


def keyed_like(rekey: Rekey | None, grad: Any, argnums: Any) -> Any:
    """``grad`` (the gradient with respect to ``argnums``) keyed like the arguments: the
    keyed argument is argument 0, the only one such programs take.

    >>> keyed_like(lambda g: {"x": g}, 3.0, 0), keyed_like(lambda g: {"x": g}, (3.0,), (0,))
    ({'x': 3.0}, ({'x': 3.0},))
    """
    if rekey is None or grad is None:
        return grad
    if isinstance(argnums, (tuple, list)):
        return tuple(rekey(g) if n == 0 else g for n, g in zip(argnums, grad))
    return rekey(grad) if argnums == 0 else grad
