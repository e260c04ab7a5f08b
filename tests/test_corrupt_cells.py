"""Random cells of a real-layout session directory corrupted, then every command and every screen run on it.

The store's own property tests check the listings and previews cell by cell (tests/store/test_foreign_rows.py,
tests/store/test_foreign_session_rows.py). This one checks what a user meets: ``list``, ``show`` (Markdown,
JSON, raw), ``runs``, every ``repair … --dry-run`` and the Sessions, Transcript and Runs screens with a repair
preview open, on a directory where a few cells hold a wrong type, a blob, NULL, invalid UTF-8, a 5,000-digit
number or hostile text. Nothing may print a traceback or leave a raw control character on screen or in the
output; the exit status is one of the documented ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.mothx.db import OpenMode
from store.mothx.leases import clock_override
from tests.hostile import RAW_FORBIDDEN
from tests.store.foreign_rows import BAD_UTF8, HOSTILE, T0, TABLES, build_template, corrupt, place, relax_not_null
from tests.tui.rendered import assert_clean
from tui.cli import core as cli

HUGE = "1" * 5000
SESSION_CELLS = [("sessions", c) for c in ("cwd", "timestamp", "channel_type", "channel_id", "parent_session",
                                           "fork_kind", "seed_length", "fork_boundary_seq")]
ENTRY_CELLS = [("entries", c) for c in ("id", "type", "parent_id", "timestamp", "data", "seq")]
CELLS = st.sampled_from([*SESSION_CELLS, *ENTRY_CELLS, *[(t, c) for t, cols in TABLES.items() for c in cols]])
VALUES = st.one_of(
    st.sampled_from([None, "", "x", b"\x00\xff", 0, -1, 2**63 - 1, 1.5, BAD_UTF8, *HOSTILE,
                     "{not json", f'{{"type":"message","message":{{"role":"user","content":"n {HUGE}"}},"n":{HUGE}}}',
                     '{"type":"session_info","name":"\\u001b]0;t\\u0007[/]"}']),
    st.text(max_size=8), st.binary(max_size=4),
)
CHANGES = st.lists(st.tuples(CELLS, st.integers(0, 60), VALUES), min_size=1, max_size=5)
EXIT_CODES = {0, 1, 2, 3}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = build_template(tmp_path_factory.mktemp("corrupt-template"))
    relax_not_null(db)
    conn = sqlite3.connect(db)
    try:  # the session tables too: a foreign layout may declare none of their NOT NULLs
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table' AND "
                     "name IN ('sessions', 'entries')")
        conn.commit()
        conn.execute("PRAGMA writable_schema = OFF")
    finally:
        conn.close()
    return db


def _ids(db: Path, sql: str) -> list[str]:
    conn = sqlite3.connect(db)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return [str(r[0]) for r in conn.execute(sql) if isinstance(r[0], str) and r[0].isprintable() and r[0]]
    finally:
        conn.close()


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _check_cli(folder: Path, db: Path) -> None:
    sessions = _ids(db, "SELECT id FROM sessions")[:2]
    runs = _ids(db, "SELECT id FROM session_runs")[:2]
    commands = [["list", "--all"], ["list", "--json", "--all"], ["list", "--search", "a"], ["runs"], ["runs", "--json"]]
    for sid in sessions:
        commands += [["show", sid], ["show", sid, "--format", "json"], ["show", sid, "--raw"],
                     ["repair", "release-lease", sid, "--dry-run"]]
    commands += [["repair", "recover-run", rid, "--dry-run"] for rid in runs]
    for argv in commands:
        code, out, err = _cli("--dir", str(folder), *argv)
        where = " ".join(argv)
        assert code in EXIT_CODES, (where, code, err)
        if argv[0] in ("list", "runs") or argv[-1] in ("json", "--raw") or argv[0] == "show":
            assert code == 0, (where, code, err)  # a damaged cell never costs the listing or the transcript
        assert "Traceback" not in err and "Unexpected" not in err, (where, err)
        for text in (out, err):
            found = RAW_FORBIDDEN.search(text)
            assert found is None, (where, found.group(0), text[max(0, found.start() - 40):found.start() + 40])


async def _check_screens(folder: Path) -> None:
    from tests.tui.appwait import settle
    from tui.app import SessionscopeApp

    app = SessionscopeApp(folder, OpenMode.READ_ONLY, clock=lambda: T0 + 100)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        for keys in (["j"], ["enter"], ["tab"], ["G"], ["escape"], ["R"], ["j"], ["X"], ["escape"], ["escape"]):
            await pilot.press(*keys)
            await pilot.pause(0.05)
            assert_clean(app, f"after {keys}")
        assert app.is_running


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(changes=CHANGES)
def test_every_command_and_screen_survives_corrupted_cells(template: Path, changes: list[tuple[tuple[str, str], int,
                                                                                                object]]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="corrupt-cells-"))
    try:
        db = place(template, folder / "sessions")
        corrupt(db, [(t, c, k, v) for (t, c), k, v in changes])
        with clock_override(T0 + 100):
            _check_cli(db.parent, db)
            asyncio.run(_check_screens(db.parent))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
