"""Batching rule of `checkpoint_buffer` (the stored carries of reversed loops, met when a
derivative program is batched): one buffer holds every member's carries, member first."""

from __future__ import annotations

from typing import Any

from ..ir.tracer import record
from ..loops.memory import checkpoint_buffer_p
from .interpreter import def_batch, move_axis


def _buffer(values: list, batched: list, size: int, *, slots: int,
            site: int) -> tuple[list[Any], list[bool]]:
    # zeros of shape (slots, size, ...), made (size, slots, ...)
    buffer = record(checkpoint_buffer_p, values[0], slots=slots, site=site)
    return [move_axis(buffer, 1, 0)], [True]


def_batch(checkpoint_buffer_p, _buffer)
