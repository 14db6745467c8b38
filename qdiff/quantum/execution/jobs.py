"""Independent evaluations of one program (shifted or moved inputs), in process or on an
executor.

On an executor the program travels as its JSON text, so process pools and Dask workers
need no pickled closures; the worker must be a module-level function.

>>> import qdiff
>>> from qdiff.ir.interpreter import evaluate
>>> p = qdiff.trace(lambda x: x * 2.0, 1.0)
>>> run_jobs(lambda program, values, scale: float(evaluate(program, *values)[0]) * scale,
...          p, [[1.0], [3.0]], None, scale=1.0)
[2.0, 6.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from ...ir.core import Program

Worker = Callable[..., Any]


def run_jobs(worker: Worker, program: Program, jobs: Sequence[Sequence[Any]],
             executor: Executor | None, **options: Any) -> list[Any]:
    """``[worker(program, values, **options) for values in jobs]``, on ``executor`` if given."""
    if executor is None:
        return [worker(program, list(values), **options) for values in jobs]
    text = program.to_json()
    futures = [executor.submit(_from_json, worker, text, list(values), options)
               for values in jobs]
    return [f.result() for f in futures]


def _from_json(worker: Worker, text: str, values: list[Any], options: dict) -> Any:
    # a fresh worker process imports this module, hence the `qdiff` package, which registers
    # every primitive the program may use before it is read
    return worker(Program.from_json(text), values, **options)
