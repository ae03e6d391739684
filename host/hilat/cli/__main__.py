"""``python -m hilat.cli``, as ``python -m hilat``."""

import sys

from hilat.cli import main

sys.exit(main())
