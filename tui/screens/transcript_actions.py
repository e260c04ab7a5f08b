"""Empty: the Transcript screen's actions are rows of the one action table, :data:`tui.actions.ACTIONS`.

Kept only so an old ``from tui.screens import transcript_actions`` (one test still has it) does not fail; it
registers nothing and imports nothing. Delete it with that import.
"""
