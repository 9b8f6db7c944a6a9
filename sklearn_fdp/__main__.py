"""``python -m sklearn_fdp``: the ``sklearn-fdp`` command line."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
