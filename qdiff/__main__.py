"""``python -m qdiff``: the ``qdiff`` command (`qdiff.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
