-- Part 2: tables, indexes and columns that exist only via migrations
-- (not in the creation template). Current schema version = 43.
-- =====================================================================
-- schema version bookkeeping (ensureSchemaMigrationsTable):
CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);

-- v16 add_channel_binding_columns (also ALTER TABLE ... ADD COLUMN channel_type/channel_id on sessions, sub_session)
CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_wechat_binding ON sessions(channel_type, channel_id) WHERE channel_type = 'wechat' AND channel_id <> '';
CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_feishu_binding ON sessions(channel_type, channel_id) WHERE channel_type = 'feishu' AND channel_id <> '';

-- v17 create_session_channel_tools
CREATE TABLE IF NOT EXISTS session_channel_tools (
				session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
				tool_name TEXT NOT NULL,
				enabled INTEGER NOT NULL DEFAULT 1,
				updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
				PRIMARY KEY (session_id, tool_name)
			);
CREATE INDEX IF NOT EXISTS idx_session_channel_tools_session_id ON session_channel_tools(session_id);

-- v22 create_channel_tool_generations
CREATE TABLE session_channel_tool_generations (
				session_id TEXT PRIMARY KEY,
				generation INTEGER NOT NULL DEFAULT 0,
				updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
			);
CREATE INDEX idx_channel_tool_generations_updated_at
			ON session_channel_tool_generations(updated_at);

-- v23 create_esm_guidance
CREATE TABLE IF NOT EXISTS session_esm_guidance (
			id TEXT PRIMARY KEY,
			session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			objective_version TEXT NOT NULL DEFAULT '',
			guidance TEXT NOT NULL,
			status TEXT NOT NULL DEFAULT 'pending',
			created_at TEXT NOT NULL,
			consumed_at TEXT
		);
CREATE INDEX IF NOT EXISTS idx_esm_guidance_session_status ON session_esm_guidance(session_id, status, created_at);

-- v24 index_entries_session_type
CREATE INDEX IF NOT EXISTS idx_entries_session_type ON entries(session_id, type);

-- v25 create_projects_and_session_metadata
CREATE TABLE IF NOT EXISTS projects (
			id TEXT PRIMARY KEY,
			name TEXT NOT NULL,
			created_at TEXT NOT NULL,
			updated_at TEXT NOT NULL
		);
CREATE TABLE IF NOT EXISTS session_metadata (
			session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
			project_id TEXT REFERENCES projects(id) ON DELETE SET NULL,
						pinned INTEGER NOT NULL DEFAULT 0,
			updated_at TEXT NOT NULL
		);
CREATE INDEX IF NOT EXISTS idx_session_metadata_project ON session_metadata(project_id, pinned, updated_at);

-- v42 create_desktop_knowledge_base_graph  => no-op marker (knowledge bases moved to per-base files)
-- v43 add_delivery_operations_retry_window_started_at:
ALTER TABLE delivery_operations ADD COLUMN retry_window_started_at TEXT;
