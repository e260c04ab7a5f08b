"""The one safe-text boundary: every string that comes from data passes here before it is drawn or printed.

Text in a session directory is not trusted: a title, a message, a tool name, a work dir or a lease owner id may
hold terminal escapes (``ESC ] 52`` writes the user's clipboard, ``ESC ] 0`` retitles the terminal, ``ESC [2J``
wipes the screen), C1 controls (``0x9b`` is a one-byte CSI on some terminals), bidi overrides that make text
read backwards, or lone surrogates that no encoder can write.

* :func:`safe` shows every such character as a visible escape and emits none of them: C0 controls as their
  Unicode control pictures (``ESC`` → ``␛``, ``BEL`` → ``␇``), DEL as ``␡``, C1 controls as ``\\x9b``, bidi
  controls, line/paragraph separators and lone surrogates as ``\\u202e`` / ``\\ud83d``. Newline and tab are kept
  only where the layout wants them.
* :func:`one_line` is :func:`safe` for a cell or a title: whitespace runs collapse to one space.
* :func:`json_dumps` writes JSON whose strings hold no raw control, bidi or surrogate character (they are
  ``\\uXXXX`` escapes, so the JSON is still exactly the data).

Markup is the other half of the boundary and lives with the UI: data is never parsed as markup (widgets build
``Text`` / ``Content`` from plain strings, notifications pass ``markup=False``). This module imports nothing but
the standard library, so the store, the command line and the app share it.
"""

from __future__ import annotations

import json
import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Arabic letter mark, LRM/RLM, the embeddings and overrides (U+202A–E) and the isolates (U+2066–9)."""

SEPARATORS = "\u2028\u2029"
"""Line and paragraph separator: line breaks to some terminals and editors."""

_REST = "\x7f-\x9f" + BIDI_CONTROLS + SEPARATORS + "\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f{_REST}]")
_UNSAFE_BUT_NL_TAB = re.compile(f"[\x00-\x08\x0b-\x1f{_REST}]")
_UNSAFE_BUT_NL = re.compile(f"[\x00-\x09\x0b-\x1f{_REST}]")
_JSON_ESCAPE = re.compile(f"[\x7f-\x9f{BIDI_CONTROLS}{SEPARATORS}\ud800-\udfff]")
_SPACES = re.compile(r"\s+")


def visible(ch: str) -> str:
    """The visible stand-in for one unsafe character."""
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _swap(match: re.Match[str]) -> str:
    return visible(match.group(0))


def safe(text: object, *, newlines: bool = False, tabs: bool = False) -> str:
    """``text`` (any value; ``None`` is ``""``) with every control, bidi, separator and surrogate character shown
    as a visible escape. ``newlines`` / ``tabs`` keep ``\\n`` / ``\\t`` as they are (a ``\\r`` is never kept)."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = str(text)
    if newlines and tabs:
        pattern = _UNSAFE_BUT_NL_TAB
    elif newlines:
        pattern = _UNSAFE_BUT_NL
    else:
        pattern = _UNSAFE
    if tabs and not newlines:
        return "\t".join(_UNSAFE.sub(_swap, part) for part in text.split("\t"))
    return pattern.sub(_swap, text)


def one_line(text: object) -> str:
    """``text`` made safe for one line: newlines, tabs and other whitespace runs become one space."""
    if text is None:
        return ""
    return safe(_SPACES.sub(" ", str(text)).strip())


def is_safe(text: str, *, newlines: bool = False, tabs: bool = False) -> bool:
    """True when :func:`safe` would change nothing."""
    return safe(text, newlines=newlines, tabs=tabs) == text


def _json_swap(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def json_dumps(value: object, *, indent: int | None = 2) -> str:
    """JSON text of ``value`` whose strings hold no raw control, DEL, C1, bidi, separator or surrogate
    character: ``json`` escapes C0 itself; the rest become ``\\uXXXX`` (still the same data when parsed)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _JSON_ESCAPE.sub(_json_swap, text)


def filename_part(text: str, *, limit: int = 64, fallback: str = "export") -> str:
    """``text`` as one safe component of a file name: letters, digits, ``-``, ``_`` and ``.`` only, no leading dot
    (so never ``..``), at most ``limit`` characters; ``fallback`` when nothing is left."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    cleaned = re.sub(r"\.{2,}", ".", cleaned)[:limit].strip("-.")
    return cleaned or fallback
