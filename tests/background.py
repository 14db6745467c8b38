"""Processes a test session runs beside itself on the machine's other core: `qdiff
precompile`, and a second pytest process that takes a share of the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``extra``, for a Python process that imports this
    checkout's `qdiff` and `tests` (the repository first on its path).

    >>> child_environment({"X": "1"})["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    True
    """
    return {**os.environ, **(extra or {}),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


class Background:
    """A process started now, its output kept in a temporary file.

    >>> job = Background(["-c", "print('done')"])
    >>> job.finish(wait=True)
    (0, 'done\\n')
    """

    def __init__(self, arguments: Sequence[str], environment: dict[str, str] | None = None):
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen([sys.executable, *arguments], cwd=ROOT,
                                        env=child_environment(environment),
                                        stdout=self.log, stderr=subprocess.STDOUT)

    def finish(self, wait: bool) -> tuple[int | None, str]:
        """Its exit status and output; when ``wait`` is false a process still running is
        stopped instead, and the status is None."""
        with self.log:
            if wait:
                self.process.wait()
            elif self.process.poll() is None:
                self.process.kill()
                self.process.wait()
                return None, ""
            self.log.seek(0)
            return self.process.returncode, self.log.read()
