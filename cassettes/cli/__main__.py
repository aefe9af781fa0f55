"""``python -m cassettes.cli``: the ``looptap`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
