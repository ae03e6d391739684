"""Loaded by the interpreter when this folder is on PYTHONPATH: makes the top-level modules named in
$HILAT_TEST_HIDE (comma-separated) fail to import, as if their packages were not installed."""

import os
import sys

_HIDDEN = {name for name in os.environ.get("HILAT_TEST_HIDE", "").split(",") if name}


class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Hide())
