"""hilat's version: the installed distribution's, or the source tree's (a base module: the reports
stamp it on what they write)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hilat")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0+source"
