"""hilat: measure a device's real-time latency from the outside with an FPGA rig."""

from hilat.version import __version__

# The Python API (hilat.api), imported on first use so that `import hilat` stays light.
_API = ("Rig", "Run", "Stats", "Seconds", "Comparison", "Baseline", "FailRule", "InsufficientSamples", "SettingsError",
        "CaptureError", "load", "compare", "simulate", "parse_duration", "parse_fail_rule")
__all__ = ["__version__", *_API]


def __getattr__(name):
    if name in _API:
        from hilat import api

        return getattr(api, name)
    raise AttributeError(f"module 'hilat' has no attribute {name!r}")
