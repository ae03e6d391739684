"""``python -m hilat``: the command line (as the ``hilat`` script)."""

import sys

from hilat.cli import main

sys.exit(main())
