"""The ``sessionscope`` command line (:mod:`tui.cli.core`), with its runs and capture commands."""

from tui.cli.core import main

__all__ = ["main"]
