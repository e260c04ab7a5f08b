"""Migrate a legacy session's ``entries`` rows into its event store, losslessly.

Each row becomes one EventRecord whose payload keeps the row's cells as they are (``data`` as its original
text, never re-encoded; see :func:`store.eventstore.records.record_from_entry`), appended in ``seq`` order in
bounded batches through the full protocol under the caller's lease. Afterwards every committed record is
decoded back and compared with its row; any difference raises. The legacy rows stay where they are (mothx
reads them until it converges on the event store), so a failed migration loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.errors import StoreError
from store.eventstore.protocol import append_event_batch, inspect_event_store, read_committed_event_batches
from store.eventstore.records import ENTRY_COLUMNS, entry_from_record, record_from_entry
from store.mothx.lease_guard import LeaseGuard
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line

MIGRATION_BATCH = 256


class MigrationRefused(StoreError):
    """The session cannot be migrated (it has an event store already, or its copy did not verify)."""


@dataclass(frozen=True)
class MigrationReport:
    session_id: str
    entries: int
    batches: int
    verified: bool


def _rows(sd: SessionDir, session_id: str) -> list[dict[str, object]]:
    cols = ", ".join(ENTRY_COLUMNS)
    with sd.db.read() as conn:
        rows = conn.execute(f"SELECT {cols} FROM entries WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
    return [dict(zip(ENTRY_COLUMNS, r, strict=True)) for r in rows]


def migrate_legacy_entries(sd: SessionDir, session_id: str, guard: LeaseGuard | None, *,
                           batch_size: int = MIGRATION_BATCH) -> MigrationReport:
    """Copy every entry of ``session_id`` into its event store and verify the copy (see the module docstring)."""
    sd.require_writable()
    inspection = inspect_event_store(sd, session_id)
    if inspection.intents or inspection.scan.batches:
        raise MigrationRefused(f"Session {one_line(session_id)} has an event store already ({inspection.state}).")
    rows = _rows(sd, session_id)
    batches = 0
    for start in range(0, len(rows), batch_size):
        records = [record_from_entry(r) for r in rows[start:start + batch_size]]
        append_event_batch(sd, session_id, records, guard, batch_id=f"migrate_{start // batch_size + 1:06d}")
        batches += 1
    copied = [entry_from_record(e) for b in read_committed_event_batches(sd, session_id) for e in b.events]
    if copied != rows:
        raise MigrationRefused(f"The event-store copy of session {one_line(session_id)} differs from its entries; "
                               "the entries stay canonical.")
    return MigrationReport(session_id, len(rows), batches, True)
