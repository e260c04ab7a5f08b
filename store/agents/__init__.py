"""External agents (Claude Code, Codex): their native JSONL transcripts, captured checkpoints, the session log."""
