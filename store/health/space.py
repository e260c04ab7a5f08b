"""Where the space goes: the database, its WAL, the event stores, the knowledge bases, backups; the largest
sessions and entry types by bytes (with the bytes of entries that carry inline base64 data)."""

from __future__ import annotations

import os
from pathlib import Path

from store.eventstore.segments import EVENTS_DIR
from store.health.model import OK, HealthCheck, human_bytes
from store.health.reset import COMPANIONS, tree_bytes
from store.mothx.sessiondir import SessionDir
from store.paths import KNOWLEDGE_DIR, SESSIONS_DB
from store.safetext import one_line

TOP = 5


def space_checks(sd: SessionDir) -> list[HealthCheck]:
    root = sd.root
    parts: dict[str, int] = {}
    parts["database"] = tree_bytes(sd.db_path)
    parts["WAL"] = tree_bytes(Path(str(sd.db_path) + "-wal"))
    parts["event stores"] = tree_bytes(root / EVENTS_DIR)
    parts["knowledge bases"] = tree_bytes(root / KNOWLEDGE_DIR)
    known = {sd.db_path.name, *(sd.db_path.name + s for s in COMPANIONS), EVENTS_DIR, KNOWLEDGE_DIR, SESSIONS_DB}
    backups = other = 0
    for entry in os.scandir(root):
        if entry.name in known:
            continue
        size = tree_bytes(Path(entry.path))
        if entry.name.endswith(".bak"):
            backups += size
        else:
            other += size
    parts["backups"] = backups
    parts["other"] = other
    total = sum(parts.values())
    rows = [HealthCheck("space.total", "Space", OK, f"{human_bytes(total)}: " + ", ".join(
        f"{k} {human_bytes(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])))]
    if not sd.schema.has("entries", "data"):
        return rows
    with sd.db.read() as conn:
        sessions = conn.execute(
            "SELECT session_id, count(*), sum(length(CAST(data AS BLOB))) AS b FROM entries GROUP BY session_id "
            f"ORDER BY b DESC LIMIT {TOP}").fetchall()
        types = conn.execute(
            "SELECT type, count(*), sum(length(CAST(data AS BLOB))) AS b, "
            "sum(CASE WHEN instr(data, ';base64,') > 0 OR instr(data, '\"base64\"') > 0 "
            "THEN length(CAST(data AS BLOB)) ELSE 0 END) FROM entries GROUP BY type "
            f"ORDER BY b DESC LIMIT {TOP}").fetchall()
    if sessions:
        rows.append(HealthCheck("space.sessions", "Largest sessions", OK, "; ".join(
            f"{one_line(str(sid))}: {human_bytes(int(b or 0))} in {int(n or 0):,} entries" for sid, n, b in sessions)))
    if types:
        rows.append(HealthCheck("space.entry_types", "Largest entry types", OK, "; ".join(
            f"{one_line(str(t))}: {human_bytes(int(b or 0))} in {int(n or 0):,}"
            + (f" ({human_bytes(int(img))} with inline base64)" if img else "") for t, n, b, img in types)))
    return rows
