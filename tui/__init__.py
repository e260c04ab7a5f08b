"""Sessionscope's terminal UI (Textual). Calls the store only.

Importing the UI raises the cyclic garbage collector's first threshold until the app's first screen painted
(:func:`end_startup_gc`, called by the app): start-up builds tens of thousands of long-lived objects (modules,
classes, functions, the first rows) and would otherwise pay a hundred young collections walking them, about a
tenth of the time to the first paint beyond a minimal Textual app's. The defaults come back after that paint;
a command-line command that runs no app puts them back before it starts (:mod:`tui.cli.core`).
"""

import gc as _gc

_DEFAULT_GC = _gc.get_threshold()
_gc.set_threshold(max(_DEFAULT_GC[0], 100_000), *_DEFAULT_GC[1:])


def end_startup_gc() -> None:
    """The collector's thresholds as they were before the UI was imported (idempotent)."""
    _gc.set_threshold(*_DEFAULT_GC)
