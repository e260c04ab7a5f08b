"""A transcript (mothx, Claude Code or Codex) as one self-contained HTML page, readable offline.

The page has inline CSS and nothing else: no script, no external resource (font, image, style sheet), no link
made from data. Its Content-Security-Policy (``default-src 'none'; style-src 'unsafe-inline'``) forbids any
script and any fetch even if a browser found one, and ``referrer`` is ``no-referrer``. Tool calls (with their
results) and thinking are ``<details>`` blocks, closed by default; the other text is shown with its line breaks.

Every data string (a title, a message, a tool name, arguments, an id, a work dir) goes through
:func:`store.safetext.safe` first (a terminal escape, a C1 control, a bidi override or a lone surrogate becomes
a visible escape such as ``␛`` or ``\\u202e``) and then :func:`html.escape` (``<``, ``>``, ``&``, ``"``, ``'``), so
``</script>``, ``<img onerror=…>`` or a ``javascript:`` URL in a transcript is text on the page, never markup.
An optional :class:`store.redact.Redactor` is applied to each data string before that.

* :func:`mothx_html` — a mothx session's replay (the messages :func:`store.mothx.entries.export_markdown` shows).
* :func:`native_html` — one Claude Code / Codex transcript (one branch choice), as
  :func:`store.agents.native_export.native_markdown` shows it.
* :func:`session_html` — a captured session: the main transcript, then each sub-agent.
* :func:`write_html` — writes a page through :func:`store.exports.write_file` (never through a link).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from store.agents.native import (
    AGENT_CODEX,
    K_COMPACT_BOUNDARY,
    K_COMPACT_SUMMARY,
    K_COMPACTED,
    K_CONTEXT,
    K_SUMMARY,
    K_UNREADABLE,
    NativeSession,
    NativeTranscript,
)
from store.agents.native_export import QUIET, _hidden_result, _pairs
from store.exports import default_name, write_file
from store.mothx.entry_export import _require_session
from store.mothx.entry_reads import load_rows
from store.mothx.entry_replay import replay_details
from store.mothx.jsonvalue import loads, pretty
from store.redact import Redactor
from store.safetext import one_line, safe

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

EXTENSION = ".html"
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

STYLE = """
:root { color-scheme: light dark; --fg: #1d1f21; --bg: #fdfdfd; --muted: #666; --line: #ddd; --code: #f3f3f3;
  --user: #2a6fdb; --assistant: #2e8b57; --tool: #b8860b; --error: #c0392b; --note: #7a5ea8; }
@media (prefers-color-scheme: dark) { :root { --fg: #e0e0e0; --bg: #16181a; --muted: #9a9a9a; --line: #333;
  --code: #22252a; --user: #6ea8fe; --assistant: #75d69c; --tool: #e0b64c; --error: #ff7b72; --note: #b79cf0; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 60rem; padding: 1.5rem; color: var(--fg); background: var(--bg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; overflow-wrap: anywhere; }
h2 { font-size: 1rem; margin: 0 0 .4rem; color: var(--muted); font-weight: 600; overflow-wrap: anywhere; }
.facts { color: var(--muted); margin: 0 0 1.5rem; overflow-wrap: anywhere; }
section { border-left: 4px solid var(--line); padding: .5rem 0 .5rem 1rem; margin: 0 0 1rem; }
section.user { border-color: var(--user); } section.assistant { border-color: var(--assistant); }
section.tool { border-color: var(--tool); } section.error { border-color: var(--error); }
section.note { border-color: var(--note); }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: .25rem 0; }
.aside { color: var(--muted); font-style: italic; margin: .25rem 0; overflow-wrap: anywhere; }
.bad { color: var(--error); font-weight: 600; }
pre { background: var(--code); padding: .6rem; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere;
  font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; margin: .3rem 0; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .92em;
  overflow-wrap: anywhere; }
details { border: 1px solid var(--line); border-radius: 4px; margin: .4rem 0; padding: .2rem .6rem; }
details > summary { cursor: pointer; color: var(--muted); }
details.thinking .text { color: var(--muted); }
h1.agent { margin-top: 2.5rem; padding-top: 1rem; border-top: 2px solid var(--line); }
footer { color: var(--muted); font-size: .85rem; margin-top: 2rem; border-top: 1px solid var(--line);
  padding-top: .5rem; }
"""


class _Page:
    """Builds the HTML of one page; every data string passes :meth:`d` or :meth:`d1`."""

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor
        self.parts: list[str] = []

    def _clean(self, text: object) -> str:
        value = "" if text is None else str(text)
        return self.redactor.text(value) if self.redactor is not None else value

    def d(self, text: object) -> str:
        """Multi-line data: made safe (newlines and tabs kept), then HTML-escaped."""
        return html.escape(safe(self._clean(text), newlines=True, tabs=True), quote=True)

    def d1(self, text: object) -> str:
        """One-line data (an id, a name, a title): whitespace collapsed, made safe, HTML-escaped."""
        return html.escape(one_line(self._clean(text)), quote=True)

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def text(self, text: object) -> None:
        self.add(f'<div class="text">{self.d(text)}</div>')

    def aside(self, escaped: str) -> None:
        self.add(f'<p class="aside">{escaped}</p>')

    def thinking(self, text: object, label: str = "Thinking") -> None:
        self.add(f'<details class="thinking"><summary>{html.escape(label)}</summary>'
                 f'<div class="text">{self.d(text)}</div></details>')

    def code(self, text: object) -> str:
        return f"<pre>{self.d(text)}</pre>"

    def open_section(self, css: str, heading_escaped: str) -> None:
        self.add(f'<section class="{css}"><h2>{heading_escaped}</h2>')

    def close_section(self) -> None:
        self.add("</section>")

    def document(self, title: str, facts: list[str], body: list[str] | None = None) -> str:
        """The whole page; ``title`` and ``facts`` are already escaped."""
        footer = "Exported by sessionscope."
        if self.redactor is not None:
            footer += " " + html.escape(self.redactor.summary()[:1].upper() + self.redactor.summary()[1:]) + "."
        return "".join([
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
            '<meta name="referrer" content="no-referrer">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            f"<header><h1>{title}</h1>\n<p class=\"facts\">{' · '.join(facts)}</p></header>\n<main>\n",
            "\n".join(body if body is not None else self.parts),
            f"\n</main>\n<footer>{footer}</footer>\n</body>\n</html>\n",
        ])


def _pretty_json(arguments: str) -> str:
    try:
        return pretty(loads(arguments))
    except (ValueError, RecursionError):
        return arguments


def _pretty_native(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------------------------------------- mothx


def mothx_html(sd: SessionDir, session_id: str, *, redactor: Redactor | None = None) -> str:
    """The replay of a mothx session as one HTML page. Raises SessionNotFound for an unknown id."""
    rows = load_rows(sd, session_id)
    _require_session(sd, session_id, rows)
    d = replay_details(rows)
    p = _Page(redactor)
    title = p.d1(d.title) or "Session " + p.d1(session_id)
    facts = [f"Session <code>{p.d1(session_id)}</code>",
             _plural(sum(1 for m in d.messages if m.kind == "message"), "message")]
    if d.compactions:
        facts.append(f"{sum(c.applied for c in d.compactions)} of {len(d.compactions)} compactions applied")
    if d.corrupt_rows:
        facts.append(f"{_plural(d.corrupt_rows, 'corrupt row')} skipped")
    for rm in d.messages:
        m = rm.message
        if rm.kind == "compaction_summary":
            p.open_section("note", f"Compaction summary · seq {rm.seq}")
            p.aside(f"Earlier messages were compacted into this summary (entry <code>{p.d1(rm.entry_id)}</code>).")
            p.text(m.text) if m.text else p.aside("(empty summary)")
            p.close_section()
            continue
        role = m.role or "unknown role"
        css = {"user": "user", "assistant": "assistant", "toolResult": "tool"}.get(m.role, "note")
        head = f"{p.d1(role)} · seq {rm.seq}"
        if m.role == "toolResult":
            head += f" · result of <code>{p.d1(m.tool_name) or '?'}</code>"
            if m.is_error:
                head += ' · <span class="bad">✗ error</span>'
                css = "error"
        p.open_section(css, head)
        if m.system_injected:
            p.aside("Injected by the runtime.")
        if rm.overridden:
            reason = f": {p.d1(rm.override_reason)}" if rm.override_reason else ""
            p.aside(f"Content replaced by an override{reason}.")
        if m.role == "toolResult":
            label = f"Result of call <code>{p.d1(m.tool_call_id) or '?'}</code>" + (" (failed)" if m.is_error else "")
            p.add(f'<details class="tool"><summary>{label}</summary>{p.code(m.text)}</details>')
        for b in m.blocks:
            if b.type == "text":
                if m.role != "toolResult" and b.text:
                    p.text(b.text)
            elif b.type == "thinking":
                if b.text:
                    p.thinking(b.text)
            elif b.tool_call is not None:
                tc = b.tool_call
                label = f"Tool call <code>{p.d1(tc.name) or '?'}</code>" + \
                    (f" (id <code>{p.d1(tc.id)}</code>)" if tc.id else "")
                args = _pretty_json(tc.arguments)
                p.add(f'<details class="tool"><summary>{label}</summary>{p.code(args) if args else ""}</details>')
            else:
                p.aside(f"[{p.d1(b.text)}]")
        p.close_section()
    return p.document(title, facts)


# ------------------------------------------------------------------------------------------------ native


def _native_body(p: _Page, t: NativeTranscript, selection: Mapping[str, int] | None) -> None:
    shown = t.view(selection)
    pairs = _pairs(t)
    calls = {b.tool_id for it in shown for b in it.blocks if b.kind == "tool_use" and b.tool_id}
    for item in shown:
        if item.kind in QUIET or _hidden_result(item, pairs, calls):
            continue
        stamp = f" · {p.d1(item.timestamp)}" if item.timestamp else ""
        if item.kind == K_UNREADABLE:
            p.open_section("error", f"Unreadable line {item.line}")
            p.aside(p.d1(item.error))
            p.add(f'<details class="tool"><summary>The line as written</summary>{p.code(item.raw[:2000])}</details>')
            p.close_section()
            continue
        if item.kind in (K_COMPACT_BOUNDARY, K_COMPACTED):
            facts = [p.d1(item.subtype)] if item.subtype else []
            if item.tokens is not None:
                facts.append(f"{item.tokens:,} tokens before")
            p.open_section("note", f"Compaction · line {item.line}{stamp}")
            p.aside(" · ".join(facts) or "compacted")
            if item.text:
                p.text(item.text)
            p.close_section()
            continue
        if item.kind == K_SUMMARY:
            dangling = " (its leafUuid is in no record here)" if "dangling_leaf" in item.flags else ""
            p.open_section("note", f"Summary · line {item.line}")
            p.text(item.text)
            p.aside(f"leaf <code>{p.d1(item.leaf_uuid)}</code>{dangling}")
            p.close_section()
            continue
        role = "compact summary" if item.kind == K_COMPACT_SUMMARY else (item.role or item.kind)
        if item.kind == K_CONTEXT:
            role = f"context ({item.subtype or 'injected'})"
        css = {"user": "user", "assistant": "assistant"}.get(item.role, "note")
        p.open_section(css, f"{p.d1(role)} · line {item.line}{stamp}")
        if item.parent_state == "unreadable":
            p.aside(f"Its parent is the unreadable line {item.parent_line}.")
        if "incomplete_turn" in item.flags:
            p.aside("⚠ This turn never completed (no task_complete).")
        for b in item.blocks:
            if b.kind == "text" and b.text.strip():
                p.text(b.text)
            elif b.kind in ("thinking", "reasoning_summary") and b.text:
                p.thinking(b.text, "Thinking" if b.kind == "thinking" else "Reasoning summary")
            elif b.kind == "encrypted_reasoning":
                p.aside(p.d1(b.text.strip("[]")))
            elif b.kind == "tool_use":
                label = f"Tool call <code>{p.d1(b.tool_name) or '?'}</code>" + \
                    (f" (id <code>{p.d1(b.tool_id)}</code>)" if b.tool_id else "")
                args = _pretty_native(b.arguments)
                body = p.code(args) if args else ""
                pair = pairs.get(b.tool_id)
                if pair is None or pair.interrupted:
                    label += ' · <span class="bad">⚠ interrupted</span>'
                    body += '<p class="aside">No result was recorded.</p>'
                else:
                    if pair.is_error:
                        label += ' · <span class="bad">✗ error</span>'
                    body += (f'<p class="aside">Result (line {pair.result_line})'
                             f'{" — error:" if pair.is_error else ":"}</p>{p.code(pair.result_text)}')
                p.add(f'<details class="tool"><summary>{label}</summary>{body}</details>')
            elif b.kind == "tool_result":
                if b.tool_id not in calls:
                    label = f"Result of <code>{p.d1(b.tool_id) or '?'}</code>" + (" — error" if b.is_error else "")
                    p.add(f'<details class="tool"><summary>{label}</summary>{p.code(b.text)}</details>')
            elif b.kind == "context":
                n = len(b.text.splitlines()) or 1
                p.add(f'<details class="tool"><summary>Context: {p.d1(b.tool_name)} ({_plural(n, "line")}, '
                      f'injected, not typed)</summary>{p.code(b.text)}</details>')
            elif b.kind not in ("text", "thinking", "reasoning_summary"):
                p.aside(p.d1(b.text))
        if not item.blocks and item.text:
            p.text(item.text)
        p.close_section()


def _native_facts(p: _Page, t: NativeTranscript, selection: Mapping[str, int] | None) -> list[str]:
    agent = "Codex" if t.agent == AGENT_CODEX else "Claude Code"
    facts = [f"{agent} <code>{p.d1(t.session_id) or '?'}</code>",
             f"{len(t.view(selection))} of {t.records} records shown"]
    if t.cwd:
        facts.append(f"work dir <code>{p.d1(t.cwd)}</code>")
    if t.forks:
        chosen = {f.parent_uuid: f.default for f in t.forks} | dict(selection or {})
        facts.append("branches " + ", ".join(f"{chosen.get(f.parent_uuid, f.default) + 1} of {len(f.branches)} "
                                             f"at line {f.parent_line}" for f in t.forks))
    if t.interrupted:
        facts.append(_plural(len(t.interrupted), "interrupted call"))
    if t.unreadable:
        facts.append(_plural(len(t.unreadable), "unreadable line"))
    return facts


def native_html(t: NativeTranscript, selection: Mapping[str, int] | None = None, *, title: str = "",
                redactor: Redactor | None = None) -> str:
    """The shown branch of ``t`` as one HTML page (quiet records such as progress lines left out)."""
    p = _Page(redactor)
    agent = "Codex" if t.agent == AGENT_CODEX else "Claude Code"
    heading = p.d1(title or f"{agent} session {t.session_id or t.path}")
    facts = _native_facts(p, t, selection)
    _native_body(p, t, selection)
    return p.document(heading, facts)


def session_html(session: NativeSession, *, title: str = "", redactor: Redactor | None = None) -> str:
    """A captured session as one HTML page: the main transcript, then each sub-agent under its own heading."""
    p = _Page(redactor)
    agent = "Codex" if session.agent == AGENT_CODEX else "Claude Code"
    heading = p.d1(title or f"{agent} session {session.session_id}")
    facts = _native_facts(p, session.main, None) if session.main is not None else ["(no main transcript)"]
    if session.subagents:
        facts.append(_plural(len(session.subagents), "sub-agent"))
    if session.main is not None:
        _native_body(p, session.main, None)
    for link in session.subagents:
        where = (f"Task call <code>{p.d1(link.task_call_id)}</code> at line {link.task_line}" if link.task_call_id
                 else "no Task call names it")
        p.add(f'<h1 class="agent">Sub-agent {p.d1(link.agent_id) or "?"}</h1>'
              f'<p class="facts">{p.d1(link.layout)} layout · {where}</p>')
        if link.layout == "absent":
            p.aside(f"sub-agent {p.d1(link.agent_id)}: file not present")
            continue
        _native_body(p, link.transcript, None)
    return p.document(heading, facts)


# ------------------------------------------------------------------------------------------------- files


def html_file_name(item_id: str) -> str:
    """The default file name of a page: ``<sanitized id>.html``."""
    return default_name(item_id, EXTENSION)


def write_html(path: str | os.PathLike[str], page: str, *, replace: bool = False) -> int:
    """Write ``page`` to ``path`` through :func:`store.exports.write_file`; the number of bytes written.
    :class:`~store.exports.ExportRefused` (nothing written) for a link, a folder, or an existing file unless
    ``replace``."""
    return write_file(path, page, replace=replace)


__all__ = ["CSP", "EXTENSION", "html_file_name", "mothx_html", "native_html", "session_html", "write_html"]
