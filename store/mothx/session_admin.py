"""Session management as fenced, previewed repairs: delete (reference 6), pin / unpin, project, rename.

Every one takes a ``mutation`` runtime lease on each session it changes (reference 10; the lease refuses an active
run, and a valid lease of another holder refuses the repair), re-reads its facts inside the write transaction
fenced by that lease, and writes nothing when they changed since the preview.

* :class:`DeleteSessions` deletes one or more sessions in the reference's order (section 6): the
  ``session_fork_requests`` naming the session as source or child, the ``delivery_operations`` of its delivery
  intents, the ``attachment_deliveries`` of its attachments, the child tables child-first, then the ``sessions``
  row. ``request_stats`` rows are kept; ``sub_session`` / ``sub_entries`` are left as they are (the reference
  does not say). A table the database does not have is skipped. The preview counts the rows per table.
* :class:`SetPinned` upserts ``session_metadata.pinned``; :class:`SetProject` links the session to the project
  named ``NAME`` (the first project with exactly that name, else a new ``projects`` row), or clears the link when
  the name is empty.
* :class:`RenameSession` appends a ``session_info`` entry ``{"name": title, "source": "manual"}`` with
  ``parentId`` = the leaf read at preview time (the leaf check of reference 7.3), as the runtime writes a title.

Decisions: pin and project keep the other column of ``session_metadata`` (an insert sets pinned 0 / project NULL);
``updated_at`` is RFC 3339 text.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.errors import RepairRefused, SessionNotFound, StoreError
from store.mothx import repair_kit as kit
from store.mothx.lease_guard import LeaseGroup, acquire_mutations
from store.mothx.lease_model import LEASE_TTL_S, LeaseOwner, LeaseSnapshot
from store.mothx.lease_store import active_run_ids, check_fence, read_lease
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult, fingerprint, step
from store.mothx.run_model import has_table, new_id
from store.mothx.sessiondir import SessionDir
from store.mothx.turns import append_entry, leaf_id
from store.safetext import one_line
from store.times import format_rfc3339
from store.words import plural

CHILD_TABLES: tuple[str, ...] = (
    "runtime_submissions", "input_resource_events", "session_run_recoveries", "delivery_intents", "input_resources",
    "session_attachments", "session_execution_intents", "session_run_events", "session_runs",
    "session_capability_events", "session_capabilities", "session_esm_objectives", "session_esm_guidance",
    "session_metadata", "conversation_turns", "session_runtime_leases", "cron_jobs", "response_items",
    "tool_execution_records", "response_runs", "response_session_state", "response_turns",
    "session_channel_tool_generations", "session_channel_tools", "entries",
)
"""Reference 6 step 4, child-first."""


def delete_statements(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(table, WHERE clause with one or two ?, count of ?)`` in the reference's delete order, tables present only."""
    out: list[tuple[str, str, str]] = []

    def present(t: str) -> bool:
        return has_table(conn, None, t)

    if present("session_fork_requests"):
        out.append(("session_fork_requests", "source_session_id = ? OR child_session_id = ?", "2"))
    if present("delivery_operations") and present("delivery_intents"):
        out.append(("delivery_operations", "intent_id IN (SELECT id FROM delivery_intents WHERE session_id = ?)", "1"))
    if present("attachment_deliveries") and present("session_attachments"):
        out.append(("attachment_deliveries",
                    "attachment_id IN (SELECT id FROM session_attachments WHERE session_id = ?)", "1"))
    out.extend((t, "session_id = ?", "1") for t in CHILD_TABLES if present(t))
    out.append(("sessions", "id = ?", "1"))
    return out


def _args(sid: str, n: str) -> tuple[str, ...]:
    return (sid,) * int(n)


@dataclass(frozen=True)
class _SessionFacts:
    session_id: str
    exists: bool
    active: tuple[str, ...]
    lease: LeaseSnapshot | None
    extra: object = None  # the repair's own facts (row counts, metadata row, leaf …)

    def content(self) -> object:
        return [self.session_id, self.exists, list(self.active), self.extra]


class _SessionRepair(kit.LeasedRepair):
    """A change of one or more sessions under ``mutation`` leases."""

    def __init__(self, sd: SessionDir, session_ids: tuple[str, ...] | list[str] | str, *,
                 owner: LeaseOwner | None = None, ttl: int = LEASE_TTL_S) -> None:
        super().__init__(sd, owner=owner, ttl=ttl)
        ids = (session_ids,) if isinstance(session_ids, str) else tuple(session_ids)
        self.session_ids = tuple(dict.fromkeys(ids))

    # the repair's own parts -----------------------------------------------------------------------------------
    def _extra(self, conn: sqlite3.Connection, sid: str) -> object:
        return None

    def _own_refusal(self, facts: _SessionFacts) -> str:
        return ""

    def _changes(self, facts: _SessionFacts) -> list[PlannedChange]:
        raise NotImplementedError

    def _write(self, conn: sqlite3.Connection, facts: _SessionFacts) -> list[PlannedChange]:
        raise NotImplementedError

    def _message(self, done: list[PlannedChange]) -> str:
        raise NotImplementedError

    # shared ----------------------------------------------------------------------------------------------------
    @property
    def target(self) -> str:
        if len(self.session_ids) == 1:
            return f"session {one_line(self.session_ids[0])}"
        return f"{len(self.session_ids)} sessions"

    def _facts(self, conn: sqlite3.Connection, sid: str) -> _SessionFacts:
        exists = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is not None
        active = tuple(active_run_ids(conn, sid)) if exists and has_table(conn, None, "session_runs") else ()
        return _SessionFacts(sid, exists, active, read_lease(conn, sid) if exists else None,
                             self._extra(conn, sid) if exists else None)

    def _refusal(self, f: _SessionFacts) -> str:
        sid = one_line(f.session_id)
        if not f.exists:
            return f"session {sid} does not exist."
        if f.active:
            return f"session {sid} has an active run ({one_line(f.active[0])}); it is left as it is."
        return kit.refuse_foreign(f.session_id, f.lease) or self._own_refusal(f)

    def _read_all(self, conn: sqlite3.Connection) -> list[_SessionFacts]:
        return [self._facts(conn, sid) for sid in self.session_ids]

    def preview(self) -> RepairPreview:
        if not self.session_ids:
            raise SessionNotFound("no session was given.")
        with self.sd.db.read() as conn:
            all_facts = self._read_all(conn)
        refusals = [r for r in (self._refusal(f) for f in all_facts) if r]
        changes: list[PlannedChange] = []
        if not refusals:
            for f in all_facts:
                lease = kit.lease_changes(f.session_id, f.lease, "mutation")
                changes += [lease[0], *self._changes(f), lease[1]]
        content = fingerprint([f.content() for f in all_facts])
        preview = RepairPreview(
            repair_id=self.id, title=self.title, session_id=self.session_ids[0], target=self.target,
            changes=tuple(changes), notes=tuple(self._notes(all_facts)), refusal=" ".join(refusals),
            fingerprint=fingerprint(content, [kit.lease_fact(f.lease) for f in all_facts]), content_fingerprint=content)
        self._last = preview
        return preview

    def _notes(self, facts: list[_SessionFacts]) -> list[str]:
        return []

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        expected = self.expected_preview(expected)
        step(f"{self.id}.check")
        now = self.preview()
        kit.refuse_if_moved(now.refusal, expected, now.fingerprint, f"the facts of {self.target}")
        step(f"{self.id}.acquire")
        try:
            group: LeaseGroup = acquire_mutations(self.sd, self.session_ids, owner=self.owner, ttl=self.ttl)
        except StoreError as exc:  # busy, gone, or an active run appeared
            raise kit.map_acquire_error(exc, self.target) from exc
        done: list[PlannedChange] = []
        try:
            step(f"{self.id}.begin")
            with self.sd.db.write() as conn:
                for g in group.guards:
                    check_fence(conn, g.lease, purpose="mutation")
                all_facts = self._read_all(conn)
                if fingerprint([f.content() for f in all_facts]) != now.content_fingerprint:
                    raise RepairRefused(f"Refused: {self.target} changed since the preview; preview it again.")
                for f in all_facts:
                    done += self._write(conn, f)
                    step(f"{self.id}.write")
                step(f"{self.id}.commit")
            epoch = group.guards[0].lease.epoch if group.guards else 0
        finally:
            step(f"{self.id}.release")
            group.release()
        return RepairResult(self.id, self.session_ids[0], self.target, tuple(done), self._message(done), epoch)


def _now() -> str:
    return format_rfc3339()


# ---------------------------------------------------------------------------------------------------------------
# Delete


class DeleteSessions(_SessionRepair):
    """Delete sessions and every row of their child tables (reference 6); ``request_stats`` is kept."""

    id = "delete-session"
    title = "Delete sessions"

    def _extra(self, conn: sqlite3.Connection, sid: str) -> object:
        counts = []
        for table, where, n in delete_statements(conn):
            if table == "session_runtime_leases":  # the delete's own mutation lease changes it: not a fact
                continue
            c = int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", _args(sid, n)).fetchone()[0])
            counts.append((table, c))
        stats = 0
        if has_table(conn, None, "request_stats"):
            stats = int(conn.execute("SELECT COUNT(*) FROM request_stats WHERE session_id = ?", (sid,)).fetchone()[0])
        return {"counts": counts, "request_stats": stats, "tables": [t for t, _w, _n in delete_statements(conn)]}

    def _changes(self, facts: _SessionFacts) -> list[PlannedChange]:
        extra = facts.extra
        assert isinstance(extra, dict)
        sid = one_line(facts.session_id)
        counts = dict(extra["counts"])
        out = []
        for table in extra["tables"]:
            if table == "session_runtime_leases":
                out.append(PlannedChange("row", table, sid, "delete", "1 row (the lease row, the delete's own by then)"))
            elif counts.get(table):
                out.append(PlannedChange("row", table, sid, "delete", plural(counts[table], "row")))
        return out

    def _notes(self, facts: list[_SessionFacts]) -> list[str]:
        stats = sum(int(f.extra["request_stats"]) for f in facts if isinstance(f.extra, dict))
        notes = [f"request_stats rows are kept ({stats} of these sessions)."]
        rows = sum(n for f in facts if isinstance(f.extra, dict) for _t, n in f.extra["counts"])
        notes.append(f"{plural(rows, 'row')} in all are deleted, table by table in the reference's order.")
        return notes

    def _write(self, conn: sqlite3.Connection, facts: _SessionFacts) -> list[PlannedChange]:
        done = []
        sid = facts.session_id
        for table, where, n in delete_statements(conn):
            cur = conn.execute(f"DELETE FROM {table} WHERE {where}", _args(sid, n))
            if cur.rowcount:
                done.append(PlannedChange("row", table, one_line(sid), "delete", plural(cur.rowcount, "row")))
        return done

    def _message(self, done: list[PlannedChange]) -> str:
        rows = sum(int(c.summary.split()[0].replace(",", "")) for c in done)  # "4,799 rows"
        return f"Deleted {self.target} ({plural(rows, 'row')}; request_stats kept)."


# ---------------------------------------------------------------------------------------------------------------
# Pin, project


def _metadata(conn: sqlite3.Connection, sid: str) -> tuple[str | None, int] | None:
    if not has_table(conn, None, "session_metadata"):
        return None
    row = conn.execute("SELECT project_id, pinned FROM session_metadata WHERE session_id = ?", (sid,)).fetchone()
    return None if row is None else (None if row[0] is None else str(row[0]), int(row[1] or 0))


class SetPinned(_SessionRepair):
    id = "pin"
    title = "Pin sessions"

    def __init__(self, sd: SessionDir, session_ids: tuple[str, ...] | list[str] | str, pinned: bool = True,
                 **kw: object) -> None:
        super().__init__(sd, session_ids, **kw)  # type: ignore[arg-type]
        self.pinned = pinned
        if not pinned:
            self.id, self.title = "unpin", "Unpin sessions"

    def _extra(self, conn: sqlite3.Connection, sid: str) -> object:
        return _metadata(conn, sid)

    def _own_refusal(self, facts: _SessionFacts) -> str:
        meta = facts.extra
        current = bool(meta[1]) if isinstance(meta, tuple) else False
        if current == self.pinned:
            return f"session {one_line(facts.session_id)} is already {'pinned' if self.pinned else 'not pinned'}."
        return ""

    def _changes(self, facts: _SessionFacts) -> list[PlannedChange]:
        action = "update" if facts.extra is not None else "insert"
        return [PlannedChange("row", "session_metadata", one_line(facts.session_id), action,
                              f"pinned {1 if self.pinned else 0}")]

    def _write(self, conn: sqlite3.Connection, facts: _SessionFacts) -> list[PlannedChange]:
        conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?, NULL, ?, ?) "
                     "ON CONFLICT(session_id) DO UPDATE SET pinned = excluded.pinned, updated_at = excluded.updated_at",
                     (facts.session_id, 1 if self.pinned else 0, _now()))
        return self._changes(facts)

    def _message(self, done: list[PlannedChange]) -> str:
        return f"{'Pinned' if self.pinned else 'Unpinned'} {self.target}."


class SetProject(_SessionRepair):
    id = "project-set"
    title = "Assign a project"

    def __init__(self, sd: SessionDir, session_ids: tuple[str, ...] | list[str] | str, name: str,
                 **kw: object) -> None:
        super().__init__(sd, session_ids, **kw)  # type: ignore[arg-type]
        self.name = name

    def _project(self, conn: sqlite3.Connection) -> str | None:
        if not self.name or not has_table(conn, None, "projects"):
            return None
        row = conn.execute("SELECT id FROM projects WHERE name = ? ORDER BY created_at, id LIMIT 1",
                           (self.name,)).fetchone()
        return None if row is None else str(row[0])

    def _extra(self, conn: sqlite3.Connection, sid: str) -> object:
        return (_metadata(conn, sid), self._project(conn))

    @staticmethod
    def _parts(facts: _SessionFacts) -> tuple[tuple[str | None, int] | None, str | None]:
        extra = facts.extra
        assert isinstance(extra, tuple)
        return extra[0], extra[1]

    def _own_refusal(self, facts: _SessionFacts) -> str:
        meta, project = self._parts(facts)
        if self.name and project is not None and meta is not None and meta[0] == project:
            return f"session {one_line(facts.session_id)} is already in project '{one_line(self.name)}'."
        if not self.name and (meta is None or meta[0] is None):
            return f"session {one_line(facts.session_id)} is in no project."
        return ""

    def _changes(self, facts: _SessionFacts) -> list[PlannedChange]:
        meta, project = self._parts(facts)
        out = []
        if self.name and project is None:
            out.append(PlannedChange("row", "projects", "(new id)", "insert", f"project '{one_line(self.name)}'"))
        what = f"project '{one_line(self.name)}'" if self.name else "no project (project_id NULL)"
        out.append(PlannedChange("row", "session_metadata", one_line(facts.session_id),
                                 "update" if meta is not None else "insert", what))
        return out

    def _write(self, conn: sqlite3.Connection, facts: _SessionFacts) -> list[PlannedChange]:
        now = _now()
        project = self._project(conn)
        if self.name and project is None:
            project = new_id()
            conn.execute("INSERT INTO projects (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
                         (project, self.name, now, now))
        conn.execute("INSERT INTO session_metadata (session_id, project_id, pinned, updated_at) VALUES (?, ?, 0, ?) "
                     "ON CONFLICT(session_id) DO UPDATE SET project_id = excluded.project_id, "
                     "updated_at = excluded.updated_at", (facts.session_id, project, now))
        return self._changes(facts)

    def _message(self, done: list[PlannedChange]) -> str:
        if not self.name:
            return f"Removed {self.target} from its project."
        return f"Assigned {self.target} to project '{one_line(self.name)}'."


# ---------------------------------------------------------------------------------------------------------------
# Rename


class RenameSession(_SessionRepair):
    id = "rename"
    title = "Rename a session"

    def __init__(self, sd: SessionDir, session_id: str, new_title: str, **kw: object) -> None:
        super().__init__(sd, session_id, **kw)  # type: ignore[arg-type]
        self.new_title = new_title

    def _extra(self, conn: sqlite3.Connection, sid: str) -> object:
        from store.mothx.session_titles import latest_title

        return [leaf_id(conn, sid), latest_title(conn, sid)]

    def _own_refusal(self, facts: _SessionFacts) -> str:
        if not self.new_title.strip():
            return "a title needs at least one visible character."
        try:
            self.new_title.encode("utf-8")
        except UnicodeEncodeError:
            return "the title is not valid UTF-8 (it holds a lone surrogate)."
        if isinstance(facts.extra, list) and facts.extra[1] == self.new_title:
            return f"session {one_line(facts.session_id)} already has this title."
        return ""

    def _changes(self, facts: _SessionFacts) -> list[PlannedChange]:
        leaf = facts.extra[0] if isinstance(facts.extra, list) else None
        return [PlannedChange("entry", "entries", "(new id)", "append",
                              f"session_info name '{one_line(self.new_title)}' source manual, parentId {one_line(leaf)}")]

    def _write(self, conn: sqlite3.Connection, facts: _SessionFacts) -> list[PlannedChange]:
        leaf = facts.extra[0] if isinstance(facts.extra, list) else None
        e = append_entry(conn, facts.session_id, "session_info", {"name": self.new_title, "source": "manual"},
                         expected_parent=leaf)
        return [PlannedChange("entry", "entries", e.id, "append", f"session_info at seq {e.seq}")]

    def _message(self, done: list[PlannedChange]) -> str:
        return f"Renamed {self.target} to '{one_line(self.new_title)}'."


__all__ = ["CHILD_TABLES", "delete_statements", "DeleteSessions", "SetPinned", "SetProject", "RenameSession"]
