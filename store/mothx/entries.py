"""Entries of one session and their replay (reference section 7), paged by ``seq``.

Three ways to read a session's entries:

* :func:`load_rows` / :func:`replay` read every row and run :func:`replay_state`, the pure, exact replay of
  reference 7.4/7.5 (the sequence-numbered variant). Export and the command line use them.
* :func:`replay_plan` + :func:`replay_page` let a screen open a 50,000-entry session by reading only what it
  shows: the plan reads the ``compaction`` and ``content_override`` rows (index ``(session_id, type)``), one
  row per compaction and index-only counts; a page reads ``limit`` message rows by keyset on ``seq``.
  Pages put together equal :func:`replay` exactly (the property tests check this). ``verify=True`` makes
  the plan's counts exact with one SQL pass over the session's data (for a background worker).
* :func:`rows_page` pages the raw rows of every type (the raw view), :func:`turn_markers` lists turns.

The code lives in four modules; this one keeps every name reachable as ``store.mothx.entries.X``:

* :mod:`store.mothx.entry_model`: messages, blocks, entry rows, JSON parsing, :func:`describe_row`;
* :mod:`store.mothx.entry_replay`: the pure replay (:func:`replay_details`) and its result types;
* :mod:`store.mothx.entry_reads`: the database reads (rows, plan, pages, turn markers);
* :mod:`store.mothx.entry_export`: Markdown and JSON exports.

Decisions where the reference is silent (each is also what the tests' reference replay does):

* A row "parses" when its ``data`` is a JSON object by RFC 8259 (``NaN``/``Infinity`` are refused, as mothx's
  Go decoder refuses them; numbers too big for Python are kept as their digits). Other rows, and rows of a
  foreign layout whose ``seq`` is no integer, are skipped and counted as corrupt.
* An entry's identity and type come from its JSON ``id``/``type`` when they are strings, otherwise from the
  row's ``id``/``type`` columns.
* A ``content_override`` counts only when ``targetEntryId`` is a string and ``message`` a JSON object.
* ``firstKeptEntryId`` missing or ``null`` counts as ``""``; any other non-string value is never found, so
  such a compaction is skipped (the full history is kept rather than dropped on a malformed entry).
"""

from __future__ import annotations

from store.mothx.entry_export import export_json, export_markdown
from store.mothx.entry_model import (
    END_SEQ,
    ENTRY_TYPES,
    NOT_LOADED_TYPES,
    REPLAY_TYPES,
    Block,
    EntryRow,
    JsonObject,
    Message,
    ToolCall,
    describe_row,
    make_row,
    parse_entry_data,
    row_from_cells,
)
from store.mothx.entry_reads import (
    last_message_seq,
    load_rows,
    replay,
    replay_page,
    replay_plan,
    require_entries,
    row_count,
    rows_page,
    turn_markers,
)
from store.mothx.entry_replay import (
    CompactionInfo,
    ReplayDetails,
    ReplayMessage,
    ReplayPlan,
    replay_details,
    replay_state,
    summary_message,
)

__all__ = [
    "END_SEQ", "ENTRY_TYPES", "NOT_LOADED_TYPES", "REPLAY_TYPES", "Block", "EntryRow", "JsonObject", "Message",
    "ToolCall", "describe_row", "make_row", "parse_entry_data", "row_from_cells", "load_rows", "replay",
    "last_message_seq", "replay_page", "replay_plan", "require_entries", "row_count", "rows_page", "turn_markers", "CompactionInfo",
    "ReplayDetails", "ReplayMessage", "ReplayPlan", "replay_details", "replay_state", "summary_message",
    "export_json", "export_markdown",
]
