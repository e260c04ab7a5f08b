"""A read mode over a PostgreSQL team store whose index is further behind than a read mode ranks itself
(``pg_index.NEWER_CAP``): the index ranks what it holds, the records past its watermark are searched by the
exact scan in the same statement, and the answer says which hits are ranked and which exact. Checked against
an independent reading of the records (an ASCII case-insensitive substring, as ``ILIKE`` in a ``C``
database). Against a real PostgreSQL server (tests/pg.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.checkpoint_engine import use_store
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.search import INDEX, search
from store.search import pg_index as cs
from store.search.team import refresh_team
from tests.pg import pg_cluster, pg_dump, pg_execute, pg_url  # noqa: F401 - fixtures
from tests.store.test_search_pg import _forget, _pg_keys, _tree, both  # noqa: F401 - fixtures
from tests.store.test_search_pg_behind import BEHIND_TEXTS, _append

CAP_WORDS = ["walrus", "parser", "Parser", "pool", "capybara", "café", '"walrus walrus"', "fixed", "more", "reply 3"]
_LINES = ("SELECT ss.agent_id, ss.agent_session_id, l.file_path, l.line_number, l.content FROM agent_state_lines l "
          "JOIN agent_state_sessions ss ON ss.session_id = l.session_id")
Key = tuple[str, str, str, int]


def _fold(text: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _expected(held: set[Key], backlog: dict[Key, str], text: str) -> dict[tuple[str, str], tuple[bool, int]]:
    """(agent, agent session) → (ranked, matches): the index's records of the query (those rewritten since left
    out) ranked, and the backlog's records holding the typed text, ASCII case-insensitively."""
    out: dict[tuple[str, str], tuple[bool, int]] = {}
    for agent, asid, _path, _line in held - backlog.keys():
        ranked, n = out.get((agent, asid), (True, 0))
        out[(agent, asid)] = (True, n + 1)
    for (agent, asid, _path, _line), content in backlog.items():
        if _fold(text) in _fold(content):
            ranked, n = out.get((agent, asid), (False, 0))
            out[(agent, asid)] = (ranked, n + 1)
    return out


def test_backlog_past_the_cap_is_scanned_exactly(both: tuple[Path, Path, str, Path],  # noqa: F811
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, team, url, tree = both
    use_store(url)
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        assert refresh_team(sd).kind == "cold"
    held = {text: _pg_keys(url, text) for text in CAP_WORDS}
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        current = {text: search(sd, text, captured=True, limit=None) for text in CAP_WORDS}
    before = {(str(a), str(b), str(c), int(d)) for a, b, c, d, _ in pg_execute(url, _LINES)}
    # Captured since: new sessions, records appended to indexed sessions, and one line rewritten in place.
    _tree(tree, BEHIND_TEXTS, start=300)
    _append(tree, 0, "late news: the parser is fixed")
    _append(tree, 7, "one more walrus")
    with open_session_dir(team, OpenMode.READ_WRITE) as sd:
        cap.capture_claude_code(sd, tree)
    new = json.dumps({"type": "user", "message": {"role": "user", "content": "no more pinnipeds, said Parser"}})
    rewritten = pg_execute(url, "UPDATE agent_state_lines SET content = ?, content_bytes = ?, search_xid = "
                                "txid_current() WHERE (session_id, file_path, line_number) = (SELECT session_id, "
                                "file_path, line_number FROM agent_state_lines WHERE content LIKE ? ORDER BY 1, 2, 3 "
                                "LIMIT 1) RETURNING file_path, line_number", (new, len(new), '%"walrus walrus walrus"%'))
    assert len(rewritten) == 1
    lines = {(str(a), str(b), str(c), int(d)): str(e) for a, b, c, d, e in pg_execute(url, _LINES)}
    stale = {k for k in lines if (k[2], k[3]) == (rewritten[0][0], rewritten[0][1])}
    backlog = {k: v for k, v in lines.items() if k not in before or k in stale}
    assert len(backlog) == 3 * len(BEHIND_TEXTS) + 3
    monkeypatch.setattr(cs, "NEWER_CAP", 4)
    dump = pg_dump(url)
    with open_session_dir(team, OpenMode.READ_ONLY) as sd:
        results = {text: search(sd, text, captured=True, limit=None) for text in CAP_WORDS}
        paged = search(sd, "walrus", captured=True, limit=3)
        rest = search(sd, "walrus", captured=True, limit=None, after=paged.hits[-1].key)
    assert pg_dump(url) == dump                                  # a read mode wrote nothing
    seen_unranked = seen_both = 0
    for text, r in results.items():
        want = _expected(held[text], backlog, text)
        got = {(h.agent_id, h.session_id): (h.score is not None, h.matches) for h in r.hits}
        assert (r.source, r.reason, r.exact, r.scanned) == (INDEX, "", len(backlog), True), text
        assert got == want and r.total == len(want), text
        assert r.unranked == sum(1 for ranked, _ in want.values() if not ranked), text
        scores = [h.score is None for h in r.hits]
        assert scores == sorted(scores), text                   # every ranked hit before every exact one
        exact = [h for h in r.hits if h.score is None]
        assert [(-h.matches, h.session_id) for h in exact] == sorted((-h.matches, h.session_id) for h in exact)
        for h in exact:                                          # its first matching record, snippet on the text
            found = sorted((k[2], k[3]) for k, v in backlog.items()
                           if (k[0], k[1]) == (h.agent_id, h.session_id) and _fold(text) in _fold(v))
            assert (h.file_path, h.line_number) == found[0], text
            assert h.snippet.spans and _fold(h.snippet.text[slice(*h.snippet.spans[0])]) == _fold(text), text
        for h in r.hits:                                         # a ranked best record the index still holds
            if h.score is not None:
                best = next(c for c in current[text].hits if (c.agent_id, c.session_id) == (h.agent_id, h.session_id))
                if not any((h.agent_id, h.session_id, best.file_path, best.line_number) == k for k in stale):
                    assert (h.file_path, h.line_number, h.score) == (best.file_path, best.line_number, best.score)
        seen_unranked += r.unranked
        seen_both += sum(1 for k, (ranked, n) in want.items() if ranked and n > len(
            [x for x in held[text] - backlog.keys() if (x[0], x[1]) == k]))
        assert "searched by the exact LIKE scan" in r.how() and f"{len(backlog)} records newer" in r.how()
    assert seen_unranked >= 4 and seen_both >= 2      # the checks above met exact-only and mixed sessions
    phrase = results['"walrus walrus"']             # the rewritten record no longer answers; its reply still does
    assert [(h.file_path, h.line_number) for h in phrase.hits] == [(rewritten[0][0], 2)] != [tuple(rewritten[0])]
    assert [h.key for h in paged.hits + rest.hits] == [h.key for h in results["walrus"].hits] and paged.has_more
    # The CLI: a score of "-" for the exact hits, and the last line says so.
    from tui.cli import core as cli

    store = url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        assert cli.main(["--dir", str(team), "search", "capybara", "--captured", "--store", store]) == 0
        out, err = capsys.readouterr()
        assert re.search(r"^\s*-\s+claude-code\s", out, re.M) and "unranked (score -)" in err and "Traceback" not in err
    finally:
        use_store(None)
