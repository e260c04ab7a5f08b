"""Demo part: a fork family made by the store's own fork copy (:func:`store.mothx.fork.copy_fork`).

The source is the demo session "Upgrade to shapely 2" (three closed turns). Its children: a message
fork at the final answer of its second turn and a session fork at its last turn; the first child is forked again
at its first turn (a fork of a fork). Ids come from a seeded ``random.Random`` and every time written is the
timestamp of the boundary entry, so the demo stays deterministic and the children sort next to their parent.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from store.mothx.fork_boundaries import read_source_facts
from store.mothx.fork_copy import ForkOptions, copy_fork
from store.paths import SESSIONS_DB

SOURCE_TITLE = "Upgrade to shapely 2"
SEED = 1411


def _final_answer(conn: sqlite3.Connection, session_id: str, turn_index: int) -> int:
    """The seq of the last message of the session's ``turn_index``-th closed turn (1-based)."""
    facts = read_source_facts(conn, session_id)
    window = facts.windows[turn_index - 1]
    row = conn.execute("SELECT MAX(seq) FROM entries WHERE session_id = ? AND type = 'message' AND seq BETWEEN ? AND ?",
                       (session_id, window.start_seq, window.end_seq)).fetchone()
    return int(row[0])


def _time_at(conn: sqlite3.Connection, seq: int) -> str:
    row = conn.execute("SELECT timestamp FROM entries WHERE seq = ?", (seq,)).fetchone()
    return str(row[0])


def add_to_demo(root: Path) -> None:
    rng = random.Random(SEED)

    def make_id() -> str:
        return f"{rng.getrandbits(64):016x}"

    conn = sqlite3.connect(root / SESSIONS_DB, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT session_id FROM entries WHERE type = 'session_info' "
                           "AND json_extract(data, '$.name') = ? ORDER BY seq LIMIT 1", (SOURCE_TITLE,)).fetchone()
        if row is None:
            conn.execute("ROLLBACK")
            return
        source = str(row[0])
        at = _final_answer(conn, source, 2)
        first = copy_fork(conn, ForkOptions(source, "demo-fork-second-turn", at_seq=at), make_id(), make_id=make_id,
                          now=_time_at(conn, at))
        last = read_source_facts(conn, source).windows[-1].end_seq
        copy_fork(conn, ForkOptions(source, "demo-fork-last-turn"), make_id(), make_id=make_id, now=_time_at(conn, last))
        at2 = _final_answer(conn, first.session_id, 1)
        copy_fork(conn, ForkOptions(first.session_id, "demo-fork-of-fork", at_seq=at2), make_id(), make_id=make_id,
                  now=_time_at(conn, at2))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
