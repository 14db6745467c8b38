"""The ``qdiff`` command: ``demo``, ``info``, ``show FILE.json [--compiled]``, ``case-study``,
``precompile``."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import platform
import sys
from pathlib import Path

import numpy
import scipy

from . import __version__
from .compiler import CompiledProgram
from .demo import run_demo
from .ir.core import Program
from .ir.errors import QdiffError
from .precompile import precompile


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


def case_studies_dir() -> Path:
    """Where the case studies are: ``$QDIFF_CASE_STUDIES``, else ``case_studies/`` of the
    repository checkout the package was installed from (``pip install -e``)."""
    configured = os.environ.get("QDIFF_CASE_STUDIES")
    checkout = Path(__file__).resolve().parents[1]
    folder = Path(configured) if configured else checkout / "case_studies"
    if not folder.is_dir():
        raise QdiffError(f"no case studies at {folder}: set QDIFF_CASE_STUDIES to the "
                         "case_studies folder of a qdiff checkout")
    return folder


def list_case_studies(folder: Path | None = None) -> str:
    """One line per study: its name and the first line of its docstring (read, not run).

    >>> "quantum_walk" in list_case_studies()
    True
    """
    folder = case_studies_dir() if folder is None else folder
    lines = []
    for path in sorted(folder.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if path.stem != "common" and not path.stem.startswith("_") and doc:
            lines.append((path.stem, doc.splitlines()[0]))
    width = max((len(name) for name, _ in lines), default=0)
    return "\n".join(f"{name:<{width}}  {text}" for name, text in lines)


def run_case_study(name: str, flags: list[str]) -> int:
    """Import ``case_studies/NAME.py`` and return its ``main(flags)``."""
    folder = case_studies_dir()
    path = folder / f"{name}.py"
    if not name.isidentifier() or name == "common" or not path.is_file():
        raise QdiffError(f"unknown case study {name!r}; `qdiff case-study --list` lists them")
    # the studies import their shared helpers as the top-level module `common`
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(f"qdiff_case_study_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look their module up there
    spec.loader.exec_module(module)
    return int(module.main(flags))


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
    study_parser = sub.add_parser("case-study", help="run a case study (--list lists them)")
    study_parser.add_argument("--list", action="store_true", help="list the case studies")
    study_parser.add_argument("name", nargs="?", help="the study, e.g. quantum_walk")
    study_parser.add_argument("flags", nargs=argparse.REMAINDER,
                              help="the study's flags: --quick, --seed, --method, --out")
    precompile_parser = sub.add_parser(
        "precompile", help="compile the simulator's kernels into Numba's on-disk cache")
    precompile_parser.add_argument("--dtype", action="append", choices=("complex128", "complex64"),
                                   help="a precision to compile for (default: both)")
    args = parser.parse_args(argv)

    try:
        if args.command == "demo":
            print(run_demo())
        elif args.command == "info":
            print(info())
        elif args.command == "precompile":
            dtypes = {"dtypes": args.dtype} if args.dtype else {}
            for part, seconds in precompile(**dtypes).items():
                print(f"{part:<24} {seconds:6.1f} s")
        elif args.command == "case-study":
            if args.list or args.name is None:
                print(list_case_studies())
                return 0
            return run_case_study(args.name, args.flags)
        else:
            print(show(args.file, args.compiled))
    except (QdiffError, OSError) as exc:
        print(f"qdiff {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
