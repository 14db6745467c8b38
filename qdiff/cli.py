"""The ``qdiff`` command: ``demo``, ``info`` and ``show FILE.json [--compiled]``."""

from __future__ import annotations

import argparse
import importlib
import platform
import sys

import numpy
import scipy

from . import __version__
from .compiler import CompiledProgram
from .demo import run_demo
from .ir.core import Program
from .ir.errors import QdiffError


def _probe(module: str) -> tuple[bool, str]:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # any import failure means "not usable here"
        return False, f"not usable ({type(exc).__name__}: {exc})".splitlines()[0][:100]
    return True, getattr(mod, "__version__", "installed")


def _cuda_status() -> str:
    try:
        from numba import cuda
    except Exception as exc:
        return f"not usable ({type(exc).__name__})"
    try:
        return "usable" if cuda.is_available() else "no CUDA device"
    except Exception as exc:  # the driver itself may fail to load
        return f"not usable ({type(exc).__name__})"


def _cupy_status() -> str:
    ok, version = _probe("cupy")
    if not ok:
        return version
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"{version}, no GPU ({type(exc).__name__})"
    return f"{version}, {count} GPU(s)"


def info() -> str:
    """Versions and which accelerators and simulators are usable on this machine."""
    rows = [
        ("qdiff", __version__),
        ("python", platform.python_version()),
        ("numpy", numpy.__version__),
        ("scipy", scipy.__version__),
        ("numba", _probe("numba")[1]),
        ("numba CUDA", _cuda_status()),
        ("cupy", _cupy_status()),
        ("qiskit", _probe("qiskit")[1]),
        ("qiskit-aer", _probe("qiskit_aer")[1]),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def show(path: str, compiled: bool = False) -> str:
    """The text form of a program saved with ``Program.to_json``, or with ``compiled`` the
    Python source the Numba back end generates for it (`qdiff.jit`)."""
    with open(path, encoding="utf-8") as handle:
        program = Program.from_json(handle.read())
    return CompiledProgram(program).source if compiled else str(program)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``qdiff`` command."""
    parser = argparse.ArgumentParser(prog="qdiff", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="a hybrid program and its gradient four ways")
    sub.add_parser("info", help="versions and usable back ends")
    show_parser = sub.add_parser("show", help="pretty-print a saved program (JSON)")
    show_parser.add_argument("file")
    show_parser.add_argument("--compiled", action="store_true",
                             help="print the generated source of the compiled program")
    args = parser.parse_args(argv)

    try:
        if args.command == "demo":
            print(run_demo())
        elif args.command == "info":
            print(info())
        else:
            print(show(args.file, args.compiled))
    except (QdiffError, OSError) as exc:
        print(f"qdiff {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
