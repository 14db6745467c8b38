"""What the host machine can hold: memory available for a new allocation, read before it.

Only the standard library is used: ``/proc/meminfo``'s ``MemAvailable`` where it exists (it
counts reclaimable page cache, unlike ``os.sysconf("SC_AVPHYS_PAGES")``), capped by the physical
memory that ``os.sysconf`` reports. Statevectors (`qdiff.quantum.simulator.memory`) and loop
checkpoint buffers (`qdiff.loops.memory`) check against it before allocating.
"""

from __future__ import annotations

import os


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
