"""The mothx session directory: ``sessions.db`` (schema v43) and what lives beside it.

Opening (open modes, layout), sessions and their list, entries and replay, runs, leases, orphan recovery, the
repairs catalogue, the lease bus and file watching.
"""
