"""Refuse registers that cannot fit in memory, before allocating anything (the host's
memory as `qdiff.ir.host` reads it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.host import available_memory_bytes, format_bytes, physical_memory_bytes

__all__ = [
    "StateTooLargeError",
    "MAX_QUBITS",
    "statevector_bytes",
    "physical_memory_bytes",
    "available_memory_bytes",
    "check_statevector_memory",
    "format_bytes",
]

MAX_QUBITS = 62
"""Basis indices are int64 in every kernel; 62 keeps ``index | (1 << wire)`` positive."""


class StateTooLargeError(MemoryError):
    """A register would need more memory than the machine (or device) has available."""


SMALL_STATE_BYTES = 1 << 20
"""States of at most this many bytes are not checked against the free host memory."""


def statevector_bytes(num_qubits: int, dtype: Any = np.complex128, copies: int = 1) -> int:
    """Bytes held by ``copies`` statevectors of ``num_qubits`` qubits.

    >>> statevector_bytes(20)
    16777216
    """
    return copies * (1 << num_qubits) * np.dtype(dtype).itemsize


def check_statevector_memory(
    num_qubits: int,
    dtype: Any = np.complex128,
    *,
    copies: int = 1,
    available: int | None = None,
    what: str = "statevector",
    where: str = "memory",
) -> int:
    """Raise :class:`StateTooLargeError` unless ``copies`` states fit; return the bytes needed.

    ``available`` overrides the measured free memory (a GPU back end passes the device's).

    >>> check_statevector_memory(10)
    16384
    >>> check_statevector_memory(40, available=2**30)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    StateTooLargeError: a 40-qubit complex128 statevector needs 17592186044416 bytes (16.0 TiB)
    but only 1073741824 bytes (1.0 GiB) of memory are available
    """
    if isinstance(num_qubits, bool) or not isinstance(num_qubits, int | np.integer):
        raise TypeError(f"num_qubits must be an int, got {num_qubits!r}")
    if num_qubits < 0:
        raise ValueError(f"num_qubits must be >= 0, got {num_qubits}")
    if num_qubits > MAX_QUBITS:
        raise StateTooLargeError(
            f"{num_qubits} qubits is beyond what the simulators index (at most {MAX_QUBITS})"
        )
    need = statevector_bytes(int(num_qubits), dtype, copies)
    if available is None and need <= SMALL_STATE_BYTES:
        return need  # reading the free memory costs more than running a small program
    have = available_memory_bytes() if available is None else int(available)
    if need > have:
        many = f"{copies} copies of " if copies > 1 else ""
        raise StateTooLargeError(
            f"{many}a {num_qubits}-qubit {np.dtype(dtype).name} {what} needs {need} bytes "
            f"({format_bytes(need)}) but only {have} bytes ({format_bytes(have)}) of {where} "
            "are available"
        )
    return need
