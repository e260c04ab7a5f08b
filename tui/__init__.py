"""Sessionscope's terminal UI (Textual). Calls the store only."""
