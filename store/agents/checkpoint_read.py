"""Reading the checkpoint file: verified loads of one checkpoint (heads, canonical shapes, the records), and the
checkpoint list (keyset pages, the listing, prefix search, one checkpoint's row, the reset preview).

Opening the file and decoding its rows is :mod:`store.agents.checkpoint_db` (its names are importable from
here too). Nothing here writes checkpoint data (opening a file in a write mode may create its tables). Every value read
from a row is checked for its type: a row written by someone else (text in an integer column, a NULL) makes
its checkpoint :class:`SessionStateOutOfSync` or is listed with a ``head_problem``, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar, Unpack

from store.agents.checkpoint_db import (
    STATE_COLUMNS,
    CheckpointStore,
    StoreConn,
    canonical_shapes_of,
    decode_head,
    decode_shapes,
    decode_state,
    has_tables,
    open_state_db,
    read_canonical,
    read_head_row,
    require_state_writable,
    schema_sql,
    session_row,
    state_db,
    state_db_path,
    version_row,
)
from store.agents.checkpoint_engine import DIALECT_POSTGRESQL, dialect_of, has_table
from store.agents.checkpoint_model import (
    KIND_CHECKPOINT,
    KIND_RESET,
    LOAD_PAGE_BYTES,
    LOAD_PAGE_ROWS,
    CheckpointDamaged,
    CheckpointInfo,
    FileShape,
    LoadedCheckpoint,
    PersistedSessionState,
    PublicationHead,
    RecordConsumer,
    RecordReader,
    ResetPreview,
    SessionStateDivergent,
    SessionStateOutOfSync,
    SessionStateRecord,
    stored_int,
    stored_text,
)
from store.agents.checkpoint_records import StreamValidator
from store.errors import StoreError
from store.mothx.sessiondir import SessionDir
from store.safetext import one_line
from store.words import plural


class PagedReader:
    """Load's record reader: keyset pages bounded by the head version's shapes, validated as they stream."""

    def __init__(self, conn: StoreConn, session_id: str, state: PersistedSessionState) -> None:
        self.conn = conn
        self.session_id = session_id
        self.state = state
        self.validator = StreamValidator(state, {}, SessionStateOutOfSync)
        self.file_index = 0
        self.last_line = 0
        self.page: list[tuple[int, str]] = []
        self.pos = 0
        self.done = False

    def _fetch(self) -> None:
        while self.file_index < len(self.state.files):
            f = self.state.files[self.file_index]
            if self.last_line >= f.records:
                self.file_index += 1
                self.last_line = 0
                continue
            cur = self.conn.execute(
                "SELECT line_number, content FROM agent_state_lines WHERE session_id = ? AND file_path = ? "
                "AND line_number > ? AND line_number <= ? ORDER BY line_number LIMIT ?",
                (self.session_id, f.path, self.last_line, f.records, LOAD_PAGE_ROWS),
            )
            page: list[tuple[int, str]] = []
            size = 0
            for line_number, content in cur:
                number = stored_int(line_number, f"a line number of {one_line(f.path)}")
                if not isinstance(content, str):
                    raise CheckpointDamaged(
                        f"Agent session checkpoint is out of sync with canonical history: {one_line(f.path)} line "
                        f"{number} is not stored as text."
                    )
                page.append((number, content))
                size += len(content)
                if size >= LOAD_PAGE_BYTES:
                    break
            cur.close()
            if not page:
                raise SessionStateOutOfSync(
                    f"Agent session checkpoint is out of sync with canonical history: {one_line(f.path)} has "
                    f"{self.last_line} stored records, its shape says {f.records}."
                )
            self.page = page
            self.pos = 0
            return

    def __call__(self) -> SessionStateRecord | None:
        if self.done:
            return None
        if self.pos >= len(self.page):
            self.page = []
            self._fetch()
            if not self.page:
                self.validator.finish()
                self.done = True
                return None
        line_number, content = self.page[self.pos]
        self.pos += 1
        path = self.state.files[self.file_index].path
        if line_number != self.last_line + 1:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: {one_line(path)} skips from line "
                f"{self.last_line} to {line_number}."
            )
        self.last_line = line_number
        rec = SessionStateRecord(path, line_number, content)
        try:
            self.validator.accept(rec)
        except SessionStateDivergent as exc:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: {exc}"
            ) from exc
        return rec


def load_from(db: CheckpointStore, agent_id: str, agent_session_id: str, consume: RecordConsumer) -> bool:
    """Stream the published checkpoint of an agent session from an open checkpoint file to
    ``consume(state, read)`` in one read transaction (see :func:`load`); False when nothing is published."""
    with db.read() as conn:
        sess = session_row(conn, agent_id, agent_session_id)
        if sess is None:
            return False
        head_row = read_head_row(conn, sess["session_id"])
        if head_row is None:
            return False
        head = decode_head(*head_row)
        if head.kind == KIND_RESET:
            return False
        row = version_row(conn, sess["session_id"], head.run_id)
        if row is None:
            raise SessionStateOutOfSync(
                f"Agent session checkpoint is out of sync with canonical history: the latest successful run "
                f"{head.run_id} has no staged snapshot."
            )
        state = decode_state(row)
        if state.through_run_id != head.run_id:
            raise SessionStateOutOfSync("Agent session checkpoint is out of sync: the version names another run.")
        reader = PagedReader(conn, sess["session_id"], state)
        consume(state, reader)
        if not reader.done:
            raise StoreError("The checkpoint consumer returned before reading through the end of the records.")
    return True


def head(sd: SessionDir, agent_id: str, agent_session_id: str) -> PublicationHead | None:
    """The publication head, or None when the session has none (absence is not a sentinel)."""
    with state_db(sd) as db:
        if db is None:
            return None
        with db.read() as conn:
            sess = session_row(conn, agent_id, agent_session_id)
            if sess is None:
                return None
            row = read_head_row(conn, sess["session_id"])
    return decode_head(*row) if row else None


def canonical_shape(sd: SessionDir, agent_id: str, agent_session_id: str) -> dict[str, FileShape] | None:
    """The head version's shapes by path (advisory, before a capture); None for no head or a reset."""
    with state_db(sd) as db:
        if db is None:
            return None
        canon = read_canonical(db, agent_id, agent_session_id)
    return dict(canon.shapes) if canon else None


def load(sd: SessionDir, agent_id: str, agent_session_id: str, consume: RecordConsumer) -> bool:
    """Stream the published checkpoint to ``consume(state, read)``; ``read()`` returns None at the end.

    False when there is nothing to load (no checkpoint file, no head, or a reset head). Raises
    :class:`SessionStateOutOfSync` when the head names a run with no staged version, or when a stored header,
    count or digest does not verify. ``consume`` must read through the end before it returns.
    """
    with state_db(sd) as db:
        if db is None:
            return False
        return load_from(db, agent_id, agent_session_id, consume)


def load_checkpoint(sd: SessionDir, agent_id: str, agent_session_id: str) -> LoadedCheckpoint | None:
    """The published checkpoint with every record, verified (convenience over :func:`load`)."""
    got: list[LoadedCheckpoint] = []

    def consume(state: PersistedSessionState, read: RecordReader) -> None:
        records: list[SessionStateRecord] = []
        while (rec := read()) is not None:
            records.append(rec)
        got.append(LoadedCheckpoint(state, tuple(records)))

    return got[0] if load(sd, agent_id, agent_session_id, consume) else None


CHECKPOINT_PAGE_ROWS = 100
"""Rows of a checkpoint page when the caller names no limit."""

CheckpointKey = tuple[object, object]
"""A checkpoint row's place in the list: ``(agent_id, agent_session_id)`` as stored (the keyset of a page)."""


R = TypeVar("R")


@dataclass(frozen=True)
class KeyedPage(Generic[R]):
    """One keyset page of a list: the rows in list order, each row's key as stored (``keys[i]`` belongs to
    ``rows[i]``; what the next page is read after or before), and whether more rows lie past the page in the
    direction it was read (after the last row for ``after``/a first page, before the first row for
    ``before``/``last``)."""

    rows: tuple[R, ...]
    keys: tuple[tuple[object, object], ...]
    more: bool

    @property
    def first_key(self) -> tuple[object, object] | None:
        return self.keys[0] if self.keys else None

    @property
    def last_key(self) -> tuple[object, object] | None:
        return self.keys[-1] if self.keys else None


class CheckpointPage(KeyedPage["CheckpointListing"]):
    """One page of :func:`checkpoint_page`, in list order (agent id, then agent session id)."""


class PageOptions(TypedDict, total=False):
    """Which page of the checkpoint list to read (every one optional): ``after`` a key, ``before`` one, or
    ``last`` (the end of the list; none of these: the first page), ``limit`` rows at most (default
    :data:`CHECKPOINT_PAGE_ROWS`), and ``host``: only the sessions that host captured last."""

    after: CheckpointKey | None
    before: CheckpointKey | None
    last: bool
    limit: int
    host: str | None


_INFO_PARTS = (
    ("s.session_id", "sid"), ("s.agent_id", "agent"), ("s.agent_session_id", "asid"), ("s.source_root", "root"),
    ("s.updated_at", "updated"), ("p.run_id", "head_run"), ("p.checkpoint_reset", "head_reset"),
    ("(SELECT count(*) FROM agent_state_versions c WHERE c.session_id = s.session_id)", "versions"),
    ("v.session_id IS NOT NULL", "staged"),
    *((f"v.{c.strip()}", f"v_{c.strip()}") for c in STATE_COLUMNS.split(",")),
    ("h.host", "host"),
)
INFO_NAMES = tuple(name for _, name in _INFO_PARTS)
"""The names of the columns :func:`info_of` reads, in order (for a query that selects them again)."""
INFO_WIDTH = len(INFO_NAMES)
_STATE_END = INFO_WIDTH - 1  # the version's columns are row[9:_STATE_END]; the host is the last column
HOSTS_TABLE = "agent_state_session_hosts"
"""The host that last captured each session (layout version 2; a read mode may read a version-1 store without it)."""
_FROM = (
    " FROM agent_state_sessions s "
    "LEFT JOIN agent_state_publications p ON p.session_id = s.session_id "
    "LEFT JOIN agent_state_versions v ON v.session_id = p.session_id AND v.through_run_id = p.run_id"
)


def info_columns(hosts: bool = True) -> str:
    """The columns :func:`info_of` reads (19 of them, the host last), over :func:`info_from`; ``hosts`` False
    (a version-1 store, which has no host table) reads every host as NULL."""
    return ", ".join(f"{'NULL' if name == 'host' and not hosts else expr} AS {name}" for expr, name in _INFO_PARTS)


def info_from(hosts: bool = True) -> str:
    """Each agent session (``s``) with its publication head (``p``), the version the head names (``v``) and
    the host that last captured it (``h``; not joined when ``hosts`` is False)."""
    return _FROM + (f" LEFT JOIN {HOSTS_TABLE} h ON h.session_id = s.session_id" if hosts else "")


INFO_COLUMNS = info_columns()
"""The columns :func:`info_of` reads over :data:`INFO_FROM` (a store of the current layout)."""
INFO_FROM = info_from()
"""Each agent session (``s``) with its head (``p``), the head's version (``v``) and its host (``h``)."""


def info_sql(hosts: bool = True) -> str:
    return "SELECT " + info_columns(hosts) + info_from(hosts)


def store_tables(conn: StoreConn) -> tuple[bool, bool]:
    """``(checkpoint tables, host table)``: which of the tables a listing reads exist, in ONE query (what a page
    reader asks instead of :func:`has_tables`, so that a version-1 store opened in a read mode still lists)."""
    if dialect_of(conn) == DIALECT_POSTGRESQL:
        row = conn.execute("SELECT to_regclass('agent_state_publications') IS NOT NULL, "
                           f"to_regclass('{HOSTS_TABLE}') IS NOT NULL").fetchone()
        return (bool(row[0]), bool(row[1])) if row else (False, False)
    names = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('agent_state_publications', ?)",
        (HOSTS_TABLE,))}
    return ("agent_state_publications" in names, HOSTS_TABLE in names)


@dataclass(frozen=True)
class CheckpointListing(CheckpointInfo):
    """:class:`CheckpointInfo` with the host that last captured the session (as stored, "" when none is
    recorded: a store of the first layout, or a session never captured from a source root). The host is data:
    shown through the safe-text boundary like every other stored text."""

    host: str = ""


@contextmanager
def listing_read(sd: SessionDir) -> Iterator[tuple[StoreConn, bool] | None]:
    """One read transaction on the checkpoint store of ``sd`` for a listing: ``(connection, hosts)`` (whether
    the store has its host table, :func:`store_tables`), or None when there is no store or no checkpoint
    tables yet (an empty list)."""
    with state_db(sd) as db:
        if db is None:
            yield None
            return
        with db.read() as conn:
            tables, hosts = store_tables(conn)
            yield (conn, hosts) if tables else None


def every_page(read: Callable[[tuple[object, object] | None], KeyedPage[R]]) -> list[R]:
    """Every row of a keyset list: ``read(after)`` from the first page (``after`` None) to the last."""
    out: list[R] = []
    after: tuple[object, object] | None = None
    while True:
        page = read(after)
        out.extend(page.rows)
        if not page.more or page.last_key is None:
            return out
        after = page.last_key


def info_of(row: tuple[Any, ...]) -> CheckpointListing:
    """A row of :data:`INFO_COLUMNS` (the session, its head, its version count, the head's version joined and
    the host) → its listing; a head or version that cannot be read becomes ``head_problem``, never an
    exception."""
    sid, agent, asid, root, updated, run_id, reset, versions, staged = row[:9]
    head_obj: PublicationHead | None = None
    state: PersistedSessionState | None = None
    problem = ""
    if run_id is not None:
        try:
            head_obj = decode_head(run_id, reset)
            if head_obj.kind == KIND_CHECKPOINT:
                if not staged:
                    problem = f"the latest successful run {one_line(run_id)} has no staged snapshot"
                else:
                    state = decode_state(tuple(row[9:_STATE_END]))
        except SessionStateOutOfSync as exc:
            problem = one_line(str(exc))
    host = row[_STATE_END] if len(row) > _STATE_END else None
    return CheckpointListing(
        session_id=stored_text(sid),
        agent_id=stored_text(agent),
        agent_session_id=stored_text(asid),
        source_root=stored_text(root),
        head=head_obj,
        state=state,
        head_problem=problem,
        versions=int(versions),
        updated_at=stored_text(updated),
        host=stored_text(host),
    )


def read_checkpoint_page(
    conn: StoreConn, agent_id: str | None = None, *, hosts: bool | None = None, **page: Unpack[PageOptions]
) -> CheckpointPage:
    """:func:`checkpoint_page` on an open read connection whose checkpoint tables exist: ONE query (``hosts``:
    whether the host table exists, as :func:`store_tables` told; None asks first)."""
    after, before, last, host = page.get("after"), page.get("before"), page.get("last", False), page.get("host")
    if sum((after is not None, before is not None, last)) > 1:
        raise ValueError("A checkpoint page is read after a key, before one or at the end, not two of these.")
    if hosts is None:
        hosts = has_table(conn, HOSTS_TABLE)
    limit = max(1, int(page.get("limit", CHECKPOINT_PAGE_ROWS)))
    where: list[str] = []
    params: list[object] = []
    if agent_id is not None:
        where.append("s.agent_id = ?")
        params.append(agent_id)
    if host is not None:
        if not hosts:  # a version-1 store records no host: nothing was captured from the named one
            return CheckpointPage((), (), False)
        where.append("h.host = ?")
        params.append(host)
    if after is not None:
        where.append("(s.agent_id, s.agent_session_id) > (?, ?)")
        params.extend(after)
    if before is not None:
        where.append("(s.agent_id, s.agent_session_id) < (?, ?)")
        params.extend(before)
    backwards = before is not None or last
    order = "DESC" if backwards else "ASC"
    sql = info_sql(hosts) + (" WHERE " + " AND ".join(where) if where else "")
    sql += f" ORDER BY s.agent_id {order}, s.agent_session_id {order} LIMIT ?"
    params.append(limit + 1)
    rows = conn.execute(sql, params).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    if backwards:
        rows.reverse()
    return CheckpointPage(
        rows=tuple(info_of(r) for r in rows), keys=tuple((r[1], r[2]) for r in rows), more=more
    )


def checkpoint_page(sd: SessionDir, agent_id: str | None = None, **page: Unpack[PageOptions]) -> CheckpointPage:
    """A page of the checkpoint list (every agent session with its head, head version and host, ordered by
    agent and agent session id) read by keyset in one query (:class:`PageOptions`: the first ``limit`` rows,
    the rows after the key ``after``, the rows just before the key ``before`` or the ``last`` rows of the list,
    still in list order; ``host``: only the sessions that host captured last). Empty without a checkpoint file
    or its tables."""
    with listing_read(sd) as read:
        if read is None:
            return CheckpointPage((), (), False)
        return read_checkpoint_page(read[0], agent_id, hosts=read[1], **page)


def list_checkpoints(sd: SessionDir, agent_id: str | None = None, *, host: str | None = None) -> list[CheckpointListing]:
    """Every agent session with its head, head version and host, ordered by agent and agent session id (every
    :func:`checkpoint_page`, read in one read transaction); ``host``: only the sessions it captured last."""
    with listing_read(sd) as read:
        if read is None:
            return []
        conn, hosts = read
        return every_page(lambda after: read_checkpoint_page(conn, agent_id, hosts=hosts, after=after, limit=1000,
                                                             host=host))


@dataclass(frozen=True)
class CheckpointMatches:
    """The checkpoints whose agent session id starts with a text: the first ``limit`` in list order (an exact
    match is always first) and how many there are in all."""

    rows: tuple[CheckpointListing, ...]
    total: int

    def exact(self, agent_session_id: str) -> CheckpointListing | None:
        """The row whose id is exactly ``agent_session_id``, or None."""
        return self.rows[0] if self.rows and self.rows[0].agent_session_id == agent_session_id else None


def _prefix_end(prefix: str) -> str | None:
    """The least text above every text that starts with ``prefix`` (code point order), or None for no bound."""
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            nxt = last + 1 if not 0xD800 <= last + 1 <= 0xDFFF else 0xE000
            return "".join(chars) + chr(nxt)
    return None


def find_checkpoints(sd: SessionDir, agent_id: str, prefix: str, *, limit: int = 8) -> CheckpointMatches:
    """The checkpoints of ``agent_id`` whose agent session id starts with ``prefix`` (an index range, one
    query): what a command resolving an id or a prefix of one needs."""
    with listing_read(sd) as read:
        if read is None:
            return CheckpointMatches((), 0)
        conn, hosts = read
        sql = (f"SELECT {info_columns(hosts)}, count(*) OVER () {info_from(hosts)} WHERE s.agent_id = ? "
               "AND s.agent_session_id >= ? AND substr(s.agent_session_id, 1, ?) = ?")
        params: list[object] = [agent_id, prefix, len(prefix), prefix]
        end = _prefix_end(prefix)
        if end is not None:
            sql += " AND s.agent_session_id < ?"
            params.append(end)
        sql += " ORDER BY s.agent_session_id LIMIT ?"
        params.append(max(1, int(limit)))
        rows = conn.execute(sql, params).fetchall()
    return CheckpointMatches(tuple(info_of(r) for r in rows), int(rows[0][-1]) if rows else 0)


def preview_reset(sd: SessionDir, agent_id: str, agent_session_id: str) -> ResetPreview:
    """Describe a reset without writing anything (``allowed`` is False in a read mode or for a reset head)."""
    info = checkpoint_info(sd, agent_id, agent_session_id)
    head_obj = info.head if info else None
    files = info.state.file_count if info and info.state else 0
    records = info.state.record_count if info and info.state else 0
    if sd.mode.is_read:
        return ResetPreview(agent_id, agent_session_id, head_obj, files, records, False,
                            f"The session directory is open {sd.mode.value}: nothing can be reset.")
    if head_obj is not None and head_obj.kind == KIND_RESET:
        return ResetPreview(agent_id, agent_session_id, head_obj, 0, 0, False, "The head is already a reset.")
    if files:
        text = (f"The head becomes a reset: the checkpoint of {plural(files, 'file')} and {plural(records, 'record')} stops being "
                "loadable, and the next capture stores the files on disk afresh.")
    else:
        text = "The head becomes a reset; the next capture stores the files on disk afresh."
    return ResetPreview(agent_id, agent_session_id, head_obj, files, records, True, text)


def checkpoint_info(sd: SessionDir, agent_id: str, agent_session_id: str) -> CheckpointListing | None:
    """The listing of one agent session (as :func:`list_checkpoints` lists it; one query), or None when it
    has no checkpoint."""
    with listing_read(sd) as read:
        if read is None:
            return None
        conn, hosts = read
        row = conn.execute(
            info_sql(hosts) + " WHERE s.agent_id = ? AND s.agent_session_id = ?", (agent_id, agent_session_id)
        ).fetchone()
    return info_of(row) if row is not None else None

# The file's own reads (opening, decoding) are store.agents.checkpoint_db's, named here as before.
__all__ = [
    "CHECKPOINT_PAGE_ROWS", "HOSTS_TABLE", "CheckpointKey", "CheckpointListing", "CheckpointMatches", "CheckpointPage",
    "KeyedPage", "PageOptions",
    "INFO_COLUMNS", "INFO_FROM", "INFO_NAMES", "INFO_WIDTH", "every_page", "info_columns", "listing_read", "info_from", "info_sql", "store_tables", "PagedReader", "canonical_shape", "canonical_shapes_of", "checkpoint_info", "checkpoint_page",
    "decode_head", "decode_shapes", "decode_state", "find_checkpoints", "has_tables", "head", "info_of",
    "list_checkpoints", "load", "load_checkpoint", "load_from", "open_state_db", "preview_reset", "read_canonical",
    "read_checkpoint_page", "read_head_row", "require_state_writable", "schema_sql", "session_row", "state_db",
    "state_db_path", "version_row",
]
