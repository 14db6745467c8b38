"""Memoizing a program-to-program pass per program object.

Programs hash by identity, and a cache keyed by ``id(program)`` must also hold the program
itself: the id of a program that was freed can be reused by a new one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..core import Program

Pass = Callable[[Program], Program]


def cached_per_program(limit: int) -> Callable[[Pass], Pass]:
    """Decorator: run the pass once per program object, keeping at most ``limit`` results
    (the cache is emptied when it grows past them).

    >>> calls = []
    >>> @cached_per_program(limit=8)
    ... def rename(program):
    ...     calls.append(program.name)
    ...     return program
    >>> p = Program((), (), (), name="p")
    >>> rename(p) is rename(p), calls
    (True, ['p'])
    """

    def decorate(rewrite: Pass) -> Pass:
        cache: dict[int, tuple[Program, Program]] = {}

        @functools.wraps(rewrite)
        def cached(program: Program) -> Program:
            hit = cache.get(id(program))
            if hit is not None and hit[0] is program:
                return hit[1]
            result = rewrite(program)
            if len(cache) > limit:
                cache.clear()
            cache[id(program)] = (program, result)
            return result

        return cached

    return decorate
