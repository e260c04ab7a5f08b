"""The typed layout of ``sessions.db`` (v43) and of a knowledge-base file (store v1), as SQLModel tables.

Every table of ``sessions-db-v43.sql`` (parts 1 and 2) is a class here, on its own metadata
:data:`V43_METADATA`; the knowledge-base tables of ``knowledge-base-v1.sql`` are on :data:`KB_V1_METADATA`.
Neither uses SQLModel's global metadata, so creating one layout never creates the other.

These classes are the *typed* layout: column types, nullability, server defaults, keys, UNIQUE
constraints, foreign keys and every index (partial ones included) match the reference DDL, and
``tests/store/test_tables.py`` checks that ``V43_METADATA.create_all()`` builds a database SQLite describes
exactly like one built from the reference text. Real databases are still created from the reference DDL
text (:func:`store.mothx.schema.create_v43`), so they are byte-for-byte what mothx creates.

Notes on fidelity:

* A ``TEXT PRIMARY KEY`` or ``INTEGER PRIMARY KEY`` column is *nullable* in SQLite's own description
  (``PRAGMA table_info`` says ``notnull = 0``); the columns are declared ``nullable=True`` so the emitted DDL
  says the same. The Python annotation is still ``str`` / ``int``: a row without an id is not a row we write.
* ``DATETIME`` columns (the response-runtime tables) hold text whose encoding the reference leaves
  unspecified; :class:`DateTimeText` declares ``DATETIME`` and passes values through as ``str``, so a value
  in any encoding reads back unchanged instead of failing a datetime parse.
* The ``AUTOINCREMENT`` tables are declared ``implicit_returning=False`` (see ``_AUTOINCREMENT``): the ORM
  reads each new key from ``lastrowid`` instead of a batched ``RETURNING``, which SQLAlchemy refuses for a
  nullable key column.
* A column with a server default gets the same value as its Python default, so a new object shows what the
  database would store. ``DEFAULT CURRENT_TIMESTAMP`` columns default to ``None`` in Python; the ORM then
  leaves them out of the INSERT and SQLite fills them.
* The FTS5 virtual table ``knowledge_chunk_fts`` cannot be a SQLModel/SQLAlchemy table; its statement is
  :data:`KB_V1_FTS_DDL`, and it is not part of :data:`KB_V1_METADATA`.

Importing this module costs the SQLModel import (~360 ms): hot paths use raw ``sqlite3`` instead.
"""

from typing import Any

import sqlalchemy as sa
from pydantic_core import PydanticUndefined
from sqlalchemy.orm import registry
from sqlalchemy.types import UserDefinedType
from sqlmodel import Field, SQLModel

from store.mothx.schema import RUN_ACTIVE_STATUSES

V43_REGISTRY = registry()
V43_METADATA: sa.MetaData = V43_REGISTRY.metadata
KB_V1_REGISTRY = registry()
KB_V1_METADATA: sa.MetaData = KB_V1_REGISTRY.metadata

KB_V1_FTS_TABLE = "knowledge_chunk_fts"
KB_V1_FTS_DDL = (
    "CREATE VIRTUAL TABLE knowledge_chunk_fts USING fts5(chunk_id UNINDEXED, snapshot_id UNINDEXED, text);"
)


class DateTimeText(UserDefinedType[str]):
    """A column declared ``DATETIME`` whose values are passed through as stored (text, not parsed)."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "DATETIME"


TEXT = sa.Text()
INTEGER = sa.Integer()
BLOB = sa.LargeBinary()
BOOLEAN = sa.Boolean()
REAL = sa.REAL()
DATETIME = DateTimeText()


def _python_default(server: str) -> Any:
    """The Python value of a SQL default literal (``'x'``, ``0``, ``FALSE``); ``None`` for expressions."""
    if len(server) >= 2 and server[0] == server[-1] == "'":
        return server[1:-1].replace("''", "'")
    upper = server.upper()
    if upper == "FALSE":
        return False
    if upper == "TRUE":
        return True
    try:
        return int(server)
    except ValueError:
        pass
    try:
        return float(server)
    except ValueError:
        return None


def _col(
    sa_type: Any,
    *,
    notnull: bool = False,
    server: str | None = None,
    default: Any = PydanticUndefined,
    pk: bool = False,
    unique: bool = False,
    fk: str | None = None,
    ondelete: str | None = None,
) -> Any:
    """One column, spelled the way the reference DDL spells it.

    ``notnull`` is ``NOT NULL``; ``server`` is the ``DEFAULT`` text exactly as in the DDL; ``pk`` marks a
    primary-key column (nullable, as SQLite reports it); ``fk``/``ondelete`` a ``REFERENCES`` clause.
    Without an explicit ``default``, a nullable column defaults to ``None`` and a column with a server
    default to that default's value; other columns are required.
    """
    kwargs: dict[str, Any] = {"sa_type": sa_type, "nullable": not notnull}
    if server is not None:
        kwargs["sa_column_kwargs"] = {"server_default": sa.text(server)}
        if default is PydanticUndefined:
            default = _python_default(server)
    if pk:
        kwargs["primary_key"] = True
        kwargs["nullable"] = True
    elif default is PydanticUndefined and not notnull:
        default = None
    if unique:
        kwargs["unique"] = True
    if fk is not None:
        kwargs["foreign_key"] = fk
        if ondelete is not None:
            kwargs["ondelete"] = ondelete
    return Field(default, **kwargs)


def _autoinc() -> Any:
    """``INTEGER PRIMARY KEY AUTOINCREMENT`` (the table also needs ``sqlite_autoincrement``)."""
    return Field(default=None, sa_type=INTEGER, primary_key=True, nullable=True)


# ``implicit_returning=False``: SQLAlchemy's batched INSERT ... RETURNING refuses a nullable autoincrement key,
# and the key must stay nullable for the DDL to match. Rows then get their key from ``lastrowid``, one by one.
_AUTOINCREMENT = {"sqlite_autoincrement": True, "implicit_returning": False}
_RUN_ACTIVE_WHERE = "status IN (" + ", ".join(f"'{s}'" for s in RUN_ACTIVE_STATUSES) + ")"


class V43Model(SQLModel, registry=V43_REGISTRY):
    """Base of the ``sessions.db`` v43 tables (own registry and metadata)."""


class KBV1Model(SQLModel, registry=KB_V1_REGISTRY):
    """Base of the knowledge-base store v1 tables (own registry and metadata)."""


# ---------------------------------------------------------------------------------------------------------
# sessions.db, part 1: the creation template
# ---------------------------------------------------------------------------------------------------------


class Sessions(V43Model, table=True):
    __tablename__ = "sessions"
    __table_args__ = (
        sa.Index("idx_sessions_cwd", "cwd"),
        sa.Index(
            "idx_sessions_wechat_binding",
            "channel_type",
            "channel_id",
            unique=True,
            sqlite_where=sa.text("channel_type = 'wechat' AND channel_id <> ''"),
        ),
        sa.Index(
            "idx_sessions_feishu_binding",
            "channel_type",
            "channel_id",
            unique=True,
            sqlite_where=sa.text("channel_type = 'feishu' AND channel_id <> ''"),
        ),
    )

    id: str = _col(TEXT, pk=True)
    cwd: str | None = _col(TEXT)
    timestamp: str | None = _col(TEXT)
    parent_session: str | None = _col(TEXT)
    version: int | None = _col(INTEGER)
    channel_type: str = _col(TEXT, notnull=True, server="'local'")
    channel_id: str = _col(TEXT, notnull=True, server="''")
    fork_boundary_seq: int = _col(INTEGER, notnull=True, server="0")
    seed_length: int = _col(INTEGER, notnull=True, server="0")
    fork_kind: str = _col(TEXT, notnull=True, server="''")
    expert_id: str = _col(TEXT, notnull=True, server="''")


class Entries(V43Model, table=True):
    __tablename__ = "entries"
    __table_args__ = (
        sa.Index("idx_entries_session_id", "session_id"),
        sa.Index("idx_entries_type", "type"),
        sa.Index("idx_entries_session_type", "session_id", "type"),
        _AUTOINCREMENT,
    )

    seq: int | None = _autoinc()
    session_id: str | None = _col(TEXT, fk="sessions.id", ondelete="CASCADE")
    id: str | None = _col(TEXT, unique=True)
    type: str = _col(TEXT, notnull=True)
    parent_id: str | None = _col(TEXT)
    timestamp: str = _col(TEXT, notnull=True)
    data: str = _col(TEXT, notnull=True)


class RequestStats(V43Model, table=True):
    __tablename__ = "request_stats"
    __table_args__ = (
        sa.Index("idx_request_stats_timestamp", "timestamp"),
        sa.Index("idx_request_stats_provider", "provider"),
        sa.Index("idx_request_stats_model", "model"),
        _AUTOINCREMENT,
    )

    id: int | None = _autoinc()
    timestamp: str = _col(TEXT, notnull=True)
    session_id: str | None = _col(TEXT)
    provider: str = _col(TEXT, notnull=True)
    model: str = _col(TEXT, notnull=True)
    input_tokens: int = _col(INTEGER, notnull=True, server="0")
    output_tokens: int = _col(INTEGER, notnull=True, server="0")
    total_tokens: int = _col(INTEGER, notnull=True, server="0")
    duration_ms: int = _col(INTEGER, notnull=True, server="0")
    protocol: str = _col(TEXT, notnull=True, server="''")


class SessionCapabilities(V43Model, table=True):
    __tablename__ = "session_capabilities"

    session_id: str = _col(TEXT, pk=True, fk="sessions.id", ondelete="CASCADE")
    mode: str = _col(TEXT, notnull=True, server="''")
    display_mode: str = _col(TEXT, notnull=True, server="'work'")
    delegate_mode: int = _col(INTEGER, notnull=True, server="0")
    multi_agent: int = _col(INTEGER, notnull=True, server="0")
    workflows: int = _col(INTEGER, notnull=True, server="0")
    web_search: int = _col(INTEGER, notnull=True, server="0")
    browser: int = _col(INTEGER, notnull=True, server="0")
    a2a_master: int = _col(INTEGER, notnull=True, server="0")
    updated_at: str = _col(TEXT, notnull=True)


class SessionRunEvents(V43Model, table=True):
    __tablename__ = "session_run_events"
    __table_args__ = (
        sa.Index("idx_session_run_events_session_id", "session_id"),
        sa.Index("idx_session_run_events_run_id", "run_id"),
        sa.Index("idx_session_run_events_type", "event_type"),
        _AUTOINCREMENT,
    )

    seq: int | None = _autoinc()
    id: str = _col(TEXT, notnull=True, unique=True)
    session_id: str | None = _col(TEXT, fk="sessions.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True)
    event_type: str = _col(TEXT, notnull=True)
    source: str = _col(TEXT, notnull=True, server="''")
    status: str = _col(TEXT, notnull=True, server="''")
    model: str = _col(TEXT, notnull=True, server="''")
    mode: str = _col(TEXT, notnull=True, server="''")
    timestamp: str = _col(TEXT, notnull=True)
    data: str = _col(TEXT, notnull=True, server="'{}'")


class SessionRuns(V43Model, table=True):
    __tablename__ = "session_runs"
    __table_args__ = (
        sa.Index("idx_session_runs_session_id", "session_id"),
        sa.Index("idx_session_runs_status", "status"),
        sa.Index("idx_session_runs_intent", "session_id", "intent_id", "attempt"),
        sa.Index(
            "idx_session_runs_active_session",
            "session_id",
            unique=True,
            sqlite_where=sa.text(_RUN_ACTIVE_WHERE),
        ),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    intent_id: str = _col(TEXT, notnull=True, server="''")
    retry_of: str = _col(TEXT, notnull=True, server="''")
    attempt: int = _col(INTEGER, notnull=True, server="1")
    work_dir: str = _col(TEXT, notnull=True, server="''")
    source: str = _col(TEXT, notnull=True, server="''")
    model: str = _col(TEXT, notnull=True, server="''")
    mode: str = _col(TEXT, notnull=True, server="''")
    status: str = _col(TEXT, notnull=True)
    started_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)
    finished_at: str | None = _col(TEXT)
    error: str = _col(TEXT, notnull=True, server="''")
    error_info_json: str = _col(TEXT, notnull=True, server="'{}'")
    progress_json: str = _col(TEXT, notnull=True, server="'{}'")
    usage_json: str = _col(TEXT, notnull=True, server="'{}'")
    context_usage_json: str = _col(TEXT, notnull=True, server="'{}'")


class SessionRunRecoveries(V43Model, table=True):
    __tablename__ = "session_run_recoveries"
    __table_args__ = (sa.Index("idx_session_run_recoveries_due", "state", "next_retry_at"),)

    run_id: str = _col(TEXT, pk=True, fk="session_runs.id", ondelete="CASCADE")
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    state: str = _col(TEXT, notnull=True)
    trigger_source: str = _col(TEXT, notnull=True, server="''")
    reason_code: str = _col(TEXT, notnull=True, server="''")
    attempt: int = _col(INTEGER, notnull=True, server="0")
    previous_lease_epoch: int = _col(INTEGER, notnull=True, server="0")
    last_error: str = _col(TEXT, notnull=True, server="''")
    next_retry_at: int | None = _col(INTEGER)
    started_at: int = _col(INTEGER, notnull=True)
    updated_at: int = _col(INTEGER, notnull=True)
    completed_at: int | None = _col(INTEGER)


class SessionExecutionIntents(V43Model, table=True):
    __tablename__ = "session_execution_intents"
    __table_args__ = (sa.Index("idx_session_execution_intents_session_id", "session_id", "created_at"),)

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    source: str = _col(TEXT, notnull=True, server="''")
    model: str = _col(TEXT, notnull=True, server="''")
    mode: str = _col(TEXT, notnull=True, server="''")
    work_dir: str = _col(TEXT, notnull=True, server="''")
    request_fingerprint: str = _col(TEXT, notnull=True, server="''")
    request_json: str = _col(TEXT, notnull=True, server="'{}'")
    policy_json: str = _col(TEXT, notnull=True, server="'{}'")
    created_at: str = _col(TEXT, notnull=True)


class RuntimeSubmissions(V43Model, table=True):
    __tablename__ = "runtime_submissions"
    __table_args__ = (
        sa.UniqueConstraint("session_id", "scope", "key_hash"),
        sa.Index("idx_runtime_submissions_run", "run_id"),
        sa.Index("idx_runtime_submissions_intent", "intent_id"),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    scope: str = _col(TEXT, notnull=True)
    key_hash: str = _col(TEXT, notnull=True)
    request_fingerprint: str = _col(TEXT, notnull=True, server="''")
    intent_id: str = _col(TEXT, notnull=True, fk="session_execution_intents.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, fk="session_runs.id", ondelete="CASCADE")
    created_at: str = _col(TEXT, notnull=True)


class DeliveryIntents(V43Model, table=True):
    __tablename__ = "delivery_intents"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "platform", "target_id"),
        sa.Index("idx_delivery_intents_session_status", "session_id", "status", "updated_at"),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, fk="session_runs.id", ondelete="CASCADE")
    platform: str = _col(TEXT, notnull=True)
    target_id: str = _col(TEXT, notnull=True, server="''")
    reply_message_id: str = _col(TEXT, notnull=True, server="''")
    transport_context: str = _col(TEXT, notnull=True, server="'{}'")
    status: str = _col(TEXT, notnull=True)
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)


class DeliveryOperations(V43Model, table=True):
    __tablename__ = "delivery_operations"
    __table_args__ = (
        sa.UniqueConstraint("intent_id", "operation_key"),
        sa.UniqueConstraint("intent_id", "sequence"),
        sa.Index("idx_delivery_operations_claim", "status", "next_attempt_at", "lease_expires_at", "sequence"),
    )

    id: str = _col(TEXT, pk=True)
    intent_id: str = _col(TEXT, notnull=True, fk="delivery_intents.id", ondelete="CASCADE")
    operation_key: str = _col(TEXT, notnull=True)
    artifact_id: str | None = _col(TEXT, fk="session_attachments.id", ondelete="RESTRICT")
    operation_kind: str = _col(TEXT, notnull=True)
    sequence: int = _col(INTEGER, notnull=True)
    depends_on: str | None = _col(TEXT, fk="delivery_operations.id", ondelete="RESTRICT")
    idempotency_key: str = _col(TEXT, notnull=True)
    payload_digest: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True)
    provider_asset_id: str = _col(TEXT, notnull=True, server="''")
    provider_message_id: str = _col(TEXT, notnull=True, server="''")
    provider_state: str = _col(TEXT, notnull=True, server="'{}'")
    attempt_count: int = _col(INTEGER, notnull=True, server="0")
    next_attempt_at: int | None = _col(INTEGER)
    failure_code: str = _col(TEXT, notnull=True, server="''")
    lease_owner: str = _col(TEXT, notnull=True, server="''")
    lease_epoch: int = _col(INTEGER, notnull=True, server="0")
    lease_expires_at: int | None = _col(INTEGER)
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)
    # v43 add_delivery_operations_retry_window_started_at (ALTER TABLE ... ADD COLUMN): the last column.
    retry_window_started_at: str | None = _col(TEXT)


class InputResources(V43Model, table=True):
    __tablename__ = "input_resources"
    __table_args__ = (
        sa.Index("idx_input_resources_session", "session_id", "created_at"),
        sa.Index(
            "idx_input_resources_item_key",
            "session_id",
            "item_key",
            unique=True,
            sqlite_where=sa.text("item_key <> ''"),
        ),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    origin: str = _col(TEXT, notnull=True, server="''")
    event_id: str = _col(TEXT, notnull=True, server="''")
    item_index: int = _col(INTEGER, notnull=True, server="0")
    item_key: str = _col(TEXT, notnull=True, server="''")
    kind: str = _col(TEXT, notnull=True)
    filename: str = _col(TEXT, notnull=True, server="''")
    media_type: str = _col(TEXT, notnull=True, server="''")
    byte_size: int = _col(INTEGER, notnull=True, server="0")
    sha256: str = _col(TEXT, notnull=True, server="''")
    relative_path: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True)
    created_at: str = _col(TEXT, notnull=True)
    metadata_json: str = Field(
        "{}",
        sa_column_kwargs={"name": "metadata", "server_default": sa.text("'{}'")},
        sa_type=TEXT,
        nullable=False,
    )


class InputResourceEvents(V43Model, table=True):
    __tablename__ = "input_resource_events"
    __table_args__ = (
        sa.Index("idx_input_resource_events_resource", "resource_id", "timestamp"),
        sa.Index("idx_input_resource_events_session", "session_id", "timestamp"),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    resource_id: str = _col(TEXT, notnull=True, fk="input_resources.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    event_type: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True, server="''")
    timestamp: str = _col(TEXT, notnull=True)
    data: str = _col(TEXT, notnull=True, server="'{}'")


class SessionAttachments(V43Model, table=True):
    __tablename__ = "session_attachments"
    __table_args__ = (sa.Index("idx_session_attachments_session", "session_id", "created_at"),)

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    origin: str = _col(TEXT, notnull=True, server="''")
    kind: str = _col(TEXT, notnull=True)
    filename: str = _col(TEXT, notnull=True, server="''")
    media_type: str = _col(TEXT, notnull=True, server="''")
    byte_size: int = _col(INTEGER, notnull=True, server="0")
    sha256: str = _col(TEXT, notnull=True, server="''")
    storage_key: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True)
    created_at: str = _col(TEXT, notnull=True)
    expires_at: str = _col(TEXT, notnull=True)
    metadata_json: str = Field(
        "{}",
        sa_column_kwargs={"name": "metadata", "server_default": sa.text("'{}'")},
        sa_type=TEXT,
        nullable=False,
    )


class AttachmentDeliveries(V43Model, table=True):
    __tablename__ = "attachment_deliveries"
    __table_args__ = (sa.Index("idx_attachment_deliveries_attachment", "attachment_id", "updated_at"),)

    id: str = _col(TEXT, pk=True)
    attachment_id: str = _col(TEXT, notnull=True, fk="session_attachments.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    platform: str = _col(TEXT, notnull=True)
    target_id: str = _col(TEXT, notnull=True, server="''")
    status: str = _col(TEXT, notnull=True)
    provider_message_id: str = _col(TEXT, notnull=True, server="''")
    failure_code: str = _col(TEXT, notnull=True, server="''")
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)


class SessionCapabilityEvents(V43Model, table=True):
    __tablename__ = "session_capability_events"
    __table_args__ = (
        sa.Index("idx_session_capability_events_session_id", "session_id"),
        sa.Index("idx_session_capability_events_run_id", "run_id"),
        sa.Index("idx_session_capability_events_capability", "capability"),
        _AUTOINCREMENT,
    )

    seq: int | None = _autoinc()
    id: str = _col(TEXT, notnull=True, unique=True)
    session_id: str | None = _col(TEXT, fk="sessions.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    event_type: str = _col(TEXT, notnull=True)
    source: str = _col(TEXT, notnull=True, server="''")
    actor: str = _col(TEXT, notnull=True, server="''")
    capability: str = _col(TEXT, notnull=True)
    old_value: str = _col(TEXT, notnull=True, server="''")
    new_value: str = _col(TEXT, notnull=True, server="''")
    timestamp: str = _col(TEXT, notnull=True)
    data: str = _col(TEXT, notnull=True, server="'{}'")


class ConversationTurns(V43Model, table=True):
    __tablename__ = "conversation_turns"
    __table_args__ = (
        sa.Index("idx_conversation_turns_session", "session_id", "start_seq"),
        sa.Index("idx_conversation_turns_open", "session_id", "status"),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    intent_id: str = _col(TEXT, notnull=True, server="''")
    kind: str = _col(TEXT, notnull=True, server="'conversation'")
    status: str = _col(TEXT, notnull=True)
    start_seq: int = _col(INTEGER, notnull=True)
    end_seq: int | None = _col(INTEGER)
    started_at: str = _col(TEXT, notnull=True)
    ended_at: str | None = _col(TEXT)


class SessionForkRequests(V43Model, table=True):
    __tablename__ = "session_fork_requests"
    __table_args__ = (sa.UniqueConstraint("request_key_hash", "source_session_id"), _AUTOINCREMENT)

    id: int | None = _autoinc()
    request_key_hash: str = _col(TEXT, notnull=True)
    request_fingerprint: str = _col(TEXT, notnull=True)
    source_session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    child_session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    created_at: str = _col(TEXT, notnull=True)


class SessionRuntimeLeases(V43Model, table=True):
    __tablename__ = "session_runtime_leases"
    __table_args__ = (sa.Index("idx_session_runtime_leases_expiry", "expires_at"),)

    session_id: str = _col(TEXT, pk=True, fk="sessions.id", ondelete="CASCADE")
    owner_instance_id: str = _col(TEXT, notnull=True)
    owner_pid: int = _col(INTEGER, notnull=True)
    owner_kind: str = _col(TEXT, notnull=True)
    lease_token_hash: str = _col(TEXT, notnull=True)
    epoch: int = _col(INTEGER, notnull=True)
    run_id: str = _col(TEXT, notnull=True, server="''")
    purpose: str = _col(TEXT, notnull=True)
    state: str = _col(TEXT, notnull=True)
    acquired_at: int = _col(INTEGER, notnull=True)
    heartbeat_at: int = _col(INTEGER, notnull=True)
    expires_at: int = _col(INTEGER, notnull=True)
    updated_at: int = _col(INTEGER, notnull=True)


class ResponseTurns(V43Model, table=True):
    __tablename__ = "response_turns"
    __table_args__ = (
        sa.UniqueConstraint("session_id", "local_turn_id"),
        sa.Index("idx_response_turns_session_id", "session_id"),
        sa.Index("idx_response_turns_response_id", "response_id"),
        _AUTOINCREMENT,
    )

    id: int | None = _autoinc()
    session_id: str = _col(TEXT, notnull=True)
    local_turn_id: str = _col(TEXT, notnull=True)
    message_id: int | None = _col(INTEGER)
    request_id: str | None = _col(TEXT)
    response_id: str | None = _col(TEXT)
    previous_response_id: str | None = _col(TEXT)
    conversation_id: str | None = _col(TEXT)
    provider: str = _col(TEXT, notnull=True)
    api: str = _col(TEXT, notnull=True)
    model: str = _col(TEXT, notnull=True)
    state_mode: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True)
    incomplete_reason: str | None = _col(TEXT)
    request_summary_json: bytes | None = _col(BLOB)
    response_summary_json: bytes | None = _col(BLOB)
    created_at: str = _col(DATETIME, notnull=True)
    completed_at: str | None = _col(DATETIME)


class ResponseItems(V43Model, table=True):
    __tablename__ = "response_items"
    __table_args__ = (
        sa.Index("idx_response_items_session_turn", "session_id", "local_turn_id"),
        sa.Index("idx_response_items_response_id", "response_id"),
        sa.Index("idx_response_items_identity", "session_id", "local_turn_id", "item_key", unique=True),
        _AUTOINCREMENT,
    )

    id: int | None = _autoinc()
    session_id: str = _col(TEXT, notnull=True)
    local_turn_id: str = _col(TEXT, notnull=True)
    response_id: str | None = _col(TEXT)
    item_id: str | None = _col(TEXT)
    output_index: int = _col(INTEGER, notnull=True)
    item_type: str = _col(TEXT, notnull=True)
    item_status: str | None = _col(TEXT)
    item_key: str = _col(TEXT, notnull=True)
    sanitized_json: bytes = _col(BLOB, notnull=True)
    created_at: str = _col(DATETIME, notnull=True)
    updated_at: str | None = _col(DATETIME)


class ToolExecutionRecords(V43Model, table=True):
    __tablename__ = "tool_execution_records"
    __table_args__ = (
        sa.UniqueConstraint("execution_key"),
        sa.Index("idx_tool_execution_records_session_turn", "session_id", "local_turn_id"),
        sa.Index("idx_tool_execution_records_provider_call", "provider", "api", "provider_call_id"),
        _AUTOINCREMENT,
    )

    id: int | None = _autoinc()
    session_id: str = _col(TEXT, notnull=True)
    local_turn_id: str = _col(TEXT, notnull=True)
    execution_key: str = _col(TEXT, notnull=True)
    provider: str = _col(TEXT, notnull=True)
    api: str = _col(TEXT, notnull=True)
    response_id: str | None = _col(TEXT)
    provider_call_id: str | None = _col(TEXT)
    tool_kind: str = _col(TEXT, notnull=True)
    tool_name: str = _col(TEXT, notnull=True)
    args_hash: str = _col(TEXT, notnull=True)
    execution_state: str = _col(TEXT, notnull=True)
    result_summary_json: bytes | None = _col(BLOB)
    provider_metadata_json: bytes | None = _col(BLOB)
    side_effecting: bool = _col(BOOLEAN, notnull=True)
    created_at: str = _col(DATETIME, notnull=True)
    completed_at: str | None = _col(DATETIME)


class ResponseRuns(V43Model, table=True):
    __tablename__ = "response_runs"
    __table_args__ = (
        sa.UniqueConstraint("session_id", "local_run_id"),
        sa.Index("idx_response_runs_session_id", "session_id"),
        sa.Index("idx_response_runs_state", "state"),
        sa.Index("idx_response_runs_session_turn", "session_id", "local_turn_id"),
        _AUTOINCREMENT,
    )

    id: int | None = _autoinc()
    session_id: str = _col(TEXT, notnull=True)
    local_run_id: str = _col(TEXT, notnull=True)
    local_turn_id: str = _col(TEXT, notnull=True, server="''")
    message_id: int | None = _col(INTEGER)
    response_id: str | None = _col(TEXT)
    provider: str = _col(TEXT, notnull=True)
    api: str = _col(TEXT, notnull=True)
    state: str = _col(TEXT, notnull=True)
    polling_url: str | None = _col(TEXT)
    last_event_sequence: int | None = _col(INTEGER)
    cancel_requested: bool = _col(BOOLEAN, notnull=True, server="FALSE")
    created_at: str = _col(DATETIME, notnull=True)
    updated_at: str = _col(DATETIME, notnull=True)


class ResponseSessionState(V43Model, table=True):
    __tablename__ = "response_session_state"

    session_id: str = _col(TEXT, pk=True)
    state_mode: str = _col(TEXT, notnull=True, server="'replay'")
    previous_response_id: str | None = _col(TEXT)
    conversation_id: str | None = _col(TEXT)
    provider: str = _col(TEXT, notnull=True, server="''")
    api: str = _col(TEXT, notnull=True, server="''")
    model: str = _col(TEXT, notnull=True, server="''")
    version: int = _col(INTEGER, notnull=True, server="0")
    updated_at: str = _col(DATETIME, notnull=True)


class CronJobs(V43Model, table=True):
    __tablename__ = "cron_jobs"
    __table_args__ = (
        sa.Index("idx_cron_jobs_session_id", "session_id"),
        sa.Index("idx_cron_jobs_enabled", "enabled"),
        sa.Index("idx_cron_jobs_next_run", "next_run"),
        sa.Index("idx_cron_jobs_created_at", "created_at"),
    )

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, server="''")
    name: str = _col(TEXT, notnull=True, server="''")
    prompt: str = _col(TEXT, notnull=True, server="''")
    schedule: str = _col(TEXT, notnull=True, server="''")
    oneshot: int = _col(INTEGER, notnull=True, server="0")
    mode: str = _col(TEXT, notnull=True, server="'yolo'")
    work_dir: str = _col(TEXT, notnull=True, server="''")
    a2a_target: str = _col(TEXT, notnull=True, server="''")
    a2a_token: str = _col(TEXT, notnull=True, server="''")
    enabled: int = _col(INTEGER, notnull=True, server="1")
    created_at: str = _col(TEXT, notnull=True)
    last_run: str = _col(TEXT, notnull=True, server="''")
    next_run: str = _col(TEXT, notnull=True, server="''")
    run_count: int = _col(INTEGER, notnull=True, server="0")
    last_status: str = _col(TEXT, notnull=True, server="''")
    last_error: str = _col(TEXT, notnull=True, server="''")


class SessionEsmObjectives(V43Model, table=True):
    __tablename__ = "session_esm_objectives"
    __table_args__ = (sa.Index("idx_session_esm_objectives_status", "status"),)

    session_id: str = _col(TEXT, pk=True, fk="sessions.id", ondelete="CASCADE")
    esm_id: str = _col(TEXT, notnull=True)
    objective: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True)
    token_budget: int | None = _col(INTEGER)
    tokens_used: int = _col(INTEGER, notnull=True, server="0")
    time_used_ms: int = _col(INTEGER, notnull=True, server="0")
    blocked_count: int = _col(INTEGER, notnull=True, server="0")
    blocked_reason: str = _col(TEXT, notnull=True, server="''")
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)
    blocked_run_id: str = _col(TEXT, notnull=True, server="''")
    completion_reason: str = _col(TEXT, notnull=True, server="''")
    completion_run_id: str = _col(TEXT, notnull=True, server="''")
    completion_review: str = _col(TEXT, notnull=True, server="''")
    phase: str = _col(TEXT, notnull=True, server="''")
    progress_summary: str = _col(TEXT, notnull=True, server="''")
    remaining_work: str = _col(TEXT, notnull=True, server="'[]'")
    completion_rejection_count: int = _col(INTEGER, notnull=True, server="0")
    completion_rejection_run_id: str = _col(TEXT, notnull=True, server="''")
    recovery_count: int = _col(INTEGER, notnull=True, server="0")
    recovery_reason: str = _col(TEXT, notnull=True, server="''")


class SubSession(V43Model, table=True):
    """Sub-agent sessions: the shape of ``sessions`` (without the channel-binding indexes)."""

    __tablename__ = "sub_session"
    __table_args__ = (sa.Index("idx_sub_session_cwd", "cwd"),)

    id: str = _col(TEXT, pk=True)
    cwd: str | None = _col(TEXT)
    timestamp: str | None = _col(TEXT)
    parent_session: str | None = _col(TEXT)
    version: int | None = _col(INTEGER)
    channel_type: str = _col(TEXT, notnull=True, server="'local'")
    channel_id: str = _col(TEXT, notnull=True, server="''")
    fork_boundary_seq: int = _col(INTEGER, notnull=True, server="0")
    seed_length: int = _col(INTEGER, notnull=True, server="0")
    fork_kind: str = _col(TEXT, notnull=True, server="''")
    expert_id: str = _col(TEXT, notnull=True, server="''")


class SubEntries(V43Model, table=True):
    """Sub-agent entries: the shape of ``entries``, referencing ``sub_session``."""

    __tablename__ = "sub_entries"
    __table_args__ = (
        sa.Index("idx_sub_entries_session_id", "session_id"),
        sa.Index("idx_sub_entries_type", "type"),
        _AUTOINCREMENT,
    )

    seq: int | None = _autoinc()
    session_id: str | None = _col(TEXT, fk="sub_session.id", ondelete="CASCADE")
    id: str | None = _col(TEXT, unique=True)
    type: str = _col(TEXT, notnull=True)
    parent_id: str | None = _col(TEXT)
    timestamp: str = _col(TEXT, notnull=True)
    data: str = _col(TEXT, notnull=True)


# ---------------------------------------------------------------------------------------------------------
# sessions.db, part 2: tables that exist only through numbered migrations
# ---------------------------------------------------------------------------------------------------------


class SchemaMigrations(V43Model, table=True):
    __tablename__ = "schema_migrations"

    version: int = _col(INTEGER, pk=True)
    name: str = _col(TEXT, notnull=True)
    applied_at: str | None = _col(TEXT, notnull=True, server="CURRENT_TIMESTAMP")


class SessionChannelTools(V43Model, table=True):
    """v17. The primary key is ``(session_id, tool_name)``; both columns are declared ``NOT NULL``."""

    __tablename__ = "session_channel_tools"
    __table_args__ = (sa.Index("idx_session_channel_tools_session_id", "session_id"),)

    session_id: str = Field(
        sa_type=TEXT,
        primary_key=True,
        nullable=False,
        foreign_key="sessions.id",
        ondelete="CASCADE",
    )
    tool_name: str = Field(sa_type=TEXT, primary_key=True, nullable=False)
    enabled: int = _col(INTEGER, notnull=True, server="1")
    updated_at: str | None = _col(TEXT, notnull=True, server="CURRENT_TIMESTAMP")


class SessionChannelToolGenerations(V43Model, table=True):
    __tablename__ = "session_channel_tool_generations"
    __table_args__ = (sa.Index("idx_channel_tool_generations_updated_at", "updated_at"),)

    session_id: str = _col(TEXT, pk=True)
    generation: int = _col(INTEGER, notnull=True, server="0")
    updated_at: str | None = _col(TEXT, notnull=True, server="CURRENT_TIMESTAMP")


class SessionEsmGuidance(V43Model, table=True):
    __tablename__ = "session_esm_guidance"
    __table_args__ = (sa.Index("idx_esm_guidance_session_status", "session_id", "status", "created_at"),)

    id: str = _col(TEXT, pk=True)
    session_id: str = _col(TEXT, notnull=True, fk="sessions.id", ondelete="CASCADE")
    objective_version: str = _col(TEXT, notnull=True, server="''")
    guidance: str = _col(TEXT, notnull=True)
    status: str = _col(TEXT, notnull=True, server="'pending'")
    created_at: str = _col(TEXT, notnull=True)
    consumed_at: str | None = _col(TEXT)


class Projects(V43Model, table=True):
    __tablename__ = "projects"

    id: str = _col(TEXT, pk=True)
    name: str = _col(TEXT, notnull=True)
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)


class SessionMetadata(V43Model, table=True):
    __tablename__ = "session_metadata"
    __table_args__ = (sa.Index("idx_session_metadata_project", "project_id", "pinned", "updated_at"),)

    session_id: str = _col(TEXT, pk=True, fk="sessions.id", ondelete="CASCADE")
    project_id: str | None = _col(TEXT, fk="projects.id", ondelete="SET NULL")
    pinned: int = _col(INTEGER, notnull=True, server="0")
    updated_at: str = _col(TEXT, notnull=True)


# ---------------------------------------------------------------------------------------------------------
# knowledge-bases/<kbID>.db, store version 1 (foreign keys ON). knowledge_chunk_fts: see KB_V1_FTS_DDL.
# ---------------------------------------------------------------------------------------------------------


class KnowledgeBases(KBV1Model, table=True):
    __tablename__ = "knowledge_bases"
    __table_args__ = (sa.Index("idx_knowledge_bases_updated", "updated_at", "name"),)

    id: str = _col(TEXT, pk=True)
    name: str = _col(TEXT, notnull=True)
    root_dir: str = _col(TEXT, notnull=True)
    preprocess_profile: str = _col(TEXT, notnull=True)
    provider: str = _col(TEXT, notnull=True, server="''")
    model: str = _col(TEXT, notnull=True, server="''")
    mode: str = _col(TEXT, notnull=True, server="'yolo'")
    thinking_level: str = _col(TEXT, notnull=True, server="''")
    schedule: str = _col(TEXT, notnull=True, server="'manual'")
    enabled: int = _col(INTEGER, notnull=True, server="1")
    active_snapshot_id: str = _col(TEXT, notnull=True, server="''")
    created_at: str = _col(TEXT, notnull=True)
    updated_at: str = _col(TEXT, notnull=True)


class KnowledgeIndexSnapshots(KBV1Model, table=True):
    __tablename__ = "knowledge_index_snapshots"
    __table_args__ = (sa.Index("idx_knowledge_snapshots_base", "knowledge_base_id", "finished_at"),)

    id: str = _col(TEXT, pk=True)
    knowledge_base_id: str = _col(TEXT, notnull=True, fk="knowledge_bases.id", ondelete="CASCADE")
    run_id: str = _col(TEXT, notnull=True, server="''")
    status: str = _col(TEXT, notnull=True)
    schema_version: int = _col(INTEGER, notnull=True)
    file_count: int = _col(INTEGER, notnull=True, server="0")
    chunk_count: int = _col(INTEGER, notnull=True, server="0")
    node_count: int = _col(INTEGER, notnull=True, server="0")
    edge_count: int = _col(INTEGER, notnull=True, server="0")
    started_at: str = _col(TEXT, notnull=True)
    finished_at: str = _col(TEXT, notnull=True, server="''")
    error_summary: str = _col(TEXT, notnull=True, server="''")


class KnowledgeFiles(KBV1Model, table=True):
    __tablename__ = "knowledge_files"
    __table_args__ = (sa.UniqueConstraint("snapshot_id", "relative_path"),)

    id: str = _col(TEXT, pk=True)
    snapshot_id: str = _col(TEXT, notnull=True, fk="knowledge_index_snapshots.id", ondelete="CASCADE")
    relative_path: str = _col(TEXT, notnull=True)
    content_sha256: str = _col(TEXT, notnull=True)
    byte_size: int = _col(INTEGER, notnull=True)
    media_type: str = _col(TEXT, notnull=True, server="''")
    title: str = _col(TEXT, notnull=True, server="''")
    status: str = _col(TEXT, notnull=True, server="'indexed'")


class KnowledgeChunks(KBV1Model, table=True):
    __tablename__ = "knowledge_chunks"
    __table_args__ = (
        sa.UniqueConstraint("file_id", "ordinal"),
        sa.Index("idx_knowledge_chunks_snapshot", "snapshot_id", "file_id", "ordinal"),
    )

    id: str = _col(TEXT, pk=True)
    snapshot_id: str = _col(TEXT, notnull=True, fk="knowledge_index_snapshots.id", ondelete="CASCADE")
    file_id: str = _col(TEXT, notnull=True, fk="knowledge_files.id", ondelete="CASCADE")
    ordinal: int = _col(INTEGER, notnull=True)
    text: str = _col(TEXT, notnull=True)
    start_line: int = _col(INTEGER, notnull=True)
    end_line: int = _col(INTEGER, notnull=True)
    content_sha256: str = _col(TEXT, notnull=True)


class KnowledgeNodes(KBV1Model, table=True):
    __tablename__ = "knowledge_nodes"
    __table_args__ = (
        sa.UniqueConstraint("snapshot_id", "kind", "normalized_label"),
        sa.Index("idx_knowledge_nodes_label", "snapshot_id", "normalized_label", "kind"),
    )

    id: str = _col(TEXT, pk=True)
    snapshot_id: str = _col(TEXT, notnull=True, fk="knowledge_index_snapshots.id", ondelete="CASCADE")
    kind: str = _col(TEXT, notnull=True)
    label: str = _col(TEXT, notnull=True)
    normalized_label: str = _col(TEXT, notnull=True)
    summary: str = _col(TEXT, notnull=True, server="''")
    attributes: str = _col(TEXT, notnull=True, server="'{}'")


class KnowledgeEdges(KBV1Model, table=True):
    __tablename__ = "knowledge_edges"
    __table_args__ = (
        sa.UniqueConstraint("snapshot_id", "from_node_id", "to_node_id", "relation_type"),
        sa.Index("idx_knowledge_edges_from", "snapshot_id", "from_node_id", "relation_type"),
        sa.Index("idx_knowledge_edges_to", "snapshot_id", "to_node_id", "relation_type"),
    )

    id: str = _col(TEXT, pk=True)
    snapshot_id: str = _col(TEXT, notnull=True, fk="knowledge_index_snapshots.id", ondelete="CASCADE")
    from_node_id: str = _col(TEXT, notnull=True, fk="knowledge_nodes.id", ondelete="CASCADE")
    to_node_id: str = _col(TEXT, notnull=True, fk="knowledge_nodes.id", ondelete="CASCADE")
    relation_type: str = _col(TEXT, notnull=True)
    confidence: float = _col(REAL, notnull=True, server="1", default=1.0)


class KnowledgeEvidence(KBV1Model, table=True):
    __tablename__ = "knowledge_evidence"
    __table_args__ = (
        sa.CheckConstraint("node_id <> '' OR edge_id <> ''"),
        sa.Index("idx_knowledge_evidence_chunk", "snapshot_id", "chunk_id", "node_id", "edge_id"),
    )

    id: str = _col(TEXT, pk=True)
    snapshot_id: str = _col(TEXT, notnull=True, fk="knowledge_index_snapshots.id", ondelete="CASCADE")
    node_id: str = _col(TEXT, notnull=True, server="''")
    edge_id: str = _col(TEXT, notnull=True, server="''")
    chunk_id: str = _col(TEXT, notnull=True, fk="knowledge_chunks.id", ondelete="CASCADE")
    start_line: int = _col(INTEGER, notnull=True)
    end_line: int = _col(INTEGER, notnull=True)
    confidence: float = _col(REAL, notnull=True, server="1", default=1.0)


class KnowledgeStoreSchema(KBV1Model, table=True):
    __tablename__ = "knowledge_store_schema"

    version: int = _col(INTEGER, pk=True)
    applied_at: str | None = _col(TEXT, notnull=True, server="CURRENT_TIMESTAMP")


V43_TABLES: dict[str, type[SQLModel]] = {
    cls.__tablename__: cls  # type: ignore[misc]
    for cls in (
        Sessions, Entries, RequestStats, SessionCapabilities, SessionRunEvents, SessionRuns,
        SessionRunRecoveries, SessionExecutionIntents, RuntimeSubmissions, DeliveryIntents,
        DeliveryOperations, InputResources, InputResourceEvents, SessionAttachments, AttachmentDeliveries,
        SessionCapabilityEvents, ConversationTurns, SessionForkRequests, SessionRuntimeLeases, ResponseTurns,
        ResponseItems, ToolExecutionRecords, ResponseRuns, ResponseSessionState, CronJobs,
        SessionEsmObjectives, SubSession, SubEntries, SchemaMigrations, SessionChannelTools,
        SessionChannelToolGenerations, SessionEsmGuidance, Projects, SessionMetadata,
    )
}
"""Table name → class, for every table of a v43 ``sessions.db`` (``sqlite_sequence`` is SQLite's own)."""

KB_V1_TABLES: dict[str, type[SQLModel]] = {
    cls.__tablename__: cls  # type: ignore[misc]
    for cls in (
        KnowledgeBases, KnowledgeIndexSnapshots, KnowledgeFiles, KnowledgeChunks, KnowledgeNodes,
        KnowledgeEdges, KnowledgeEvidence, KnowledgeStoreSchema,
    )
}
"""Table name → class for a knowledge-base file, store v1 (without the FTS5 table ``knowledge_chunk_fts``)."""
