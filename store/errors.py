"""Named exceptions raised by the store. Screens and the command line turn them into one line."""

from __future__ import annotations


class StoreError(Exception):
    """Base class: every store failure a user may see. ``str(err)`` is one clear sentence."""


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened in a read mode (or one that may not be written)."""


class SchemaIncompatible(StoreError):
    """The database layout cannot be read or written safely (corrupt, unknown or required columns missing)."""


class DatabaseCorrupt(StoreError):
    """SQLite reports the file is not a database, or the integrity check failed."""


class SessionNotFound(StoreError):
    """No session has the given id (or id prefix)."""


class AmbiguousSessionId(StoreError):
    """A session id prefix matches more than one session."""


class LeaseBusy(StoreError):
    """A valid runtime lease is held by someone else."""


class LeaseLost(StoreError):
    """The lease this process held was taken over, released or expired."""


class RepairRefused(StoreError):
    """A repair's fence or precondition failed; nothing was written."""


class EventStoreCorrupt(StoreError):
    """An event-store segment or manifest cannot be read."""
