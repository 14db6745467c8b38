"""Compiled modules on disk and in memory.

Each generated module is written once to the cache folder under a name derived from its
text (which spells out the program's structure, shapes and dtypes), and imported from
there, so Numba's ``cache=True`` keeps its machine code across processes; in one process a
text compiles once, however many programs produce it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

_LOADED: dict[str, ModuleType] = {}


def cache_folder() -> Path:
    """Where generated modules live: ``$QDIFF_CACHE_DIR``, else ``~/.cache/qdiff/compiled``."""
    root = os.environ.get("QDIFF_CACHE_DIR")
    folder = Path(root) if root else Path.home() / ".cache" / "qdiff" / "compiled"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def load(source: str) -> ModuleType:
    """The module whose text is ``source`` (written to the cache folder on first use)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    module = _LOADED.get(digest)
    if module is not None:
        return module
    name = f"qdiff_compiled_{digest}"
    path = cache_folder() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source)
        partial.replace(path)  # atomic: concurrent processes never read half a file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _LOADED[digest] = module
    return module
