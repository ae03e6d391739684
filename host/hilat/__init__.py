"""hilat: measure a device's real-time latency from the outside with an FPGA rig."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hilat")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0+source"
