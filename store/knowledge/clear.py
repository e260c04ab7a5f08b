"""Clearing a base's index as a fenced repair: the active snapshot and every graph row go, the configuration
and the source folder stay (the seed's ``ClearKnowledgeBaseIndex``). Idempotent: an unindexed base with no
snapshot left clears nothing and succeeds.

``preview()`` reads the base's active snapshot, its configuration revision and every snapshot with its row
counts, and fingerprints them; ``apply()`` re-reads them inside its write transaction and refuses
(:class:`~store.errors.RepairRefused`) when they changed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from store.errors import ReadOnlyStore, RepairRefused
from store.knowledge.base import open_for_write, open_store, read_base
from store.knowledge.publish import fk_deferred_write, prune
from store.mothx.db import OpenMode
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.safetext import one_line

REPAIR_ID = "kb-clear-index"


def _facts(conn: sqlite3.Connection, base_id: str) -> tuple[str, int, list[tuple[str, str, int, int, int, int]]]:
    row = conn.execute("SELECT active_snapshot_id FROM knowledge_bases WHERE id = ?", (base_id,)).fetchone()
    active = str(row[0]) if row else ""
    cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(knowledge_bases)")}
    revision = 1
    if "config_revision" in cols:
        rev = conn.execute("SELECT config_revision FROM knowledge_bases WHERE id = ?", (base_id,)).fetchone()
        revision = int(rev[0]) if rev else 1
    snaps = []
    for sid, status in conn.execute("SELECT id, status FROM knowledge_index_snapshots WHERE knowledge_base_id = ? "
                                    "ORDER BY id", (base_id,)).fetchall():
        counts = [int(conn.execute(f"SELECT count(*) FROM {t} WHERE snapshot_id = ?", (sid,)).fetchone()[0])
                  for t in ("knowledge_files", "knowledge_chunks", "knowledge_nodes", "knowledge_edges")]
        snaps.append((str(sid), str(status), counts[0], counts[1], counts[2], counts[3]))
    fts = int(conn.execute("SELECT count(*) FROM knowledge_chunk_fts").fetchone()[0])
    snaps.append(("(fts)", "", fts, 0, 0, 0))
    return active, revision, snaps


@dataclass
class ClearIndexRepair:
    root: Path
    mode: OpenMode
    base_id: str
    applied_at: str
    id: str = REPAIR_ID
    title: str = "Clear knowledge base index"

    def _plan(self, active: str, revision: int, snaps: list[tuple[str, str, int, int, int, int]]) -> RepairPreview:
        bid = one_line(self.base_id)
        changes: list[PlannedChange] = []
        if active:
            changes.append(PlannedChange("row", "knowledge_bases", bid, "update",
                                         f"active snapshot {one_line(active)} → none (configuration kept)"))
        for sid, status, files, chunks, nodes, edges in snaps:
            if sid == "(fts)":
                if files:
                    changes.append(PlannedChange("row", "knowledge_chunk_fts", "(all)", "delete", f"{files} FTS rows"))
                continue
            changes.append(PlannedChange("row", "knowledge_index_snapshots", one_line(sid), "delete",
                                         f"{status} snapshot: {files} files, {chunks} chunks, {nodes} nodes, "
                                         f"{edges} edges (with their evidence)"))
        refusal = ""  # a read mode is refused by apply() (and by the command line and the screen before it)
        notes = () if changes else ("the base is unindexed already: nothing to clear",)
        return RepairPreview(repair_id=self.id, title=self.title, session_id="", target=f"knowledge base {bid}",
                             changes=tuple(changes), notes=notes, refusal=refusal,
                             fingerprint=fingerprint(self.base_id, active, revision, snaps))

    def preview(self) -> RepairPreview:
        mode = OpenMode.READ_ONLY if self.mode.is_read else self.mode
        with open_store(self.root, self.base_id, mode) as store, store.read() as conn:
            read_base(conn, store.layout, self.base_id, store.path)  # the base row exists
            return self._plan(*_facts(conn, self.base_id))

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        if self.mode.is_read:
            raise ReadOnlyStore(f"Refused: the session directory is open {self.mode.value} (read-only).")
        with open_for_write(self.root, self.base_id, self.applied_at) as store, fk_deferred_write(store) as conn:
            step("read facts")
            now = self._plan(*_facts(conn, self.base_id))
            if expected is not None and now.fingerprint != expected.fingerprint:
                raise RepairRefused(f"Refused: knowledge base {one_line(self.base_id)} changed since the preview; "
                                    "preview it again.")
            step("deactivate")
            conn.execute("UPDATE knowledge_bases SET active_snapshot_id = '', updated_at = ? WHERE id = ?",
                         (self.applied_at, self.base_id))
            step("prune")
            prune(conn, self.base_id, keep="")
        message = "cleared" if now.changes else "nothing to clear: the base is unindexed"
        return RepairResult(repair_id=self.id, session_id="", target=now.target, changes=now.changes,
                            message=f"Knowledge base {one_line(self.base_id)}: {message}.")
