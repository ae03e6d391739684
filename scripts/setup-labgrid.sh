#!/usr/bin/env bash
# Idempotent set-up of .venv-labgrid: labgrid (requirements-labgrid.txt) with hilat beside it, for
# the labgrid driver (host/hilat/labgrid.py), its example and its test. A venv of its own: labgrid
# depends on pyserial-labgrid, which installs the same `serial` module as the plain pyserial of
# .venv, and one installed beside the other replaces its files (labgrid issue #1245).
# Called by scripts/setup.sh (so by `make setup` / `make test`); safe to run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-labgrid
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi

# Re-install only when the lock file or the package metadata changed.
stamp=$VENV/.hilat-setup
want=$(cat requirements-labgrid.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python packages into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-labgrid.txt
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  "$VENV/bin/python" -m pip check >&2
  echo "$want" > "$stamp"
fi
