"""The host's layers (docs/architecture.md, "Layers"): import-linter's contract in pyproject.toml holds,
and it does catch an upward import (a check that cannot fail would prove nothing)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(package_parent, tmp_path):
    """lint-imports with the project's contract on the ``hilat`` found under ``package_parent``."""
    config = tmp_path / "contract.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], capture_output=True,
                          text=True, cwd=tmp_path, env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
                          timeout=120)


def test_the_layers_hold(tmp_path):
    done = lint_imports(ROOT / "host", tmp_path)
    assert done.returncode == 0 and "1 kept, 0 broken" in done.stdout, done.stdout + done.stderr


def test_an_upward_import_breaks_the_contract(tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "host" / "hilat", copy / "hilat", ignore=shutil.ignore_patterns("__pycache__"))
    transport = copy / "hilat" / "link" / "transport.py"
    transport.write_text(transport.read_text() + "\nfrom hilat.reports import report  # noqa: E402  (upward)\n")
    done = lint_imports(copy, tmp_path)
    assert done.returncode != 0 and "hilat.link is not allowed to import hilat.reports" in done.stdout, done.stdout
