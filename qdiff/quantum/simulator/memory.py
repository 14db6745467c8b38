"""Refuse registers that cannot fit in memory, before allocating anything.

Only the standard library is used: ``/proc/meminfo``'s ``MemAvailable`` where it exists (it
counts reclaimable page cache, unlike ``os.sysconf("SC_AVPHYS_PAGES")``), capped by the physical
memory that ``os.sysconf`` reports.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

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


def format_bytes(n: float) -> str:
    """Human-readable byte count.

    >>> format_bytes(16 * 2**20)
    '16.0 MiB'
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def statevector_bytes(num_qubits: int, dtype: Any = np.complex128, copies: int = 1) -> int:
    """Bytes held by ``copies`` statevectors of ``num_qubits`` qubits.

    >>> statevector_bytes(20)
    16777216
    """
    return copies * (1 << num_qubits) * np.dtype(dtype).itemsize


def physical_memory_bytes() -> int:
    """Total physical memory from ``os.sysconf`` (0 if the platform does not say).

    >>> physical_memory_bytes() > 0
    True
    """
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def available_memory_bytes() -> int:
    """Memory a new allocation can use now: ``MemAvailable`` or free pages, capped by physical.

    >>> 0 < available_memory_bytes() <= physical_memory_bytes()
    True
    """
    phys = physical_memory_bytes()
    avail = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail == 0:
        try:
            avail = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            avail = phys
    return min(avail, phys) if phys else avail


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
    have = available_memory_bytes() if available is None else int(available)
    if need > have:
        many = f"{copies} copies of " if copies > 1 else ""
        raise StateTooLargeError(
            f"{many}a {num_qubits}-qubit {np.dtype(dtype).name} {what} needs {need} bytes "
            f"({format_bytes(need)}) but only {have} bytes ({format_bytes(have)}) of {where} "
            "are available"
        )
    return need
