-- Reference DDL of the mothx sessions.db format, schema version 43
-- Part 1: creation template (run-status placeholder shown rendered).
-- Part 2: statements that exist only as numbered migrations.

-- =====================================================================
-- Part 1: creation template. Executed once, only when the database has no
-- user tables other than sqlite_% and schema_migrations.
-- =====================================================================
CREATE TABLE sessions (
	id TEXT PRIMARY KEY,
	cwd TEXT,
	timestamp TEXT,
	parent_session TEXT,
	version INTEGER,
	channel_type TEXT NOT NULL DEFAULT 'local',
	channel_id TEXT NOT NULL DEFAULT '',
	fork_boundary_seq INTEGER NOT NULL DEFAULT 0,
	seed_length INTEGER NOT NULL DEFAULT 0,
	fork_kind TEXT NOT NULL DEFAULT '',
	expert_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE entries (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
	id TEXT UNIQUE,
	type TEXT NOT NULL,
	parent_id TEXT,
	timestamp TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX idx_entries_session_id ON entries(session_id);
CREATE INDEX idx_entries_type ON entries(type);
CREATE INDEX idx_sessions_cwd ON sessions(cwd);
CREATE TABLE request_stats (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	timestamp TEXT NOT NULL,
	session_id TEXT,
	provider TEXT NOT NULL,
	model TEXT NOT NULL,
	input_tokens INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	total_tokens INTEGER NOT NULL DEFAULT 0,
	duration_ms INTEGER NOT NULL DEFAULT 0,
	protocol TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_request_stats_timestamp ON request_stats(timestamp);
CREATE INDEX idx_request_stats_provider ON request_stats(provider);
CREATE INDEX idx_request_stats_model ON request_stats(model);
CREATE TABLE session_capabilities (
	session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	mode TEXT NOT NULL DEFAULT '',
	display_mode TEXT NOT NULL DEFAULT 'work',
	delegate_mode INTEGER NOT NULL DEFAULT 0,
	multi_agent INTEGER NOT NULL DEFAULT 0,
	workflows INTEGER NOT NULL DEFAULT 0,
	web_search INTEGER NOT NULL DEFAULT 0,
	browser INTEGER NOT NULL DEFAULT 0,
	a2a_master INTEGER NOT NULL DEFAULT 0,
	updated_at TEXT NOT NULL
);
CREATE TABLE session_run_events (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT UNIQUE NOT NULL,
	session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL,
	event_type TEXT NOT NULL,
	source TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '',
	mode TEXT NOT NULL DEFAULT '',
	timestamp TEXT NOT NULL,
	data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_session_run_events_session_id ON session_run_events(session_id);
CREATE INDEX idx_session_run_events_run_id ON session_run_events(run_id);
CREATE INDEX idx_session_run_events_type ON session_run_events(event_type);
CREATE TABLE session_runs (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	intent_id TEXT NOT NULL DEFAULT '',
	retry_of TEXT NOT NULL DEFAULT '',
	attempt INTEGER NOT NULL DEFAULT 1,
	work_dir TEXT NOT NULL DEFAULT '',
	source TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '',
	mode TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	started_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	finished_at TEXT,
	error TEXT NOT NULL DEFAULT '',
	error_info_json TEXT NOT NULL DEFAULT '{}',
	progress_json TEXT NOT NULL DEFAULT '{}',
	usage_json TEXT NOT NULL DEFAULT '{}',
	context_usage_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_session_runs_session_id ON session_runs(session_id);
CREATE INDEX idx_session_runs_status ON session_runs(status);
CREATE INDEX idx_session_runs_intent ON session_runs(session_id, intent_id, attempt);
CREATE UNIQUE INDEX idx_session_runs_active_session ON session_runs(session_id) WHERE status IN ('created', 'queued', 'running', 'waiting_for_approval', 'waiting_for_question', 'cancelling', 'terminalizing');
CREATE TABLE session_run_recoveries (
	run_id TEXT PRIMARY KEY REFERENCES session_runs(id) ON DELETE CASCADE,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	state TEXT NOT NULL,
	trigger_source TEXT NOT NULL DEFAULT '',
	reason_code TEXT NOT NULL DEFAULT '',
	attempt INTEGER NOT NULL DEFAULT 0,
	previous_lease_epoch INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	next_retry_at INTEGER,
	started_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	completed_at INTEGER
);
CREATE INDEX idx_session_run_recoveries_due ON session_run_recoveries(state, next_retry_at);
CREATE TABLE session_execution_intents (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	source TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '',
	mode TEXT NOT NULL DEFAULT '',
	work_dir TEXT NOT NULL DEFAULT '',
	request_fingerprint TEXT NOT NULL DEFAULT '',
	request_json TEXT NOT NULL DEFAULT '{}',
	policy_json TEXT NOT NULL DEFAULT '{}',
	created_at TEXT NOT NULL
);
CREATE INDEX idx_session_execution_intents_session_id ON session_execution_intents(session_id, created_at);
CREATE TABLE runtime_submissions (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	scope TEXT NOT NULL,
	key_hash TEXT NOT NULL,
	request_fingerprint TEXT NOT NULL DEFAULT '',
	intent_id TEXT NOT NULL REFERENCES session_execution_intents(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL REFERENCES session_runs(id) ON DELETE CASCADE,
	created_at TEXT NOT NULL,
	UNIQUE(session_id, scope, key_hash)
);
CREATE INDEX idx_runtime_submissions_run ON runtime_submissions(run_id);
CREATE INDEX idx_runtime_submissions_intent ON runtime_submissions(intent_id);
CREATE TABLE delivery_intents (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL REFERENCES session_runs(id) ON DELETE CASCADE,
	platform TEXT NOT NULL,
	target_id TEXT NOT NULL DEFAULT '',
	reply_message_id TEXT NOT NULL DEFAULT '',
	transport_context TEXT NOT NULL DEFAULT '{}',
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	UNIQUE(run_id, platform, target_id)
);
CREATE INDEX idx_delivery_intents_session_status ON delivery_intents(session_id, status, updated_at);
CREATE TABLE delivery_operations (
	id TEXT PRIMARY KEY,
	intent_id TEXT NOT NULL REFERENCES delivery_intents(id) ON DELETE CASCADE,
	operation_key TEXT NOT NULL,
	artifact_id TEXT REFERENCES session_attachments(id) ON DELETE RESTRICT,
	operation_kind TEXT NOT NULL,
	sequence INTEGER NOT NULL,
	depends_on TEXT REFERENCES delivery_operations(id) ON DELETE RESTRICT,
	idempotency_key TEXT NOT NULL,
	payload_digest TEXT NOT NULL,
	status TEXT NOT NULL,
	provider_asset_id TEXT NOT NULL DEFAULT '',
	provider_message_id TEXT NOT NULL DEFAULT '',
	provider_state TEXT NOT NULL DEFAULT '{}',
	attempt_count INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER,
	failure_code TEXT NOT NULL DEFAULT '',
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_epoch INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	UNIQUE(intent_id, operation_key),
	UNIQUE(intent_id, sequence)
);
CREATE INDEX idx_delivery_operations_claim ON delivery_operations(status, next_attempt_at, lease_expires_at, sequence);
CREATE TABLE input_resources (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL DEFAULT '',
	origin TEXT NOT NULL DEFAULT '',
	event_id TEXT NOT NULL DEFAULT '',
	item_index INTEGER NOT NULL DEFAULT 0,
	item_key TEXT NOT NULL DEFAULT '',
	kind TEXT NOT NULL,
	filename TEXT NOT NULL DEFAULT '',
	media_type TEXT NOT NULL DEFAULT '',
	byte_size INTEGER NOT NULL DEFAULT 0,
	sha256 TEXT NOT NULL DEFAULT '',
	relative_path TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_input_resources_session ON input_resources(session_id, created_at);
CREATE UNIQUE INDEX idx_input_resources_item_key ON input_resources(session_id, item_key) WHERE item_key <> '';
CREATE TABLE input_resource_events (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	resource_id TEXT NOT NULL REFERENCES input_resources(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL DEFAULT '',
	event_type TEXT NOT NULL,
	status TEXT NOT NULL DEFAULT '',
	timestamp TEXT NOT NULL,
	data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_input_resource_events_resource ON input_resource_events(resource_id, timestamp);
CREATE INDEX idx_input_resource_events_session ON input_resource_events(session_id, timestamp);
CREATE TABLE session_attachments (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL DEFAULT '',
	origin TEXT NOT NULL DEFAULT '',
	kind TEXT NOT NULL,
	filename TEXT NOT NULL DEFAULT '',
	media_type TEXT NOT NULL DEFAULT '',
	byte_size INTEGER NOT NULL DEFAULT 0,
	sha256 TEXT NOT NULL DEFAULT '',
	storage_key TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_session_attachments_session ON session_attachments(session_id, created_at);
CREATE TABLE attachment_deliveries (
	id TEXT PRIMARY KEY,
	attachment_id TEXT NOT NULL REFERENCES session_attachments(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL DEFAULT '',
	platform TEXT NOT NULL,
	target_id TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	provider_message_id TEXT NOT NULL DEFAULT '',
	failure_code TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE INDEX idx_attachment_deliveries_attachment ON attachment_deliveries(attachment_id, updated_at);
CREATE TABLE session_capability_events (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	id TEXT UNIQUE NOT NULL,
	session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
	run_id TEXT NOT NULL DEFAULT '',
	event_type TEXT NOT NULL,
	source TEXT NOT NULL DEFAULT '',
	actor TEXT NOT NULL DEFAULT '',
	capability TEXT NOT NULL,
	old_value TEXT NOT NULL DEFAULT '',
	new_value TEXT NOT NULL DEFAULT '',
	timestamp TEXT NOT NULL,
	data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX idx_session_capability_events_session_id ON session_capability_events(session_id);
CREATE INDEX idx_session_capability_events_run_id ON session_capability_events(run_id);
CREATE INDEX idx_session_capability_events_capability ON session_capability_events(capability);
CREATE TABLE conversation_turns (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	intent_id TEXT NOT NULL DEFAULT '',
	kind TEXT NOT NULL DEFAULT 'conversation',
	status TEXT NOT NULL,
	start_seq INTEGER NOT NULL,
	end_seq INTEGER,
	started_at TEXT NOT NULL,
	ended_at TEXT
);
CREATE INDEX idx_conversation_turns_session ON conversation_turns(session_id, start_seq);
CREATE INDEX idx_conversation_turns_open ON conversation_turns(session_id, status);
CREATE TABLE session_fork_requests (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	request_key_hash TEXT NOT NULL,
	request_fingerprint TEXT NOT NULL,
	source_session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	child_session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	created_at TEXT NOT NULL,
	UNIQUE(request_key_hash, source_session_id)
);
CREATE TABLE session_runtime_leases (
	session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	owner_instance_id TEXT NOT NULL,
	owner_pid INTEGER NOT NULL,
	owner_kind TEXT NOT NULL,
	lease_token_hash TEXT NOT NULL,
	epoch INTEGER NOT NULL,
	run_id TEXT NOT NULL DEFAULT '',
	purpose TEXT NOT NULL,
	state TEXT NOT NULL,
	acquired_at INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX idx_session_runtime_leases_expiry ON session_runtime_leases(expires_at);
CREATE TABLE response_turns (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT NOT NULL,
	local_turn_id TEXT NOT NULL,
	message_id INTEGER,
	request_id TEXT,
	response_id TEXT,
	previous_response_id TEXT,
	conversation_id TEXT,
	provider TEXT NOT NULL,
	api TEXT NOT NULL,
	model TEXT NOT NULL,
	state_mode TEXT NOT NULL,
	status TEXT NOT NULL,
	incomplete_reason TEXT,
	request_summary_json BLOB,
	response_summary_json BLOB,
	created_at DATETIME NOT NULL,
	completed_at DATETIME,
	UNIQUE(session_id, local_turn_id)
);
CREATE INDEX idx_response_turns_session_id ON response_turns(session_id);
CREATE INDEX idx_response_turns_response_id ON response_turns(response_id);
CREATE TABLE response_items (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT NOT NULL,
	local_turn_id TEXT NOT NULL,
	response_id TEXT,
	item_id TEXT,
	output_index INTEGER NOT NULL,
	item_type TEXT NOT NULL,
	item_status TEXT,
	item_key TEXT NOT NULL,
	sanitized_json BLOB NOT NULL,
	created_at DATETIME NOT NULL,
	updated_at DATETIME
);
CREATE INDEX idx_response_items_session_turn ON response_items(session_id, local_turn_id);
CREATE INDEX idx_response_items_response_id ON response_items(response_id);
CREATE UNIQUE INDEX idx_response_items_identity ON response_items(session_id, local_turn_id, item_key);
CREATE TABLE tool_execution_records (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT NOT NULL,
	local_turn_id TEXT NOT NULL,
	execution_key TEXT NOT NULL,
	provider TEXT NOT NULL,
	api TEXT NOT NULL,
	response_id TEXT,
	provider_call_id TEXT,
	tool_kind TEXT NOT NULL,
	tool_name TEXT NOT NULL,
	args_hash TEXT NOT NULL,
	execution_state TEXT NOT NULL,
	result_summary_json BLOB,
	provider_metadata_json BLOB,
	side_effecting BOOLEAN NOT NULL,
	created_at DATETIME NOT NULL,
	completed_at DATETIME,
	UNIQUE(execution_key)
);
CREATE INDEX idx_tool_execution_records_session_turn ON tool_execution_records(session_id, local_turn_id);
CREATE INDEX idx_tool_execution_records_provider_call ON tool_execution_records(provider, api, provider_call_id);
CREATE TABLE response_runs (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT NOT NULL,
	local_run_id TEXT NOT NULL,
	local_turn_id TEXT NOT NULL DEFAULT '',
	message_id INTEGER,
	response_id TEXT,
	provider TEXT NOT NULL,
	api TEXT NOT NULL,
	state TEXT NOT NULL,
	polling_url TEXT,
	last_event_sequence INTEGER,
	cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
	created_at DATETIME NOT NULL,
	updated_at DATETIME NOT NULL,
	UNIQUE(session_id, local_run_id)
);
CREATE INDEX idx_response_runs_session_id ON response_runs(session_id);
CREATE INDEX idx_response_runs_state ON response_runs(state);
CREATE INDEX idx_response_runs_session_turn ON response_runs(session_id, local_turn_id);
CREATE TABLE response_session_state (
	session_id TEXT PRIMARY KEY,
	state_mode TEXT NOT NULL DEFAULT 'replay',
	previous_response_id TEXT,
	conversation_id TEXT,
	provider TEXT NOT NULL DEFAULT '',
	api TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '',
	version INTEGER NOT NULL DEFAULT 0,
	updated_at DATETIME NOT NULL
);
CREATE TABLE cron_jobs (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL DEFAULT '',
	name TEXT NOT NULL DEFAULT '',
	prompt TEXT NOT NULL DEFAULT '',
	schedule TEXT NOT NULL DEFAULT '',
	oneshot INTEGER NOT NULL DEFAULT 0,
	mode TEXT NOT NULL DEFAULT 'yolo',
	work_dir TEXT NOT NULL DEFAULT '',
	a2a_target TEXT NOT NULL DEFAULT '',
	a2a_token TEXT NOT NULL DEFAULT '',
	enabled INTEGER NOT NULL DEFAULT 1,
	created_at TEXT NOT NULL,
	last_run TEXT NOT NULL DEFAULT '',
	next_run TEXT NOT NULL DEFAULT '',
	run_count INTEGER NOT NULL DEFAULT 0,
	last_status TEXT NOT NULL DEFAULT '',
	last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_cron_jobs_session_id ON cron_jobs(session_id);
CREATE INDEX idx_cron_jobs_enabled ON cron_jobs(enabled);
CREATE INDEX idx_cron_jobs_next_run ON cron_jobs(next_run);
CREATE INDEX idx_cron_jobs_created_at ON cron_jobs(created_at);
CREATE TABLE session_esm_objectives (
	session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	esm_id TEXT NOT NULL,
	objective TEXT NOT NULL,
	status TEXT NOT NULL,
	token_budget INTEGER,
	tokens_used INTEGER NOT NULL DEFAULT 0,
	time_used_ms INTEGER NOT NULL DEFAULT 0,
	blocked_count INTEGER NOT NULL DEFAULT 0,
	blocked_reason TEXT NOT NULL DEFAULT '',
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	blocked_run_id TEXT NOT NULL DEFAULT '',
	completion_reason TEXT NOT NULL DEFAULT '',
	completion_run_id TEXT NOT NULL DEFAULT '',
	completion_review TEXT NOT NULL DEFAULT '',
	phase TEXT NOT NULL DEFAULT '',
	progress_summary TEXT NOT NULL DEFAULT '',
	remaining_work TEXT NOT NULL DEFAULT '[]',
	completion_rejection_count INTEGER NOT NULL DEFAULT 0,
	completion_rejection_run_id TEXT NOT NULL DEFAULT '',
	recovery_count INTEGER NOT NULL DEFAULT 0,
	recovery_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_session_esm_objectives_status ON session_esm_objectives(status);
CREATE TABLE sub_session (
	id TEXT PRIMARY KEY,
	cwd TEXT,
	timestamp TEXT,
	parent_session TEXT,
	version INTEGER,
	channel_type TEXT NOT NULL DEFAULT 'local',
	channel_id TEXT NOT NULL DEFAULT '',
	fork_boundary_seq INTEGER NOT NULL DEFAULT 0,
	seed_length INTEGER NOT NULL DEFAULT 0,
	fork_kind TEXT NOT NULL DEFAULT '',
	expert_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE sub_entries (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	session_id TEXT REFERENCES sub_session(id) ON DELETE CASCADE,
	id TEXT UNIQUE,
	type TEXT NOT NULL,
	parent_id TEXT,
	timestamp TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX idx_sub_entries_session_id ON sub_entries(session_id);
CREATE INDEX idx_sub_entries_type ON sub_entries(type);
CREATE INDEX idx_sub_session_cwd ON sub_session(cwd);

-- =====================================================================
