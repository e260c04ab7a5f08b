"""The one registry of the app's actions, and the registry of top-level sections.

Every key the app answers to is declared here once, as an :class:`ActionSpec`: its id (the name users remap in
``config.toml``'s ``[keymap]``), its default key, a description (footer and help) and a tooltip (footer hover, help, palette).
From this one table (:data:`ACTIONS`) come the ``BINDINGS`` of the app, screens and widgets (:func:`bindings`),
the user keymap (:func:`load_keymap`, checked by :func:`unknown_ids`), the help screen, the README's key map
(:mod:`tui.keymapdoc`) and the command palette. Adding an action is one row of :data:`ACTIONS`.

Each screen or widget that owns a scope says so with a class variable ``ACTION_SCOPE = "<scope>"`` and takes
``BINDINGS = actions.bindings("<scope>")``; the palette finds the nodes of the current screen that declare a
scope and offers their actions. The scopes and their titles are :data:`SCOPES`; the top-level sections (the
``:`` jump) are :data:`SECTIONS`, naming their screen by module and class (strings: this module imports no
screen, and nothing registers itself on import).

Actions that write (repairs) carry ``writes=True``: in the two read modes :func:`check_write` makes
``check_action()`` return ``None``, so the key is shown dimmed and does not run; pressed, it says why in one line
(:func:`write_refusal`, shown by the app for every dimmed key: a node may name its own reason with a method
``why_disabled(action) -> str``). The store refuses the write again on its own
(``SessionDir.require_writable``); the keys are only the first fence.

This module imports nothing from Textual but :class:`textual.binding.Binding` (cheap) and nothing of the app,
so the keymap and the registry can be read and tested without starting an app.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.binding import Binding, BindingType

Scope = str
"""Where an action's binding lives: "app", "sessions", "session-list", "transcript", … (one per node type)."""

@dataclass(frozen=True)
class ScopeSpec:
    """A scope: the node type whose ``BINDINGS`` hold its actions, and the title help and the README give it."""

    id: Scope
    title: str


SCOPES: tuple[ScopeSpec, ...] = (
    ScopeSpec("app", "Everywhere"),
    ScopeSpec("sessions", "Sessions screen"),
    ScopeSpec("session-list", "Session list"),
    ScopeSpec("transcript", "Transcript screen"),
    ScopeSpec("transcript-view", "Transcript view"),
    ScopeSpec("runs", "Runs screen"),
    ScopeSpec("run-list", "Run list"),
    ScopeSpec("run-timeline", "Run-event timeline"),
    ScopeSpec("deliveries", "Deliveries screen"),
    ScopeSpec("delivery-list", "Delivery list"),
    ScopeSpec("checkpoints", "Checkpoints screen"),
    ScopeSpec("checkpoint-list", "Checkpoint list"),
    ScopeSpec("native-transcript", "Native transcript screen (Claude Code, Codex)"),
    ScopeSpec("native-view", "Native transcript view"),
    ScopeSpec("prompt", "Text prompt"),
    ScopeSpec("forks", "Forks screen"),
    ScopeSpec("fork-list", "Fork family and boundary lists"),
    ScopeSpec("search", "Search screen"),
    ScopeSpec("search-list", "Search hits"),
    ScopeSpec("welcome", "Welcome screen"),
    ScopeSpec("help", "Help"),
    ScopeSpec("confirm", "Confirm dialog"),
    ScopeSpec("tool-pick", "Tool-call picker"),
    ScopeSpec("health", "Health screen"),
    ScopeSpec("health-list", "Health checks"),
    ScopeSpec("knowledge", "Knowledge screen"),
    ScopeSpec("kb-list", "Knowledge lists"),
    ScopeSpec("kb-query", "Knowledge query box"),
    ScopeSpec("usage", "Usage screen"),
    ScopeSpec("usage-list", "Usage groups"),
)
"""Every scope, in the order help and the README list them."""

SCOPE_TITLES: dict[str, str] = {scope.id: scope.title for scope in SCOPES}


@dataclass(frozen=True)
class ActionSpec:
    """One action of the app: what a key does, under which id users remap it."""

    id: str  # binding id, "<scope>.<name>"; the name users write in config.toml [keymap]
    action: str  # the Textual action string run by the key, e.g. "cursor_down" or "app.quit"
    key: str  # default key(s), Textual key names, comma separated
    description: str  # short: footer and help
    tooltip: str  # one sentence: footer tooltip, help, palette
    scope: Scope
    show: bool = True  # shown in the footer
    writes: bool = False  # a repair: blocked in the read modes
    priority: bool = False
    key_display: str | None = None
    palette: bool = True  # offered in the command palette

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.description,
            show=self.show,
            key_display=self.key_display,
            priority=self.priority,
            tooltip=self.tooltip,
            id=self.id,
        )


# --- the actions -----------------------------------------------------------------------------------------------

# The confirm dialog: an action that opens it must use another key than confirm.apply (see tui.widgets.confirm).
# Keys of writes (writes=True): never a key pressed by habit (a lowercase letter, r/R, enter, space, tab, esc),
# and no other action of any screen uses them (tests/tui/test_key_meanings.py holds the rule). One meaning per
# key across screens where possible: R is Runs (Sessions, Transcript), tab is Raw (both transcripts).
ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec('app.help', 'help', 'question_mark,f1', 'Help', 'Show the keys of the focused widget, this screen and the app.', 'app'),
    ActionSpec('app.palette', 'command_palette', 'ctrl+p', 'Palette', 'Open the command palette: every action, themes, open a session.', 'app', show=False, priority=True, palette=False),
    ActionSpec('app.jump', 'jump', 'colon', 'Jump', 'Jump to a section (Sessions, …).', 'app'),
    ActionSpec('app.theme-cycle', 'cycle_theme', 'ctrl+t', 'Theme', 'Switch to the next theme; the choice is remembered.', 'app', show=False),
    ActionSpec('app.export-list-csv', 'export_list("csv")', 'E', 'List to CSV', "Write every row of this screen's list to a CSV file in your home folder (the path is copied).", 'app', show=False),
    ActionSpec('app.export-list-json', 'export_list("json")', 'J', 'List to JSON', "Write every row of this screen's list to a JSON file in your home folder (the path is copied).", 'app', show=False),
    ActionSpec('app.back', 'back', 'escape', 'Back', 'Close this screen and go back.', 'app', show=False),
    ActionSpec('app.quit', 'quit', 'q', 'Quit', 'Quit Sessionscope.', 'app'),
    ActionSpec('app.force-quit', 'quit', 'ctrl+q', 'Quit', 'Quit Sessionscope from anywhere, even while typing.', 'app', show=False, priority=True, palette=False),
    ActionSpec('sessions.filter', 'filter', 'slash', 'Filter', 'Type to filter sessions by id, work dir, channel or text.', 'sessions'),
    ActionSpec('sessions.clear-filter', 'clear_filter', 'escape', 'Clear', 'Clear the filter and facet; close the filter box.', 'sessions', show=False),
    ActionSpec('sessions.sort', 'cycle_sort', 's', 'Sort', 'Sort by the next key: last active, title, messages, work dir, created.', 'sessions'),
    ActionSpec('sessions.reverse', 'reverse_sort', 'S', 'Reverse', 'Reverse the sort order.', 'sessions', show=False),
    ActionSpec('sessions.facet', 'pick_facet', 'f', 'Facet', 'Show only one work dir, project or channel.', 'sessions'),
    ActionSpec('sessions.refresh', 'refresh', 'r', 'Refresh', 'Re-read the list from the database, keeping the cursor.', 'sessions'),
    ActionSpec('list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one row.', 'session-list', show=False, palette=False),
    ActionSpec('list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one row.', 'session-list', show=False, palette=False),
    ActionSpec('list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first session.', 'session-list', show=False),
    ActionSpec('list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last session.', 'session-list', show=False),
    ActionSpec('list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'session-list', show=False, palette=False),
    ActionSpec('list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'session-list', show=False, palette=False),
    ActionSpec('list.open', 'open', 'enter', 'Open', 'Open the session under the cursor as a transcript.', 'session-list'),
    ActionSpec('welcome.demo', 'open_demo', 'd', 'Open demo', 'Build (or reuse) the demo session directory and open it read-write.', 'welcome'),
    ActionSpec('help.close', 'close', 'escape,question_mark,q', 'Close', 'Close the help.', 'help', palette=False),
    ActionSpec('confirm.cancel', 'cancel', 'escape,n', 'Cancel', 'Close the dialog without changing anything.', 'confirm', palette=False),
    ActionSpec('confirm.apply', 'confirm', 'y', 'Apply', 'Apply the change shown in the dialog.', 'confirm', palette=False),
    ActionSpec('sessions.copy', 'copy', 'y', 'Copy', "Copy the session id (a captured session: the agent's own resume command, e.g. claude --resume ID in its work dir).", 'sessions'),
    ActionSpec('sessions.runs', 'session_runs', 'R', 'Runs', 'Show the runs, leases and recovery records of the session under the cursor.', 'sessions'),
    ActionSpec('sessions.search', 'open_search', 'ctrl+f', 'Search', 'Ranked full-text search over every entry (or every captured record), best match first.', 'sessions'),
    ActionSpec('search.query', 'focus_query', 'slash', 'Query', 'Type the search: words, "a phrase", prefix*; the hits follow as you type.', 'search'),
    ActionSpec('search.captured', 'toggle_captured', 'c', 'Captured', 'Search the captured Claude Code and Codex records instead of mothx sessions, or back.', 'search'),
    ActionSpec('search-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one hit.', 'search-list', show=False, palette=False),
    ActionSpec('search-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one hit.', 'search-list', show=False, palette=False),
    ActionSpec('search-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the best hit.', 'search-list', show=False),
    ActionSpec('search-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last hit read so far.', 'search-list', show=False),
    ActionSpec('search-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'search-list', show=False, palette=False),
    ActionSpec('search-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'search-list', show=False, palette=False),
    ActionSpec('search-list.open', 'open', 'enter', 'Open', 'Open the transcript of the hit at the matching message.', 'search-list'),
    ActionSpec('sessions.source', 'cycle_source', 'a', 'Source', 'Switch the list between mothx sessions and the captured Claude Code and Codex sessions.', 'sessions'),
    ActionSpec('transcript-view.line-down', 'scroll_lines(1)', 'j', 'Line down', 'Scroll down one line.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.line-up', 'scroll_lines(-1)', 'k', 'Line up', 'Scroll up one line.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.next-block', 'cursor(1)', 'down', 'Next block', 'Move the cursor to the next block.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.prev-block', 'cursor(-1)', 'up', 'Previous block', 'Move the cursor to the previous block.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.page-down', 'page(1)', 'space,pagedown', 'Page down', 'Scroll down one screen.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.page-up', 'page(-1)', 'b,pageup', 'Page up', 'Scroll up one screen.', 'transcript-view', show=False, palette=False),
    ActionSpec('transcript-view.first', 'first', 'g,home', 'First', 'Jump to the first entry.', 'transcript-view'),
    ActionSpec('transcript-view.last', 'last', 'G,end', 'Last', 'Jump to the last entry.', 'transcript-view'),
    ActionSpec('transcript.raw', 'toggle_raw', 'tab', 'Raw', 'Switch between the replay and every raw entry row.', 'transcript', key_display='tab'),
    ActionSpec('transcript.runs', 'session_runs', 'R', 'Runs', 'Show the runs, leases and recovery records of this session (esc comes back here).', 'transcript'),
    ActionSpec('transcript.parent', 'open_parent', 'o', 'Parent', 'A fork: open the session it was seeded from, at the last entry the fork copied.', 'transcript', show=False),
    ActionSpec('transcript.next-turn', 'next_turn', 'n', 'Next turn', 'Jump to the next turn start.', 'transcript'),
    ActionSpec('transcript.prev-turn', 'prev_turn', 'p', 'Prev turn', 'Jump to the previous turn start.', 'transcript'),
    ActionSpec('transcript.next-marker', 'next_marker', 'right_square_bracket', 'Next marker', 'Jump to the next compaction or override.', 'transcript', show=False, key_display=']'),
    ActionSpec('transcript.prev-marker', 'prev_marker', 'left_square_bracket', 'Prev marker', 'Jump to the previous compaction or override.', 'transcript', show=False, key_display='['),
    ActionSpec('transcript.copy', 'copy', 'y', 'Copy', 'Copy the block under the cursor to the clipboard.', 'transcript'),
    ActionSpec('transcript.export', 'export', 'e', 'Export', 'Write the transcript to a Markdown or JSON file outside the session directory.', 'transcript'),
    ActionSpec('transcript.follow', 'toggle_follow', 'F', 'Follow', 'Follow the live session: show entries other processes append (on by default).', 'transcript'),
    ActionSpec('native-view.line-down', 'scroll_lines(1)', 'j', 'Line down', 'Scroll down one line.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.line-up', 'scroll_lines(-1)', 'k', 'Line up', 'Scroll up one line.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.next-block', 'cursor(1)', 'down', 'Next block', 'Move the cursor to the next record.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.prev-block', 'cursor(-1)', 'up', 'Previous block', 'Move the cursor to the previous record.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.page-down', 'page(1)', 'space,pagedown', 'Page down', 'Scroll down one screen.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.page-up', 'page(-1)', 'pageup', 'Page up', 'Scroll up one screen.', 'native-view', show=False, palette=False),
    ActionSpec('native-view.first', 'first', 'g,home', 'First', 'Jump to the first record.', 'native-view'),
    ActionSpec('native-view.last', 'last', 'G,end', 'Last', 'Jump to the last record.', 'native-view'),
    ActionSpec('native-transcript.branch', 'switch_branch', 'b', 'Branch', 'Show the next branch of the rewind nearest the cursor.', 'native-transcript'),
    ActionSpec('native-transcript.open', 'open_subagent', 'enter', 'Sub-agent', 'Open the sub-agent transcript of the Task call under the cursor.', 'native-transcript'),
    ActionSpec('native-transcript.raw', 'toggle_raw', 'tab', 'Raw', "Switch between the records as blocks and the file's numbered lines.", 'native-transcript', key_display='tab'),
    ActionSpec('native-transcript.next-marker', 'next_marker', 'right_square_bracket', 'Next marker', 'Jump to the next fork, compaction, summary, unreadable line or interrupted call.', 'native-transcript', show=False, key_display=']'),
    ActionSpec('native-transcript.prev-marker', 'prev_marker', 'left_square_bracket', 'Prev marker', 'Jump to the previous fork, compaction, summary, unreadable line or interrupted call.', 'native-transcript', show=False, key_display='['),
    ActionSpec('native-transcript.follow', 'toggle_follow', 'F', 'Follow', "Follow the agent's file: records it appends show up (on by default).", 'native-transcript'),
    ActionSpec('native-transcript.copy', 'copy', 'y', 'Copy', 'Copy the record under the cursor to the clipboard.', 'native-transcript'),
    ActionSpec('native-transcript.export', 'export', 'e', 'Export', 'Write the shown branch to a Markdown or JSON file outside the session directory.', 'native-transcript'),
    ActionSpec('checkpoint-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one row.', 'checkpoint-list', show=False, palette=False),
    ActionSpec('checkpoint-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one row.', 'checkpoint-list', show=False, palette=False),
    ActionSpec('checkpoint-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first checkpoint.', 'checkpoint-list', show=False),
    ActionSpec('checkpoint-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last checkpoint.', 'checkpoint-list', show=False),
    ActionSpec('checkpoint-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'checkpoint-list', show=False, palette=False),
    ActionSpec('checkpoint-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'checkpoint-list', show=False, palette=False),
    ActionSpec('checkpoint-list.open', 'open', 'enter', 'Open', 'Read the checkpoint under the cursor as a transcript.', 'checkpoint-list'),
    ActionSpec('checkpoints.verify', 'verify', 'v', 'Verify', 'Compare the selected checkpoint with its files on disk now (writes nothing).', 'checkpoints'),
    ActionSpec('checkpoints.verify-all', 'verify_all', 'V', 'Verify all', 'Compare every listed checkpoint with its files on disk now (writes nothing).', 'checkpoints'),
    ActionSpec('checkpoints.reset', 'reset', 'ctrl+r', 'Reset', 'Publish a reset for the selected checkpoint after a preview: the next capture stores its files afresh.', 'checkpoints', writes=True),
    ActionSpec('checkpoints.refresh', 'refresh', 'r', 'Refresh', 'Re-read the checkpoints, keeping the cursor and the proofs.', 'checkpoints'),
    ActionSpec('checkpoints.export-repaired', 'export_repaired', 'x', 'Repaired copy', "Write a new copy of the selected session's transcript with every interrupted call closed by a synthetic 'interrupted' result (the original is never modified).", 'checkpoints'),
    ActionSpec('runs-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one run.', 'run-list', show=False, palette=False),
    ActionSpec('runs-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one run.', 'run-list', show=False, palette=False),
    ActionSpec('runs-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first run.', 'run-list', show=False),
    ActionSpec('runs-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last run read so far.', 'run-list', show=False),
    ActionSpec('runs-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'run-list', show=False, palette=False),
    ActionSpec('runs-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'run-list', show=False, palette=False),
    ActionSpec('runs-list.open', 'open', 'enter', 'Transcript', "Open the transcript of the run's session.", 'run-list'),
    ActionSpec('timeline.down', 'scroll_down', 'j,down', 'Down', 'Scroll the timeline down.', 'run-timeline', show=False, palette=False),
    ActionSpec('timeline.up', 'scroll_up', 'k,up', 'Up', 'Scroll the timeline up.', 'run-timeline', show=False, palette=False),
    ActionSpec('timeline.top', 'scroll_home', 'g,home', 'Top', 'Go to the first event.', 'run-timeline', show=False),
    ActionSpec('timeline.bottom', 'scroll_end', 'G,end', 'Bottom', 'Go to the last event read.', 'run-timeline', show=False),
    ActionSpec('runs.recover', 'recover_run', 'X', 'Recover', 'Recover the orphaned run under the cursor as the runtime would, after a preview.', 'runs', writes=True),
    ActionSpec('runs.abandon-tools', 'abandon_tools', 'T', 'Abandon tools', "Pick interrupted tool calls of the run's session and mark them abandoned; nothing is run again.", 'runs', writes=True),
    ActionSpec('runs.release-lease', 'release_lease', 'L', 'Release lease', 'Release the expired lease of the session under the cursor, after a preview.', 'runs', writes=True),
    ActionSpec('runs.orphaned', 'toggle_orphaned', 'o', 'Orphaned', 'Show only orphaned runs and failed recoveries, or every run again.', 'runs'),
    ActionSpec('runs.scope', 'toggle_scope', 'a', 'All/one', "Switch between every session's runs and the runs of the session under the cursor.", 'runs'),
    ActionSpec('runs.refresh', 'refresh', 'r', 'Refresh', 'Re-read the runs from the database, keeping the cursor.', 'runs'),
    ActionSpec('runs.copy', 'copy_run_id', 'y', 'Copy id', 'Copy the id of the run under the cursor to the clipboard.', 'runs', show=False),
    ActionSpec('health.fix', 'fix_selected', 'X', 'Repair', 'Preview the repair that fixes the selected check, then apply it after confirming.', 'health', writes=True),
    ActionSpec('health.integrity', 'integrity_check', 'i', 'Integrity', 'Run the long integrity check (reads every page) with a progress bar; esc cancels it.', 'health'),
    ActionSpec('health.cancel', 'cancel_check', 'escape', 'Cancel/back', 'Cancel the running integrity check; with none running, go back.', 'health', show=False),
    ActionSpec('health.refresh', 'refresh', 'r', 'Refresh', 'Run every check again.', 'health'),
    ActionSpec('health.copy', 'copy_repair', 'y', 'Copy repair', 'Copy the repair command of the selected check to the clipboard.', 'health', show=False),
    ActionSpec('health-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one check.', 'health-list', show=False, palette=False),
    ActionSpec('health-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one check.', 'health-list', show=False, palette=False),
    ActionSpec('health-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first check.', 'health-list', show=False),
    ActionSpec('health-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last check.', 'health-list', show=False),
    ActionSpec('health-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'health-list', show=False, palette=False),
    ActionSpec('health-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'health-list', show=False, palette=False),
    ActionSpec('delivery-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one operation.', 'delivery-list', show=False, palette=False),
    ActionSpec('delivery-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one operation.', 'delivery-list', show=False, palette=False),
    ActionSpec('delivery-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first operation.', 'delivery-list', show=False),
    ActionSpec('delivery-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last operation read so far.', 'delivery-list', show=False),
    ActionSpec('delivery-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'delivery-list', show=False, palette=False),
    ActionSpec('delivery-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'delivery-list', show=False, palette=False),
    ActionSpec('delivery-list.open', 'open', 'enter', 'Transcript', "Open the transcript of the operation's session.", 'delivery-list'),
    ActionSpec('deliveries.retry', 'retry_delivery', 'X', 'Retry', 'Retry the failed delivery operation under the cursor after a preview (transport failures only; says why not otherwise).', 'deliveries', writes=True),
    ActionSpec('deliveries.scope', 'toggle_scope', 'a', 'All/one', "Switch between every session's deliveries and those of the session under the cursor.", 'deliveries'),
    ActionSpec('deliveries.refresh', 'refresh', 'r', 'Refresh', 'Re-read the deliveries from the database, keeping the cursor.', 'deliveries'),
    ActionSpec('deliveries.copy', 'copy_operation_id', 'y', 'Copy id', 'Copy the id of the operation under the cursor to the clipboard.', 'deliveries', show=False),
    ActionSpec('sessions.forks', 'session_forks', 'F', 'Forks', 'Show the fork family and the fork boundaries of the session under the cursor.', 'sessions'),
    ActionSpec('list.mark', 'toggle_mark', 'space', 'Mark', 'Mark or unmark the session under the cursor; delete, pin and project then act on every marked session.', 'session-list', show=False),
    ActionSpec('sessions.delete', 'delete_sessions', 'D', 'Delete', 'Delete the marked sessions (or the one under the cursor) and every row of their child tables, after a preview.', 'sessions', writes=True),
    ActionSpec('sessions.pin', 'toggle_pin', 'P', 'Pin', 'Pin the marked sessions (or the one under the cursor), or unpin them when all are pinned, after a preview.', 'sessions', writes=True),
    ActionSpec('sessions.project', 'set_project', 'A', 'Project', 'Assign the marked sessions (or the one under the cursor) to a project by name, after a preview.', 'sessions', writes=True, show=False),
    ActionSpec('sessions.rename', 'rename_session', 'N', 'Rename', 'Give the session under the cursor a new title (a session_info entry), after a preview.', 'sessions', writes=True, show=False),
    ActionSpec('prompt.cancel', 'cancel', 'escape', 'Cancel', 'Close the prompt without changing anything.', 'prompt', palette=False),
    ActionSpec('forks.fork', 'fork', 'X', 'Fork', 'Fork the session at the selected turn after a preview, then open the new session.', 'forks', writes=True),
    ActionSpec('forks.refresh', 'refresh', 'r', 'Refresh', 'Re-read the fork family and the turns.', 'forks'),
    ActionSpec('fork-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one row.', 'fork-list', show=False, palette=False),
    ActionSpec('fork-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one row.', 'fork-list', show=False, palette=False),
    ActionSpec('fork-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first row.', 'fork-list', show=False),
    ActionSpec('fork-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last row.', 'fork-list', show=False),
    ActionSpec('fork-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'fork-list', show=False, palette=False),
    ActionSpec('fork-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'fork-list', show=False, palette=False),
    ActionSpec('fork-list.open', 'open', 'enter', 'Open', 'Open the session of the row under the cursor as a transcript.', 'fork-list'),
    ActionSpec('usage.group', 'cycle_group', 'b', 'By', 'Group the usage by the next key: day, session, model, work dir.', 'usage'),
    ActionSpec('usage.by-day', 'group("day")', '1', 'By day', 'Group the usage by UTC day.', 'usage', show=False),
    ActionSpec('usage.by-session', 'group("session")', '2', 'By session', 'Group the usage by session.', 'usage', show=False),
    ActionSpec('usage.by-model', 'group("model")', '3', 'By model', 'Group the usage by model.', 'usage', show=False),
    ActionSpec('usage.by-cwd', 'group("cwd")', '4', 'By work dir', 'Group the usage by work dir.', 'usage', show=False),
    ActionSpec('usage.source', 'cycle_source', 'a', 'Source', 'Switch between every source, mothx request_stats and the captured Claude Code and Codex transcripts.', 'usage'),
    ActionSpec('usage.refresh', 'refresh', 'r', 'Refresh', 'Read the usage again (request_stats, the captured transcripts and prices.toml).', 'usage'),
    ActionSpec('usage.copy', 'copy_key', 'y', 'Copy key', 'Copy the key of the selected row (day, session id, model or work dir) to the clipboard.', 'usage', show=False),
    ActionSpec('usage-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one row.', 'usage-list', show=False, palette=False),
    ActionSpec('usage-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one row.', 'usage-list', show=False, palette=False),
    ActionSpec('usage-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first row.', 'usage-list', show=False),
    ActionSpec('usage-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last row.', 'usage-list', show=False),
    ActionSpec('usage-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'usage-list', show=False, palette=False),
    ActionSpec('usage-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'usage-list', show=False, palette=False),
    ActionSpec('usage-list.open', 'open', 'enter', 'Transcript', 'Open the transcript of the session under the cursor (session rows).', 'usage-list'),
    ActionSpec('pick.toggle-all', 'toggle_all', 'ctrl+a', 'All/none', 'Select every call, or none.', 'tool-pick'),
    ActionSpec('pick.preview', 'preview', 'p', 'Preview', 'Preview abandoning the selected calls.', 'tool-pick'),
    ActionSpec('pick.cancel', 'cancel', 'escape', 'Cancel', 'Close without changing anything.', 'tool-pick'),
    ActionSpec('knowledge.query', 'focus_query', 'slash', 'Query', 'Type a query for the selected knowledge base (enter runs it).', 'knowledge'),
    ActionSpec('knowledge.candidates', 'toggle_candidates', 'c', 'Candidates', 'Also show the candidate nodes left out for want of evidence (marked dropped), or hide them.', 'knowledge'),
    ActionSpec('knowledge.refresh', 'refresh', 'r', 'Refresh', 'Re-read the knowledge bases and run the query again.', 'knowledge'),
    ActionSpec('knowledge.clear-index', 'clear_index', 'X', 'Clear index', "Clear the selected base's index (its configuration stays), after a preview.", 'knowledge', writes=True),
    ActionSpec('kb-list.down', 'cursor_down', 'j,down', 'Down', 'Move the cursor down one row.', 'kb-list', show=False, palette=False),
    ActionSpec('kb-list.up', 'cursor_up', 'k,up', 'Up', 'Move the cursor up one row.', 'kb-list', show=False, palette=False),
    ActionSpec('kb-list.top', 'cursor_top', 'g,home', 'Top', 'Go to the first row.', 'kb-list', show=False),
    ActionSpec('kb-list.bottom', 'cursor_bottom', 'G,end', 'Bottom', 'Go to the last row.', 'kb-list', show=False),
    ActionSpec('kb-list.page-down', 'page_down', 'pagedown', 'Page down', 'Move the cursor one page down.', 'kb-list', show=False, palette=False),
    ActionSpec('kb-list.page-up', 'page_up', 'pageup', 'Page up', 'Move the cursor one page up.', 'kb-list', show=False, palette=False),
    ActionSpec('kb-list.open', 'open', 'enter', 'Select', 'A base: go to the query box. A chunk, node, edge or evidence row: show its text, graph or lines.', 'kb-list'),
    ActionSpec('kb-query.older', 'history(-1)', 'up', 'Older', 'Put the previous query of this session in the box.', 'kb-query', show=False),
    ActionSpec('kb-query.newer', 'history(1)', 'down', 'Newer', 'Put the next query of this session in the box.', 'kb-query', show=False),
)
"""Every action of the app, grouped by scope in the order help, the README and the palette list them."""

_BY_ID: dict[str, ActionSpec] = {spec.id: spec for spec in ACTIONS}
if len(_BY_ID) != len(ACTIONS):  # pragma: no cover - a typo in the table above
    raise ValueError("two actions share an id")

_EXTRA: dict[str, ActionSpec] = {}
"""Actions added by tests (:func:`register`); the app itself adds none."""


def register(spec: ActionSpec) -> ActionSpec:
    """For tests only: add an action that is not in :data:`ACTIONS` (undo with :func:`unregister`)."""
    if spec.id in _BY_ID:
        raise ValueError(f"{spec.id} is an action of the app")
    _EXTRA[spec.id] = spec
    return spec


def unregister(action_id: str) -> None:
    _EXTRA.pop(action_id, None)


def get(action_id: str) -> ActionSpec:
    spec = find(action_id)
    if spec is None:
        raise KeyError(action_id)
    return spec


def find(action_id: str | None) -> ActionSpec | None:
    if not action_id:
        return None
    return _BY_ID.get(action_id) or _EXTRA.get(action_id)


def all_actions() -> list[ActionSpec]:
    return [*ACTIONS, *_EXTRA.values()]


def in_scope(scope: str) -> list[ActionSpec]:
    return [spec for spec in all_actions() if spec.scope == scope]


def bindings(scope: str) -> list[BindingType]:
    """The ``BINDINGS`` list of the node that owns ``scope``."""
    return [spec.binding() for spec in in_scope(scope)]


def _bare(action: str) -> str:
    return action.split(".", 1)[1] if action.startswith(("app.", "screen.")) else action


def spec_for_action(action: str, scope: str | None = None) -> ActionSpec | None:
    """The spec whose action string is ``action`` (``app.`` / ``screen.`` prefixes ignored)."""
    bare = _bare(action)
    for spec in all_actions():
        if _bare(spec.action) == bare and (scope is None or spec.scope == scope):
            return spec
    return None


def is_write_action(action: str) -> bool:
    spec = spec_for_action(action)
    return spec is not None and spec.writes


def check_write(action: str, writable: bool) -> bool | None:
    """For ``check_action``: ``None`` (shown dimmed, blocked) for a repair action when writes are not allowed."""
    if not writable and is_write_action(action):
        return None
    return True


READ_MODE_WORDS = {"read-only": ("Read-only", "--read-only"), "snapshot": ("Snapshot", "--snapshot")}
"""How the one-line refusal names a read mode: its word and the option that chose it."""


def write_refusal(action: str, mode: str, reason: str = "") -> str:
    """The one line a dimmed repair key says when pressed: why it cannot run here.

    ``mode`` is the open mode's value (``read-only``, ``snapshot``, ``read-write``); ``reason`` says why a
    directory opened read-write still takes no writes (an older schema)."""
    spec = spec_for_action(action)
    name = spec.description.lower() if spec is not None else _bare(action).replace("_", " ")
    word, option = READ_MODE_WORDS.get(mode, ("Read-only", reason or "writes are not allowed"))
    return f"{word} ({option}): {name} is a repair and cannot run here."


def dimmed_reason(action: str) -> str:
    """A fallback line for a dimmed key whose node gives no reason of its own."""
    spec = spec_for_action(action)
    name = spec.description if spec is not None else _bare(action).replace("_", " ")
    return f"{name} cannot act here."


# --- the user keymap -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeymapLoad:
    """What the ``[keymap]`` table asked for: the keymap to apply and one line per problem found."""

    keymap: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def parse_keymap(text: str, source: str = "config.toml") -> KeymapLoad:
    """Read ``[keymap] action_id = "key"`` from TOML text (see :func:`store.config.parse_keymap`: dotted ids bare
    or quoted, a string or a list of keys; bad values reported, not fatal). Ids are checked by
    :func:`unknown_ids`."""
    from store.config import parse_keymap as parse_table

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return KeymapLoad(problems=(f"{source} is not valid TOML: {exc}.",))
    keymap, problems = parse_table(data.get("keymap", {}), source)
    return KeymapLoad(keymap=keymap, problems=tuple(problems))


def unknown_ids(keymap: dict[str, str]) -> list[str]:
    """The ids of ``keymap`` that no action has."""
    return [action_id for action_id in keymap if find(action_id) is None]


def load_keymap(path: Path | None = None) -> KeymapLoad:
    """The ``[keymap]`` of the configuration file (``config.toml``; see :mod:`store.config`) with its problems."""
    from store import config

    loaded = config.load(path)
    return KeymapLoad(keymap=dict(loaded.keymap), problems=loaded.problems)


def keymap_path() -> Path:
    """Where the keymap is written: the configuration file's ``[keymap]`` table."""
    from store.config import config_path

    return config_path()


# --- sections (the ':' jump) -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A top-level section of the app: its screen is ``module``'s class ``class_name``, imported when first shown
    (by the app: see ``SessionscopeApp.open_section``)."""

    id: str
    title: str
    description: str
    module: str
    class_name: str


SECTIONS: tuple[Section, ...] = (
    Section("sessions", "Sessions", "Every session: filter, sort, open a transcript.",
            "tui.screens.sessions", "SessionsScreen"),
    Section("runs", "Runs", "Active and recent runs, leases, recovery: recover orphans, release leases.",
            "tui.screens.runs", "RunsScreen"),
    Section("deliveries", "Deliveries", "Failed and uncertain delivery operations by platform and target: retry transport failures.",
            "tui.screens.deliveries", "DeliveriesScreen"),
    Section("checkpoints", "Checkpoints", "External-agent checkpoints: verify, publish a reset.",
            "tui.screens.checkpoints", "CheckpointsScreen"),
    Section("health", "Health", "Database, leases, orphans, deliveries, event stores, space: checks and repairs.",
            "tui.screens.health", "HealthScreen"),
    Section("forks", "Forks", "A session's fork family and its turns as fork boundaries: fork at a turn.",
            "tui.screens.forks", "ForksScreen"),
    Section("knowledge", "Knowledge", "Knowledge bases: query the chunks, the graph around them and its evidence.",
            "tui.screens.knowledge", "KnowledgeScreen"),
    Section("search", "Search", "Ranked full-text search over every entry and captured record.",
            "tui.screens.search", "SearchScreen"),
    Section("usage", "Usage", "Tokens and cost per day, session, model and work dir, from request_stats and captured transcripts.",
            "tui.screens.usage", "UsageScreen"),
)


def sections() -> list[Section]:
    return list(SECTIONS)
