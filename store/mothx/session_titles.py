"""Session titles as the runtime shows them: the newest ``session_info`` name, else the first user message, and
the "<title> (n)" a fork gives its child."""

from __future__ import annotations

import sqlite3

from store.mothx.entry_model import Message, row_from_cells


def latest_title(conn: sqlite3.Connection, session_id: str) -> str:
    """The newest ``session_info`` name of a session ('' when none)."""
    for (data,) in conn.execute("SELECT data FROM entries WHERE session_id = ? AND type = 'session_info' "
                                "ORDER BY seq DESC LIMIT 8", (session_id,)):
        row = row_from_cells(0, "", "session_info", None, "", data)
        name = row.parsed.get("name") if row.parsed is not None else None
        if isinstance(name, str):
            return name
    return ""


def base_title(conn: sqlite3.Connection, session_id: str) -> str:
    title = latest_title(conn, session_id)
    if title:
        return title
    for (data,) in conn.execute("SELECT data FROM entries WHERE session_id = ? AND type = 'message' ORDER BY seq LIMIT 4",
                                (session_id,)):
        row = row_from_cells(0, "", "message", None, "", data)
        if row.parsed is not None:
            msg = Message.from_json(row.parsed.get("message"))
            text = " ".join(msg.text.split())
            if msg.role == "user" and text:
                return text[:60]
    return f"Session {session_id}"


def child_title(conn: sqlite3.Connection, source: str) -> str:
    """"<title> (n)" with the first n no child of ``source`` carries."""
    base = base_title(conn, source)
    taken = {latest_title(conn, str(c)) for (c,) in
             conn.execute("SELECT id FROM sessions WHERE parent_session = ?", (source,))}
    n = 1
    while f"{base} ({n})" in taken:
        n += 1
    return f"{base} ({n})"
