"""The copies between host and device arrays made by calls of CUDA-compiled functions,
counted per call and per thread: `last_call` gives the calling thread's last call's counts
(calls running at once in other threads, or inside this one, count apart), and each call
logs them on the ``qdiff.compiler`` logger (level DEBUG).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger("qdiff.compiler")


@dataclass
class Transfers:
    """Copies host → device (``uploads``) and device → host (``downloads``), with their
    sizes in bytes, and the device arrays allocated (``allocations``: none in a call that
    the buffers kept from the previous call serve).

    >>> t = Transfers()
    >>> t.uploaded(24); t.downloaded(8); t.downloaded(8); t.allocated(24)
    >>> t.uploads, t.downloads, t.download_bytes, t.allocations
    (1, 2, 16, 1)
    """

    uploads: int = 0
    downloads: int = 0
    upload_bytes: int = 0
    download_bytes: int = 0
    allocations: int = 0
    allocation_bytes: int = 0

    def uploaded(self, nbytes: int) -> None:
        self.uploads += 1
        self.upload_bytes += nbytes

    def downloaded(self, nbytes: int) -> None:
        self.downloads += 1
        self.download_bytes += nbytes

    def allocated(self, nbytes: int) -> None:
        self.allocations += 1
        self.allocation_bytes += nbytes


class _Counts(threading.local):
    """Each thread's counts: those of its running calls (innermost last) and of the last
    call it finished; copies made outside any call count in ``outside``."""

    def __init__(self) -> None:
        self.running: list[Transfers] = []
        self.last = Transfers()
        self.outside = Transfers()


_COUNTS = _Counts()


def current() -> Transfers:
    """The counts that a copy made now in this thread adds to: its innermost running call's
    (outside any call, counts of their own, never a call's).

    >>> begin_call(); current().uploaded(16); end_call("p"); last_call().uploads
    1
    """
    return _COUNTS.running[-1] if _COUNTS.running else _COUNTS.outside


def begin_call() -> None:
    """Start counting one call of a compiled function (in this thread)."""
    _COUNTS.running.append(Transfers())


def end_call(program: str) -> None:
    """Log the counts of the call of ``program``'s compiled function just made in this
    thread; they are now its `last_call`."""
    t = _COUNTS.running.pop()
    _COUNTS.last = t
    log.debug("CUDA program %r: %d uploads (%d bytes), %d downloads (%d bytes), %d device "
              "allocations (%d bytes)", program, t.uploads, t.upload_bytes, t.downloads,
              t.download_bytes, t.allocations, t.allocation_bytes)


def last_call() -> Transfers:
    """The transfers of the last call of a CUDA-compiled function that this thread finished
    (a copy).

    >>> begin_call(); current().downloaded(8); current().downloaded(8); end_call("p")
    >>> last_call().downloads
    2
    """
    return Transfers(**vars(_COUNTS.last))
