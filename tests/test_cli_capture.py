"""The checkpoint commands: capture (JSON summary per session, re-capture, append, divergence), the read-mode
refusal, ``checkpoints``, ``checkpoint verify`` / ``reset`` and ``export-repaired``, on the real fixtures."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest

from store.agents import agentstate as ast
from store.agents.capture import CaptureProgress
from store.agents.native import parse_codex
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.pg import pg_cluster, pg_url  # noqa: F401 - fixtures
from tui.cli import core as cli
from tui.cli.capture import _ProgressBar

CC_SESSIONS = {  # agent session id -> (files, records), from the fixture README's line counts
    "03eb5929-52b3-4b13-ada3-b93ae35806b8": (1, 61),
    "326189cf-5676-4237-8cde-1ce80aae4a9f": (1, 54),
    "7acd37a8-2745-4b58-a8a9-46164b22ad9e": (1, 1),  # the old-layout sub-agent file, keyed by its sessionId
    "29ccd257-68b1-427f-ae5f-6524b7cb6f20": (2, 6 + 59),  # the parent and its subagents/ file
}
CODEX_SESSIONS = {
    "019c8a4d-8f45-7010-8b5d-7fad920aa6f9": (1, 417),
    "019c8a70-dda7-7f33-98ea-f30553347322": (1, 19),
    "019c8bfe-ec25-79e0-97d7-bda6a9c575ff": (1, 63),
}
INTERRUPTED_ID = "019c8a70-dda7-7f33-98ea-f30553347322"
ROLLOUT_13 = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    return root


@pytest.fixture
def codex_copy(real_fixtures: Path, tmp_path: Path) -> Path:
    """A writable copy of the Codex sessions folder."""
    target = tmp_path / "codex-sessions"
    shutil.copytree(real_fixtures / "codex" / "sessions", target)
    for p in target.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return target


def by_id(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(r["agent_session_id"]): r for r in rows if r["agent_session_id"]}


# --------------------------------------------------------------------------------------------------- capture


def test_capture_claude_code_json_then_unchanged(sdir: Path, real_fixtures: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = real_fixtures / "claude-code"
    before = tree_digest(root)
    code, out, err = run(capsys, "--dir", str(sdir), "capture", "claude-code", str(root), "--json")
    assert code == 0, err
    assert err == "", "no progress output when stderr is not a terminal"
    rows = json.loads(out)
    assert all(set(r) >= {"agent", "agent_session_id", "status", "files", "records", "records_written"} for r in rows)
    sessions = by_id(rows)
    assert set(sessions) == set(CC_SESSIONS)
    for sid, (files, records) in CC_SESSIONS.items():
        row = sessions[sid]
        assert (row["agent"], row["status"], row["files"], row["records"], row["records_written"]) == (
            "claude-code", "new", files, records, records)
    unkeyed = [r for r in rows if not r["agent_session_id"]]
    assert sorted(r["status"] for r in unkeyed) == ["unreadable", "unreadable"]  # the empty and summary-only files
    assert any("empty" in str(r["detail"]) for r in unkeyed)
    assert (sdir / "sessionscope" / "agent-state.db").is_file()

    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "claude-code", str(root), "--json")
    assert code == 0
    again = by_id(json.loads(out))
    assert {sid: (r["status"], r["records"], r["records_written"]) for sid, r in again.items()} == {
        sid: ("unchanged", records, 0) for sid, (_files, records) in CC_SESSIONS.items()}
    assert tree_digest(root) == before, "capture only reads the transcripts"


def test_capture_text_summary_lists_unreadable_with_reasons(sdir: Path, real_fixtures: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "claude-code", str(real_fixtures / "claude-code"))
    assert code == 0
    assert "new 4 · appended 0 · unchanged 0 · divergent 0 · unreadable 2" in out
    assert "(7 files, 181 records, 181 written)" in out
    unreadable = out.split("Unreadable (not stored):", 1)[1].strip().splitlines()
    assert len(unreadable) == 2
    assert any("4fe49c7c" in line and "the file is empty" in line for line in unreadable)
    assert any("4e27c414" in line and "only summary records" in line for line in unreadable)
    assert "Divergent" not in out


def test_capture_codex_new_appended_divergent_reset(sdir: Path, codex_copy: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_copy), "--json")
    assert code == 0
    first = by_id(json.loads(out))
    assert {sid: (r["agent"], r["status"], r["files"], r["records"], r["records_written"]) for sid, r in first.items()} == {
        sid: ("codex", "new", files, records, records) for sid, (files, records) in CODEX_SESSIONS.items()}

    # Appending one record to a copy: only that tail is written.
    rollout = codex_copy / ROLLOUT_13
    extra = {"timestamp": "2026-02-23T12:20:00.000Z", "type": "event_msg",
             "payload": {"type": "agent_message", "message": "one more line"}}
    with rollout.open("ab") as fh:
        fh.write(json.dumps(extra, separators=(",", ":")).encode() + b"\n")
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_copy), "--json")
    second = by_id(json.loads(out))
    assert (second[INTERRUPTED_ID]["status"], second[INTERRUPTED_ID]["records"],
            second[INTERRUPTED_ID]["records_written"]) == ("appended", 20, 1)
    assert {r["status"] for sid, r in second.items() if sid != INTERRUPTED_ID} == {"unchanged"}

    # Rewriting a line of the copy: divergent, reported with its reason, nothing written.
    lines = rollout.read_bytes().split(b"\n")
    assert b'"role":"developer"' in lines[2]
    lines[2] = lines[2].replace(b'"role":"developer"', b'"role":"user"')
    rollout.write_bytes(b"\n".join(lines))
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_copy))
    assert code == 0
    assert "divergent 1" in out
    divergent = out.split("Divergent", 1)[1]
    assert INTERRUPTED_ID in divergent and "no longer starts with" in divergent
    assert f"sessionscope checkpoint reset codex {INTERRUPTED_ID}" in divergent
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_copy), "--json")
    third = by_id(json.loads(out))
    assert (third[INTERRUPTED_ID]["status"], third[INTERRUPTED_ID]["records_written"]) == ("divergent", 0)

    # verify sees the rewritten line on disk; the stored checkpoint is still the appended one.
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", INTERRUPTED_ID[:13], "--json")
    assert code == 1
    result = json.loads(out)
    assert result["status"] == "divergent" and result["files"][0]["stored_records"] == 20
    assert "line 3 differs" in result["files"][0]["detail"]

    # A reset (confirmed with --yes) lets the next capture store the file afresh.
    code, out, err = run(capsys, "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID, "--yes")
    assert code == 0, err
    assert "Published a reset head" in out
    with open_session_dir(sdir, OpenMode.READ_ONLY) as sd:
        head = ast.head(sd, "codex", INTERRUPTED_ID)
        assert head is not None and head.kind == "reset"
    code, out, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_copy), "--json")
    fourth = by_id(json.loads(out))
    assert (fourth[INTERRUPTED_ID]["status"], fourth[INTERRUPTED_ID]["records"],
            fourth[INTERRUPTED_ID]["records_written"]) == ("new", 20, 20)
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", INTERRUPTED_ID)
    assert code == 0 and out.startswith("verified: codex " + INTERRUPTED_ID)


@pytest.mark.parametrize("flag", ["--read-only", "--snapshot"])
def test_capture_in_a_read_mode_is_refused(sdir: Path, real_fixtures: Path, flag: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(sdir)
    code, out, err = run(capsys, flag, "--dir", str(sdir), "capture", "codex", str(real_fixtures / "codex" / "sessions"))
    assert code == 3
    assert out == ""
    assert err.startswith("sessionscope: Refused") and "read-only" in err and len(err.strip().splitlines()) == 1
    assert not (sdir / "sessionscope").exists()
    assert tree_digest(sdir) == before


def test_capture_without_dir_goes_to_a_store_of_its_own(real_fixtures: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """No --dir and no mothx session directory: the captures go to <user data dir>/sessionscope/captures, and
    ~/.mothx/sessions is never created (issue 9, item 9); the read commands and the app find them there."""
    from store.paths import captures_dir

    home = Path.home()  # the hermetic HOME of tests/conftest.py
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    code, out, err = run(capsys, "capture", "codex", str(real_fixtures / "codex" / "sessions"), "--json")
    assert code == 0, err
    assert not (home / ".mothx").exists(), "a capture never creates the mothx session directory"
    store = home / ".local" / "share" / "sessionscope" / "captures"
    assert captures_dir() == store and (store / "sessions.db").is_file()
    assert "created the store for captured sessions at ~/.local/share/sessionscope/captures" in err
    assert len(by_id(json.loads(out))) == 3
    code, out, _ = run(capsys, "checkpoints", "--json")
    assert code == 0 and len(json.loads(out)) == 3
    assert cli._session_dir(cli.build_parser().parse_args([])) == store, "sessionscope opens the store of captures"


def test_capture_without_dir_goes_beside_existing_mothx_sessions(real_fixtures: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path.home()
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    mothx = home / ".mothx" / "sessions"
    mothx.mkdir(parents=True)
    with open_session_dir(mothx, OpenMode.READ_WRITE, create=True):
        pass
    code, _, err = run(capsys, "capture", "codex", str(real_fixtures / "codex" / "sessions"))
    assert code == 0, err
    assert (mothx / "sessionscope" / "agent-state.db").is_file(), "beside the mothx sessions the app shows"
    assert not (home / ".local" / "share" / "sessionscope" / "captures").exists()


def test_capture_root_is_stored_without_dot_dot(sdir: Path, real_fixtures: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    roundabout = real_fixtures / "codex" / ".." / "codex" / "sessions"
    code, _, _ = run(capsys, "--dir", str(sdir), "capture", "codex", str(roundabout))
    assert code == 0
    _, out, _ = run(capsys, "--dir", str(sdir), "checkpoints", "--json")
    roots = {r["source_root"] for r in json.loads(out)}
    assert roots == {str(real_fixtures / "codex" / "sessions")}
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", INTERRUPTED_ID)
    assert code == 0


def test_capture_refuses_a_foreign_folder_and_a_missing_root(tmp_path: Path, real_fixtures: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "not-sessions"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    code, _, err = run(capsys, "--dir", str(folder), "capture", "codex", str(real_fixtures / "codex"))
    assert code == 1 and "no sessions.db" in err
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    code, _, err = run(capsys, "--dir", str(folder), "capture", "codex", str(tmp_path / "nowhere"))
    assert code == 2 and "no such folder" in err                      # a bad argument
    code, _, err = run(capsys, "--dir", str(folder), "capture", "codex", str(folder / "notes.txt"))
    assert code == 2 and "is not a folder" in err
    code, _, err = run(capsys, "capture", "gemini")
    assert code == 2


def test_progress_bar_draws_files_and_bytes_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    with _ProgressBar("codex", stream) as bar:
        assert bar.enabled
        bar(CaptureProgress(0, 3, 0, 3_000_000))
        bar(CaptureProgress(2, 3, 2_000_000, 3_000_000, "2026/02/23/rollout-x.jsonl"))
        assert bar._progress is not None
        task = bar._progress.tasks[0]
        assert (task.completed, task.total, task.fields["files"]) == (2_000_000, 3_000_000, "2/3")
    plain = io.StringIO()
    with _ProgressBar("codex", plain) as bar:
        bar(CaptureProgress(1, 1, 10, 10))
        assert not bar.enabled
    assert plain.getvalue() == ""


# ----------------------------------------------------------------------------------------------- checkpoints


def test_checkpoints_list_and_json(sdir: Path, real_fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codex_root = real_fixtures / "codex" / "sessions"
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoints")
    assert code == 0 and out.startswith("No checkpoints.")
    run(capsys, "--dir", str(sdir), "capture", "codex", str(codex_root))
    run(capsys, "--dir", str(sdir), "capture", "claude-code", str(real_fixtures / "claude-code"))
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoints", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["agent"], r["agent_session_id"]) for r in rows] == sorted(
        [("claude-code", s) for s in CC_SESSIONS] + [("codex", s) for s in CODEX_SESSIONS])
    codex = {r["agent_session_id"]: r for r in rows if r["agent"] == "codex"}
    for sid, (files, records) in CODEX_SESSIONS.items():
        row = codex[sid]
        assert (row["head_kind"], row["files"], row["records"], row["head_problem"]) == ("checkpoint", files, records, "")
        (shape,) = row["shapes"]
        # The Codex files are compact JSONL ending in "\n": the digest is the SHA-256 of the file itself.
        assert shape["digest"] == hashlib.sha256((codex_root / shape["path"]).read_bytes()).hexdigest()
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoints", "--agent", "codex")
    lines = out.strip().splitlines()
    assert lines[0].split()[:5] == ["AGENT", "SESSION", "ID", "HEAD", "FILES"]
    assert len(lines) == 4 and all(line.startswith("codex ") for line in lines[1:])


def test_verify_prefixes_and_unknown_ids(sdir: Path, real_fixtures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "--dir", str(sdir), "capture", "codex", str(real_fixtures / "codex" / "sessions"))
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", "019c8a70")
    assert code == 0
    assert out.splitlines()[0] == f"verified: codex {INTERRUPTED_ID}"
    assert "19 stored, 19 on disk" in out
    code, _, err = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", "019c8")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("sessionscope: ambiguous prefix 019c8: matches 3 codex checkpoints: ")
    assert all(sid in err for sid in CODEX_SESSIONS)
    code, _, err = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", "ffffffff")
    assert code == 2 and "No codex checkpoint" in err
    code, _, err = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "claude-code", INTERRUPTED_ID)
    assert code == 2


def test_reset_needs_confirmation_and_a_writable_dir(sdir: Path, real_fixtures: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "--dir", str(sdir), "capture", "codex", str(real_fixtures / "codex" / "sessions"))

    def head_kind() -> str:
        with open_session_dir(sdir, OpenMode.READ_ONLY) as sd:
            head = ast.head(sd, "codex", INTERRUPTED_ID)
        return head.kind if head else ""

    state = sdir / "sessionscope" / "agent-state.db"
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID, "--dry-run")
    assert code == 0
    assert "1 file and 19 records stops being loadable" in out and "Dry run: nothing was changed." in out
    assert head_kind() == "checkpoint"
    code, out, err = run(capsys, "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID)  # stdin is no tty
    assert code == 3 and "--yes" in err
    assert head_kind() == "checkpoint"
    before = state.read_bytes()
    code, _, err = run(capsys, "--read-only", "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID, "--yes")
    assert code == 3 and "read-only" in err
    assert state.read_bytes() == before and head_kind() == "checkpoint"
    code, _, _ = run(capsys, "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID, "--yes")
    assert code == 0 and head_kind() == "reset"
    code, _, err = run(capsys, "--dir", str(sdir), "checkpoint", "reset", "codex", INTERRUPTED_ID, "--yes")
    assert code == 3 and "already a reset" in err
    code, out, _ = run(capsys, "--dir", str(sdir), "checkpoint", "verify", "codex", INTERRUPTED_ID)
    assert code == 1 and out.startswith("out of sync:")


# ------------------------------------------------------------------------------------------- export-repaired


def test_export_repaired_closes_the_interrupted_call(real_fixtures: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "rollout.jsonl"
    shutil.copyfile(real_fixtures / "codex" / "sessions" / ROLLOUT_13, source)
    original = source.read_bytes()
    before = parse_codex(original)
    (pair,) = before.interrupted
    assert pair.call_line == 18

    out_path = tmp_path / "repaired.jsonl"
    code, out, err = run(capsys, "export-repaired", str(source), str(out_path), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["agent"], result["lines_in"], result["lines_out"]) == ("codex", 19, 20)
    assert result["closed"] == [{"call_id": pair.call_id, "name": pair.name, "line": 18, "inserted_at": 19}]
    assert source.read_bytes() == original, "the original is never modified"

    repaired = out_path.read_bytes()
    after = parse_codex(repaired)
    assert after.interrupted == ()
    closed = next(p for p in after.tool_pairs if p.call_id == pair.call_id)
    assert (closed.result_line, closed.result_text) == (19, "interrupted")
    lines = repaired.split(b"\n")
    assert lines[:18] == original.split(b"\n")[:18] and lines[19:] == original.split(b"\n")[18:]

    code, _, err = run(capsys, "export-repaired", str(source), str(out_path))
    assert code == 3 and "already exists" in err
    assert out_path.read_bytes() == repaired
    code, out, _ = run(capsys, "export-repaired", str(source), str(tmp_path / "again.jsonl"))
    assert code == 0 and f"closed {pair.name} {pair.call_id} (line 18)" in out
    code, _, err = run(capsys, "export-repaired", str(tmp_path / "missing.jsonl"), str(tmp_path / "x.jsonl"))
    assert code == 2 and "no such file" in err and err.count("\n") == 1   # a bad argument
    code, _, err = run(capsys, "export-repaired", str(tmp_path), str(tmp_path / "x.jsonl"))
    assert code == 2 and "is not a file" in err
    assert not (tmp_path / "x.jsonl").exists()


# ------------------------------------------------------------------------------------- --store (team store)


def test_two_hosts_capture_into_one_postgresql_store_and_a_third_reads_it(
        tmp_path: Path, real_fixtures: Path, pg_url: str, capsys: pytest.CaptureFixture[str],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    from store.agents.checkpoint_engine import use_store

    claude_root, codex_root = real_fixtures / "claude-code", real_fixtures / "codex" / "sessions"
    try:
        monkeypatch.setenv("SESSIONSCOPE_HOST", "host-a")
        code, out, err = run(capsys, "--dir", str(tmp_path / "a"), "capture", "claude-code", str(claude_root),
                             "--store", pg_url, "--json")
        assert code == 0, err
        assert "store: PostgreSQL postgresql+psycopg://postgres@/" in err
        monkeypatch.setenv("SESSIONSCOPE_HOST", "host-b")
        code, _, err = run(capsys, "--dir", str(tmp_path / "b"), "capture", "codex", str(codex_root),
                           "--store", pg_url, "--json")
        assert code == 0, err
        use_store(None)
        monkeypatch.setenv("SESSIONSCOPE_STORE", pg_url)  # the third machine: no session directory at all
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
        code, out, err = run(capsys, "checkpoints", "--json")
        assert code == 0, err
        rows = json.loads(out)
        agents = {r["agent"] for r in rows}
        assert agents == {"claude-code", "codex"}
        assert set(CODEX_SESSIONS) <= {str(r["agent_session_id"]) for r in rows}
        code, out, err = run(capsys, "checkpoint", "verify", "codex", INTERRUPTED_ID, "--store", pg_url)
        assert code == 0, out + err
        code, _, err = run(capsys, "checkpoints", "--store", "mysql://nope")
        assert code == 2 and "postgresql://" in err
    finally:
        use_store(None)
