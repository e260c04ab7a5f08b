"""The HTML export: one self-contained page whose every data string is text, never markup or script."""

from __future__ import annotations

import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest

from store.agents.native import read_claude_code_file, read_claude_code_session, read_codex_file
from store.export_html import CSP, html_file_name, mothx_html, native_html, session_html, write_html
from store.exports import ExportRefused
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.redact import Redactor
from tests.hostile import EVIL, OSC52, SURROGATE, assert_clean
from tests.test_reference_db import V43_MIGRATIONS, _ddl

SID = "f00df00df00df00d"
WEB = ("</script><script>alert(1)</script>", '<img src=x onerror="alert(2)">', "<a href='javascript:alert(3)'>j</a>",
       "[click](javascript:alert(4))", "<style>body{display:none}</style>", "&lt;escaped&gt;",
       '"><svg onload=alert(5)>', "<!-- comment --><iframe src=https://example.invalid/></iframe>")
HOSTILE = "".join(WEB) + EVIL
SECRET = "sk-proj-Abc123def456ghi789jkl012mno345"

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "main", "section",
                "div", "details", "summary", "pre", "code", "span", "footer"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def check_page(page: str) -> str:
    """Assert ``page`` holds only our own markup; return its text (entities decoded)."""
    assert_clean(page, "the page")
    assert page.startswith("<!DOCTYPE html>")
    parser = _Tags()
    parser.feed(page)
    parser.close()
    assert not parser.comments
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs:
            assert name in ("class", "lang", "charset", "http-equiv", "content", "name"), (tag, name)
            assert "javascript" not in (value or "").lower()
    assert [t for t, _ in parser.tags].count("style") == 1
    assert [t for t, _ in parser.tags].count("meta") == 4
    assert CSP in page
    return "".join(parser.text)


def _entry(conn: sqlite3.Connection, eid: str, parent: str | None, **fields: object) -> None:
    etype = str(fields.pop("etype", "message"))
    data = {"type": etype, "id": eid, "parentId": parent, "timestamp": "2026-03-01T09:00:00Z", **fields}
    conn.execute("INSERT INTO entries (session_id, id, type, parent_id, timestamp, data) VALUES (?,?,?,?,?,?)",
                 (SID, eid, etype, parent, "2026-03-01T09:00:00Z", json.dumps(data)))


def build_dir(folder: Path) -> Path:
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "sessions.db")
    conn.executescript(_ddl())
    conn.executemany("INSERT INTO schema_migrations(version, name) VALUES (?, ?)", V43_MIGRATIONS)
    conn.execute("INSERT INTO sessions (id, cwd, timestamp, version, channel_type, channel_id) VALUES (?,?,?,?,?,?)",
                 (SID, "/w" + HOSTILE, "2026-03-01T09:00:00Z", 3, "local", ""))
    _entry(conn, "e1", None, etype="session", version=3, cwd="/w")
    _entry(conn, "e2", "e1", message={"role": "user", "content": "prompt " + HOSTILE + " key " + SECRET})
    _entry(conn, "e3", "e2", message={"role": "assistant", "contents": [
        {"type": "thinking", "thinking": "thought " + HOSTILE},
        {"type": "text", "text": "answer " + HOSTILE},
        {"type": "toolCall", "toolCall": {"id": "call" + HOSTILE, "name": "tool" + HOSTILE, "kind": "function",
                                          "arguments": json.dumps({"path": HOSTILE, "token": SECRET})}}]})
    _entry(conn, "e4", "e3", message={"role": "toolResult", "toolCallId": "call" + HOSTILE, "toolName": "tool" + HOSTILE,
                                      "isError": True, "content": "result " + HOSTILE})
    _entry(conn, "e5", "e4", etype="session_info", name="title " + HOSTILE, source="auto")
    conn.commit()
    conn.close()
    return folder


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    return build_dir(tmp_path / "sessions")


def test_mothx_page_shows_hostile_text_as_text(sdir: Path) -> None:
    with open_session_dir(sdir, OpenMode.READ_ONLY) as sd:
        page = mothx_html(sd, SID)
    text = check_page(page)
    for payload in WEB:
        assert payload in text  # shown literally, as the characters the transcript holds
    assert "␛]52;c;" in text and "\\u202e" in text and "[/]" in text
    for label in ("prompt", "thought", "answer", "result", "title"):
        assert label + " </script>" in text
    assert page.count("<details") == 3  # thinking, the tool call, the tool result
    assert SECRET in text


def test_mothx_page_redacted(sdir: Path) -> None:
    red = Redactor()
    with open_session_dir(sdir, OpenMode.READ_ONLY) as sd:
        page = mothx_html(sd, SID, redactor=red)
    text = check_page(page)
    assert SECRET not in page and "[REDACTED:api-key]" in text
    assert red.report() == {"api-key": 2}
    assert "Redacted 2 values: 2 api-key." in text


def test_unknown_session(sdir: Path) -> None:
    from store.errors import SessionNotFound

    with open_session_dir(sdir, OpenMode.READ_ONLY) as sd, pytest.raises(SessionNotFound):
        mothx_html(sd, "nope" + OSC52)


def _claude_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    sid = "5e55a000-0000-4000-8000-00000000cafe"
    base = {"sessionId": sid, "cwd": "/w" + HOSTILE, "version": "2.1.42", "userType": "external", "isSidechain": False}
    lines = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
         "message": {"role": "user", "content": "cc prompt " + HOSTILE + SURROGATE}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-03-01T10:00:02Z",
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "cc thinking " + HOSTILE},
             {"type": "text", "text": "cc answer " + HOSTILE},
             {"type": "tool_use", "id": "toolu_1", "name": "Tool" + HOSTILE, "input": {"command": HOSTILE}},
             {"type": "tool_use", "id": "toolu_2", "name": "Never", "input": {}}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "a1", "timestamp": "2026-03-01T10:00:03Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "cc result " + HOSTILE, "is_error": True}]}},
    ]
    path = folder / f"{sid}.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n{not json" + OSC52 + "\n",
                    encoding="utf-8", errors="surrogatepass")
    return path


def test_claude_code_page(tmp_path: Path) -> None:
    t = read_claude_code_file(_claude_file(tmp_path / "p"))
    page = native_html(t)
    text = check_page(page)
    for payload in WEB:
        assert payload in text
    assert "cc result </script>" in text and "cc thinking </script>" in text
    assert "interrupted" in text and "Unreadable line 4" in text
    assert "\\ud83d" in text  # the lone surrogate, shown as an escape
    page.encode("utf-8")  # encodable as it is


def test_claude_code_session_page(tmp_path: Path) -> None:
    path = _claude_file(tmp_path / "p")
    session = read_claude_code_session(path.parent, path.stem)
    text = check_page(session_html(session, title="t" + HOSTILE))
    assert "t</script>" in text


def test_codex_page(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2026-03-01T11-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001.jsonl"
    lines = [
        {"timestamp": "2026-03-01T11:00:00Z", "type": "session_meta",
         "payload": {"id": "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001", "timestamp": "2026-03-01T11:00:00Z",
                     "cwd": "/w" + HOSTILE, "originator": "codex", "cli_version": "0.104.0"}},
        {"timestamp": "2026-03-01T11:00:02Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "cx " + HOSTILE}]}},
        {"timestamp": "2026-03-01T11:00:03Z", "type": "response_item",
         "payload": {"type": "function_call", "name": "shell" + HOSTILE, "arguments": json.dumps({"cmd": HOSTILE}),
                     "call_id": "call_x1"}},
        {"timestamp": "2026-03-01T11:00:04Z", "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "call_x1", "output": "out " + HOSTILE}},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    text = check_page(native_html(read_codex_file(path)))
    assert "cx </script>" in text and "out </script>" in text


def test_write_html_never_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.html"
    link = tmp_path / html_file_name("../../x" + OSC52)
    assert link.parent == tmp_path and link.name.endswith(".html")
    link.symlink_to(target)
    with pytest.raises(ExportRefused):
        write_html(link, "<p>x</p>")
    with pytest.raises(ExportRefused):
        write_html(link, "<p>x</p>", replace=True)
    assert not target.exists()
    assert write_html(tmp_path / "ok.html", "<p>x</p>") == 8
