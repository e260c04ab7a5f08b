"""The command line's own error: arguments that parse but do not make sense together (exit status 2)."""

from __future__ import annotations


class UsageError(Exception):
    """Arguments that parse but do not make sense together (exit status 2)."""


__all__ = ["UsageError"]
