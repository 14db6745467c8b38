"""The copies between host and device arrays made by calls of CUDA-compiled functions,
counted per call: `last_call` gives the last call's counts, and each call logs them on the
``qdiff.compiler`` logger (level DEBUG).
"""

from __future__ import annotations

import logging
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


# the counts of the call running (or of the last one)
TRANSFERS = Transfers()


def begin_call() -> None:
    """Start counting one call of a compiled function."""
    TRANSFERS.__init__()


def end_call(program: str) -> None:
    """Log the counts of the call of ``program``'s compiled function just made."""
    t = TRANSFERS
    log.debug("CUDA program %r: %d uploads (%d bytes), %d downloads (%d bytes), %d device "
              "allocations (%d bytes)", program, t.uploads, t.upload_bytes, t.downloads,
              t.download_bytes, t.allocations, t.allocation_bytes)


def last_call() -> Transfers:
    """The transfers of the last call of a CUDA-compiled function (a copy).

    >>> begin_call(); TRANSFERS.uploaded(16); last_call().uploads
    1
    """
    return Transfers(**vars(TRANSFERS))
