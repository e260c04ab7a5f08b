-- Kept only to build a version-1 file for the upgrade tests: a new store is created from the SQLModel classes
-- of store/agents/checkpoint_tables.py, never from this file.
-- Sessionscope external-agent checkpoints, layout version 1 (<session dir>/sessionscope/agent-state.db).
--
-- The three tables of the reference (state headers, the shared line set, the publication head) plus the
-- small tables that stand in for what the reference keeps elsewhere: the agents (the reference's bots, for
-- the runtime configuration guard), the sessions (the reference's bot_sessions: one per agent and agent
-- session id, carrying the runtime fencing token), the runs that stage versions, a counter that replaces
-- the sequence session_runtime_fencing_token_seq, and the byte length of each captured file (a capture hint).
--
-- Written to run unchanged on SQLite (3.35 or newer) and on PostgreSQL: no AUTOINCREMENT, no INSERT OR
-- REPLACE, no SQLite-only functions, booleans as TRUE / FALSE, upserts as ON CONFLICT. Two deliberate gaps,
-- enforced by the writer (store/agentstate.py) instead:
--   * byte lengths: SQLite before 3.43 has no octet_length(), so the byte limits and content_bytes =
--     octet_length(content) are checked in Python; the CHECKs below bound the stored numbers only;
--   * byte order of file_path: SQLite's default BINARY collation is byte order; PostgreSQL needs
--     COLLATE "C" on file_path, which SQLite does not know, so it is left out here.
-- Times are RFC 3339 text in UTC ("...Z"), as everywhere in the session directory.

CREATE TABLE IF NOT EXISTS agent_state_meta (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS agent_state_counters (
    name  TEXT   NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL CHECK (value >= 0)
);

CREATE TABLE IF NOT EXISTS agent_state_agents (
    agent_id                 TEXT   NOT NULL PRIMARY KEY,
    runtime_config_epoch     BIGINT NOT NULL DEFAULT 0 CHECK (runtime_config_epoch >= 0),
    runtime_reset_token      TEXT,
    runtime_reset_expires_at TEXT,
    created_at               TEXT   NOT NULL,
    CONSTRAINT agent_state_agents_agent_id_check
        CHECK (trim(agent_id) <> '' AND length(agent_id) <= 256),
    CONSTRAINT agent_state_agents_reset_pair_check
        CHECK ((runtime_reset_token IS NULL) = (runtime_reset_expires_at IS NULL))
);

CREATE TABLE IF NOT EXISTS agent_state_sessions (
    session_id            TEXT   NOT NULL PRIMARY KEY,
    agent_id              TEXT   NOT NULL REFERENCES agent_state_agents (agent_id) ON DELETE CASCADE,
    agent_session_id      TEXT   NOT NULL,
    source_root           TEXT   NOT NULL DEFAULT '',
    runtime_fencing_token BIGINT NOT NULL DEFAULT 0 CHECK (runtime_fencing_token >= 0),
    runtime_config_epoch  BIGINT NOT NULL DEFAULT 0 CHECK (runtime_config_epoch >= 0),
    created_at            TEXT   NOT NULL,
    updated_at            TEXT   NOT NULL,
    CONSTRAINT agent_state_sessions_agent_session_key UNIQUE (agent_id, agent_session_id),
    CONSTRAINT agent_state_sessions_agent_session_id_check
        CHECK (trim(agent_session_id) <> '' AND length(agent_session_id) <= 1024)
);

CREATE TABLE IF NOT EXISTS agent_state_runs (
    session_id    TEXT   NOT NULL REFERENCES agent_state_sessions (session_id) ON DELETE CASCADE,
    run_id        TEXT   NOT NULL,
    fencing_token BIGINT NOT NULL CHECK (fencing_token > 0),
    status        TEXT   NOT NULL,
    created_at    TEXT   NOT NULL,
    finished_at   TEXT,
    PRIMARY KEY (session_id, run_id),
    CONSTRAINT agent_state_runs_status_check
        CHECK (status IN ('running', 'waiting_decision', 'completed', 'failed'))
);

-- State headers (versions): one staged checkpoint per run it is valid through.
CREATE TABLE IF NOT EXISTS agent_state_versions (
    session_id            TEXT    NOT NULL,
    through_run_id        TEXT    NOT NULL,
    agent_id              TEXT    NOT NULL,
    agent_session_id      TEXT    NOT NULL,
    cwd                   TEXT    NOT NULL,
    transcript_path       TEXT    NOT NULL,
    runtime_fencing_token BIGINT  NOT NULL,
    file_count            INTEGER NOT NULL,
    record_count          BIGINT  NOT NULL,
    file_shapes           TEXT    NOT NULL DEFAULT '[]',
    created_at            TEXT    NOT NULL,
    updated_at            TEXT    NOT NULL,
    PRIMARY KEY (session_id, through_run_id),
    CONSTRAINT agent_state_versions_session_fkey
        FOREIGN KEY (session_id) REFERENCES agent_state_sessions (session_id) ON DELETE CASCADE,
    CONSTRAINT agent_state_versions_run_fkey
        FOREIGN KEY (session_id, through_run_id)
        REFERENCES agent_state_runs (session_id, run_id) ON DELETE CASCADE,
    CONSTRAINT agent_state_versions_agent_id_check
        CHECK (trim(agent_id) <> '' AND length(agent_id) <= 256),
    CONSTRAINT agent_state_versions_agent_session_id_check
        CHECK (trim(agent_session_id) <> '' AND length(agent_session_id) <= 1024),
    CONSTRAINT agent_state_versions_cwd_check
        CHECK (trim(cwd) <> '' AND length(cwd) <= 16384),
    CONSTRAINT agent_state_versions_transcript_path_check
        CHECK (
            transcript_path <> ''
            AND length(transcript_path) <= 4096
            AND substr(transcript_path, 1, 1) <> '/'
            AND substr(transcript_path, length(transcript_path) - 5, 6) = '.jsonl'
            AND replace(transcript_path, '\', '') = transcript_path
        ),
    CONSTRAINT agent_state_versions_runtime_fencing_token_check
        CHECK (runtime_fencing_token > 0),
    CONSTRAINT agent_state_versions_file_count_check
        CHECK (file_count > 0 AND file_count <= 1024),
    CONSTRAINT agent_state_versions_record_count_check
        CHECK (record_count > 0 AND record_count <= 2000000 AND file_count <= record_count),
    CONSTRAINT agent_state_versions_file_shapes_check
        CHECK (substr(file_shapes, 1, 1) = '[')
);

-- The shared line set of a session: versions share it; a version's membership is its file_shapes.
-- content is the verbatim compacted record text (TEXT, never a JSON type: digests need byte fidelity).
CREATE TABLE IF NOT EXISTS agent_state_lines (
    session_id    TEXT    NOT NULL,
    file_path     TEXT    NOT NULL,
    line_number   BIGINT  NOT NULL,
    content       TEXT    NOT NULL,
    content_bytes INTEGER NOT NULL,
    PRIMARY KEY (session_id, file_path, line_number),
    CONSTRAINT agent_state_lines_session_fkey
        FOREIGN KEY (session_id) REFERENCES agent_state_sessions (session_id) ON DELETE CASCADE,
    CONSTRAINT agent_state_lines_file_path_check
        CHECK (
            file_path <> ''
            AND length(file_path) <= 4096
            AND substr(file_path, 1, 1) <> '/'
            AND substr(file_path, length(file_path) - 5, 6) = '.jsonl'
            AND replace(file_path, '\', '') = file_path
        ),
    CONSTRAINT agent_state_lines_content_size_check
        CHECK (content_bytes > 0 AND content_bytes <= 8388608),
    CONSTRAINT agent_state_lines_line_number_check
        CHECK (line_number > 0)
);

-- The publication head: at most one per session. checkpoint_reset = TRUE is a reset head (nothing resumable).
CREATE TABLE IF NOT EXISTS agent_state_publications (
    session_id       TEXT    NOT NULL PRIMARY KEY,
    run_id           TEXT    NOT NULL,
    checkpoint_reset BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at       TEXT    NOT NULL,
    CONSTRAINT agent_state_publications_session_fkey
        FOREIGN KEY (session_id) REFERENCES agent_state_sessions (session_id) ON DELETE CASCADE,
    CONSTRAINT agent_state_publications_run_fkey
        FOREIGN KEY (session_id, run_id)
        REFERENCES agent_state_runs (session_id, run_id) ON DELETE CASCADE
);

-- Restored JSONL bytes of each file of a version (sum of compacted record length + 1). Not part of the
-- reference: capture uses it to hash a file's canonical prefix in one read when the file on disk is already
-- compact. It is only a hint; the prefix proof is still the digest comparison.
CREATE TABLE IF NOT EXISTS agent_state_file_marks (
    session_id     TEXT   NOT NULL,
    through_run_id TEXT   NOT NULL,
    file_path      TEXT   NOT NULL,
    restored_bytes BIGINT NOT NULL CHECK (restored_bytes > 0),
    PRIMARY KEY (session_id, through_run_id, file_path),
    CONSTRAINT agent_state_file_marks_version_fkey
        FOREIGN KEY (session_id, through_run_id)
        REFERENCES agent_state_versions (session_id, through_run_id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS agent_state_runs_status_idx ON agent_state_runs (session_id, status);

INSERT INTO agent_state_counters (name, value) VALUES ('runtime_fencing_token', 0)
    ON CONFLICT (name) DO NOTHING;

INSERT INTO agent_state_meta (name, value) VALUES ('schema_version', '1')
    ON CONFLICT (name) DO NOTHING;
