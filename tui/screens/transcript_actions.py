"""The Transcript screen's actions, registered in the one action registry (:mod:`tui.actions`).

Kept apart from the screen so the registry can know these ids (for ``keymap.toml``, help and the palette)
without importing the screen: this module imports nothing but :mod:`tui.actions`.
"""

from __future__ import annotations

from tui import actions
from tui.actions import ActionSpec

# The transcript and raw-entries views (the focused widget)
_A = actions.register
_A(ActionSpec("transcript-view.line-down", "scroll_lines(1)", "j", "Line down", "Scroll down one line.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.line-up", "scroll_lines(-1)", "k", "Line up", "Scroll up one line.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.next-block", "cursor(1)", "down", "Next block", "Move the cursor to the next block.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.prev-block", "cursor(-1)", "up", "Previous block", "Move the cursor to the previous block.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.page-down", "page(1)", "space,pagedown", "Page down", "Scroll down one screen.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.page-up", "page(-1)", "b,pageup", "Page up", "Scroll up one screen.", "transcript-view", show=False, palette=False))
_A(ActionSpec("transcript-view.first", "first", "g,home", "First", "Jump to the first entry.", "transcript-view"))
_A(ActionSpec("transcript-view.last", "last", "G,end", "Last", "Jump to the last entry.", "transcript-view"))

# The Transcript screen
_A(ActionSpec("transcript.raw", "toggle_raw", "R,tab", "Raw", "Switch between the replay and every raw entry row.", "transcript", key_display="R"))
_A(ActionSpec("transcript.next-turn", "next_turn", "n", "Next turn", "Jump to the next turn start.", "transcript"))
_A(ActionSpec("transcript.prev-turn", "prev_turn", "p", "Prev turn", "Jump to the previous turn start.", "transcript"))
_A(ActionSpec("transcript.next-marker", "next_marker", "right_square_bracket", "Next marker", "Jump to the next compaction or override.", "transcript", show=False, key_display="]"))
_A(ActionSpec("transcript.prev-marker", "prev_marker", "left_square_bracket", "Prev marker", "Jump to the previous compaction or override.", "transcript", show=False, key_display="["))
_A(ActionSpec("transcript.copy", "copy", "y", "Copy", "Copy the block under the cursor to the clipboard.", "transcript"))
_A(ActionSpec("transcript.export", "export", "e", "Export", "Write the transcript to a Markdown or JSON file outside the session directory.", "transcript"))
del _A

# Following a live session (the Transcript screen and the native transcript screen)
_A = actions.register
_A(ActionSpec("transcript.follow", "toggle_follow", "F", "Follow", "Follow the live session: show entries other processes append (on by default).", "transcript"))

# The native transcript view (Claude Code / Codex records); b is left to the screen (switch branch)
_A(ActionSpec("native-view.line-down", "scroll_lines(1)", "j", "Line down", "Scroll down one line.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.line-up", "scroll_lines(-1)", "k", "Line up", "Scroll up one line.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.next-block", "cursor(1)", "down", "Next block", "Move the cursor to the next record.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.prev-block", "cursor(-1)", "up", "Previous block", "Move the cursor to the previous record.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.page-down", "page(1)", "space,pagedown", "Page down", "Scroll down one screen.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.page-up", "page(-1)", "pageup", "Page up", "Scroll up one screen.", "native-view", show=False, palette=False))
_A(ActionSpec("native-view.first", "first", "g,home", "First", "Jump to the first record.", "native-view"))
_A(ActionSpec("native-view.last", "last", "G,end", "Last", "Jump to the last record.", "native-view"))

# The native transcript screen
_A(ActionSpec("native-transcript.branch", "switch_branch", "b", "Branch", "Show the next branch of the rewind nearest the cursor.", "native-transcript"))
_A(ActionSpec("native-transcript.open", "open_subagent", "enter", "Sub-agent", "Open the sub-agent transcript of the Task call under the cursor.", "native-transcript"))
_A(ActionSpec("native-transcript.raw", "toggle_raw", "R,tab", "Raw", "Switch between the records as blocks and the file's numbered lines.", "native-transcript", key_display="R"))
_A(ActionSpec("native-transcript.next-marker", "next_marker", "right_square_bracket", "Next marker", "Jump to the next fork, compaction, summary, unreadable line or interrupted call.", "native-transcript", show=False, key_display="]"))
_A(ActionSpec("native-transcript.prev-marker", "prev_marker", "left_square_bracket", "Prev marker", "Jump to the previous fork, compaction, summary, unreadable line or interrupted call.", "native-transcript", show=False, key_display="["))
_A(ActionSpec("native-transcript.follow", "toggle_follow", "F", "Follow", "Follow the agent's file: records it appends show up (on by default).", "native-transcript"))
_A(ActionSpec("native-transcript.copy", "copy", "y", "Copy", "Copy the record under the cursor to the clipboard.", "native-transcript"))
_A(ActionSpec("native-transcript.export", "export", "e", "Export", "Write the shown branch to a Markdown or JSON file outside the session directory.", "native-transcript"))
del _A
