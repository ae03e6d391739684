"""A compiler cache (ccache) for the C/C++ builds of the simulators and the firmware.

The Verilator models (LiteX's simulator, ``targets/sim.py``; cocotb's, ``tests/gateware/tb.py``) and
LiteX's software (the rig firmware, libbase, picolibc, compiler-rt) are rebuilt from scratch in every
new clone: ``build/`` is per clone. With ccache their object files come from a cache outside the
clone, shared by every clone on the machine, so a second clone's builds take a fraction of the time.

``enable(root)`` sets, in this process's environment (inherited by make, Verilator and meson):

- ``CCACHE_DIR``: ``$XDG_CACHE_HOME/hilat/ccache`` (default ``~/.cache/hilat/ccache``), unless
  ``CCACHE_DIR`` is set already;
- ``CCACHE_BASEDIR=root`` and ``CCACHE_NOHASHDIR=1``: absolute paths inside the clone (its ``build/``,
  its ``.venv``) are hashed relative to the compiler's working directory, and that directory itself
  not, so two clones in different directories share their entries (the debug information of an object
  from the cache names the directory of the clone that compiled it first);
- ``OBJCACHE=ccache`` (Verilator's ``verilated.mk``) and ``CCACHE=ccache`` (LiteX's ``common.mak``);
  meson (picolibc) uses ccache by itself when it is on PATH.

Without ccache on PATH (a machine set up before it was in ``scripts/setup.sh``) nothing changes: the
builds run uncached. ``HILAT_CCACHE=0`` turns it off.
"""

import os
import shutil
from pathlib import Path


def cache_dir():
    """Where the cache lives unless CCACHE_DIR says otherwise."""
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "hilat" / "ccache"


def settings(root):
    """The environment variables ``enable`` sets (empty when ccache is off or missing)."""
    if os.environ.get("HILAT_CCACHE", "1") == "0" or shutil.which("ccache") is None:
        return {}
    return {
        "CCACHE_DIR": os.environ.get("CCACHE_DIR") or str(cache_dir()),
        "CCACHE_BASEDIR": str(Path(root).resolve()),
        "CCACHE_NOHASHDIR": "1",
        "OBJCACHE": "ccache",
        "CCACHE": "ccache",
    }


def enable(root):
    """Route the C/C++ compilers of builds started from this process through ccache (see above);
    returns whether it is on."""
    env = settings(root)
    os.environ.update(env)
    return bool(env)
