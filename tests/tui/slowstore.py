"""``python -m tests.tui.slowstore --dir PATH``: the ``sessionscope`` command with a store that never finishes
listing, to test that ``q`` still ends the process at once.

Listing sessions here does what a cache build or a search on a huge directory does, for ever: a parallel scan
on a pool thread of its own (not a daemon, like the store's scanner) while the store's own connection runs a
query that only an interrupt ends.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
SCAN_S = 60.0


def endless_list_sessions(sd: Any, *args: Any, **kwargs: Any) -> Any:
    def scan() -> None:
        time.sleep(SCAN_S)

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(scan)
        with sd.db.read() as conn:
            conn.execute(ENDLESS).fetchone()
    raise AssertionError("unreachable: the query never ends by itself")


def main() -> int:
    import store.mothx.sessions as sessions
    from tui.cli import main as cli_main

    sessions.list_sessions = endless_list_sessions
    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
