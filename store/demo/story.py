"""What happens in the demo session directory: the sessions, their conversations and their troubles.

Every function here appends to a :class:`store.demo.model.DemoBuilder`; nothing touches a database. The
order of calls fixes the random stream, so keep it stable (or bump ``DEMO_VERSION``) when editing.
"""

from __future__ import annotations

import re
from typing import cast

from store.demo import text as T
from store.demo.model import (
    DAY,
    DEMO_NOW_UNIX,
    HOUR,
    LIVE_LEASE_EXPIRES_AT,
    MIN,
    NOW_MS,
    SEC,
    DeliveryOp,
    DemoBuilder,
    DemoEntry,
    DemoRun,
    DemoSession,
    DemoTurn,
    at,
    rfc3339,
    sha256_hex,
)

# ---------------------------------------------------------------------------------------------------------------
# the story
# ---------------------------------------------------------------------------------------------------------------


def _subs_for(script: T.Script) -> dict[str, str]:
    file, test, commit = T.SCRIPT_FILES.get(script.title, ("", "", ""))
    slug = ""
    for word in re.sub(r"[^a-z0-9]+", " ", script.title.lower()).split():
        if len(slug) + len(word) + 1 > 28:
            break
        slug = f"{slug}-{word}" if slug else word
    return {"file": file, "test": test, "commit": commit, "slug": slug, "title": script.title, "sha": sha256_hex(script.title)[:7]}


def _with_followups(demo: DemoBuilder, script: T.Script, count: int) -> list[tuple[T.Script, dict[str, str]]]:
    subs = _subs_for(script)
    turns: list[tuple[T.Script, dict[str, str]]] = [(script, subs)]
    for key in script.followups[:count]:
        options = T.FOLLOWUPS[key]
        turns.append((options[demo.rng.randrange(len(options))], subs))
    return turns


def tell(demo: DemoBuilder) -> None:
    """Generate every session of the demo, in a fixed order."""
    atlas_project = demo.hex()
    harbor_project = demo.hex()
    demo.projects = [(atlas_project, "Atlas 0.9", at(10, 5, 16, 2)), (harbor_project, "Harbor API 1.5", at(10, 5, 16, 4))]
    H = {s.title: s for s in T.HARBOR_SCRIPTS}
    N = {s.title: s for s in T.NOTES_SCRIPTS}

    # atlas --------------------------------------------------------------------------------------------------------
    atlas_days = [(10, 6, 9, 10), (10, 8, 14, 2), (10, 12, 10, 31), (10, 15, 15, 47), (10, 20, 9, 5), (10, 22, 16, 20),
                  (10, 26, 11, 12), (10, 29, 13, 40), (11, 3, 10, 3), (11, 5, 17, 15), (11, 10, 8, 55)]
    atlas_sessions: dict[str, DemoSession] = {}
    for script, when in zip(T.ATLAS_SCRIPTS[:11], atlas_days, strict=False):
        s = demo.session(T.ATLAS, at(*when), "codex" if when[1] in (12, 26) else "sonnet")
        s.project = atlas_project
        atlas_sessions[script.title] = s
        count = demo.rng.randint(1, 2)
        t = s.created + demo.ms(8, 60)
        turns = _with_followups(demo, script, count)
        if script.title == "Document tile cache settings in README":  # never titled: the list shows its preview
            demo.conversation(s, t, turns)
        elif script.title == "Tile server memory keeps growing":
            t = demo.conversation(s, t, turns[:1], title=script.title)
            first_turn_end = s.turns[0].end
            t += demo.ms(30, 90)
            demo.compaction(s, t, (
                "## Goal\nFind why `atlas serve` memory grows ~200 MB/h under load.\n\n## Done\n"
                "- tracemalloc showed `server.py:88` (`render_cached`) growing by 398 MiB per 20k requests\n"
                "- replaced the unbounded `functools.lru_cache` on the method with the bounded disk `TileCache`\n\n"
                "## Next\n- add a small in-memory layer if render latency regresses"),
                None, missing_id=demo.hex(), last_summarized=first_turn_end)
            demo.conversation(s, t + demo.ms(40, 200), turns[1:] + [(T.FOLLOWUPS["py_test"][1], _subs_for(script))])
        elif script.title == "Slim down the tile server Docker image":
            t = demo.conversation(s, t, turns[:1], title=script.title)
            demo.turn(s, t, T.CANCELLED_TURN, cancel=True)
        else:
            demo.conversation(s, t, turns, title=script.title, retitle=T.RETITLES.get(script.title, ""))
    a1 = atlas_sessions["Fix flaky LRU eviction test in tile cache"]
    a1.pinned = True

    # atlas: the orphaned run (expired lease, open turn, pending approval) ---------------------------------------
    rename = T.ATLAS_SCRIPTS[11]
    s = demo.session(T.ATLAS, at(11, 20, 7, 31, 4))
    s.project = atlas_project
    t = demo.conversation(s, s.created + demo.ms(10, 30), _with_followups(demo, rename, 0) +
                          [(T.FOLLOWUPS["py_commit"][0], _subs_for(rename))], title=rename.title)
    t = at(11, 20, 8, 58, 40)
    t, turn, run, calls = demo.turn(s, t, T.ORPHAN_TURN, stop_after_call=True)
    assert run is not None
    call = calls[-1].fields["message"]["contents"][-1]["toolCall"]  # type: ignore[index]
    demo.event(run, t + 310, "approval_resolved", "pending", {
        "decisionId": demo.pid("appr_"), "toolCallId": call["id"], "toolName": "bash", "kind": "command",
        "summary": "rm -rf dist/ build/ && python -m build && twine upload --repository internal dist/*"})
    crashed = demo.owner_for(s, t)
    demo.lease(s, crashed, "execution", run.id, run.started, None, heartbeat=at(11, 20, 9, 0, 2))

    # empty session: opened, never used
    demo.session(T.ATLAS, at(11, 19, 20, 4, 51), thinking=None)

    # harbor -------------------------------------------------------------------------------------------------------
    harbor_days = {"Cursor pagination for GET /v1/bookings": (10, 19, 9, 2), "Data race in booking confirmation": (10, 23, 10, 44),
                   "Migration for berth_windows table": (10, 21, 13, 58), "Rate limiter returns 500 instead of 429": (10, 27, 14, 31),
                   "Slow query on vessel arrivals report": (10, 30, 9, 12), "Arrival times stored in server local time": (11, 4, 8, 40),
                   "Structured logging with slog": (11, 6, 13, 3), "Verify webhook signatures": (11, 9, 11, 26),
                   "docker-compose healthcheck never turns healthy": (11, 12, 16, 8)}
    harbor: dict[str, DemoSession] = {}
    for title, when in harbor_days.items():
        script = H[title]
        s = demo.session(T.HARBOR, at(*when))
        s.project = harbor_project
        harbor[title] = s
        t = s.created + demo.ms(8, 60)
        if title == "Cursor pagination for GET /v1/bookings":
            turns = _with_followups(demo, script, 3)
            t = demo.conversation(s, t, turns[:2], title=title, retitle=T.RETITLES[title])
            f1_at = t + demo.ms(120, 300)
            t = demo.conversation(s, f1_at + 20 * MIN, turns[2:])
            fork_session_kind = demo.fork(s, f1_at, "session")
            f_t = demo.conversation(fork_session_kind, f1_at + demo.ms(60, 200), [(T.FORK_SCRIPTS[0], {})])
            first_answer = [e for e in s.entries if e.type == "message" and e.order < s.turns[0].end.order][-1]  # type: ignore[union-attr]
            fork_message_kind = demo.fork(s, at(10, 21, 9, 15), "message", first_answer)
            demo.conversation(fork_message_kind, at(10, 21, 9, 16), [(T.FORK_SCRIPTS[1], {})])
            grandchild = demo.fork(fork_session_kind, max(f_t, at(10, 22, 10, 5)), "session")
            demo.conversation(grandchild, max(f_t, at(10, 22, 10, 5)) + demo.ms(40, 90), [(T.FORK_SCRIPTS[2], {})])
        elif title == "Data race in booking confirmation":
            t = demo.conversation(s, t, _with_followups(demo, script, 0), title=title)
            _paste_turn(demo, s, t)
        elif title == "Migration for berth_windows table":
            t = demo.conversation(s, t, _with_followups(demo, script, 0), title=title)
            _refused_turn(demo, s, t)
        elif title == "Rate limiter returns 500 instead of 429":
            t = demo.conversation(s, t, _with_followups(demo, script, 0), title=title)
            _recovered_turn(demo, s, t)
        else:
            demo.conversation(s, t, _with_followups(demo, script, demo.rng.randint(0, 2)), title=title,
                              retitle=T.RETITLES.get(title, ""))
    harbor["Slow query on vessel arrivals report"].pinned = True

    # harbor: a run stuck after two failed recovery attempts -------------------------------------------------------
    s = demo.session(T.HARBOR, at(11, 20, 10, 38, 12))
    s.project = harbor_project
    t = demo.conversation(s, s.created + demo.ms(10, 40), _with_followups(demo, H["OpenAPI spec for booking endpoints"], 0),
                          title="OpenAPI spec for booking endpoints")
    _stuck_turn(demo, s, at(11, 20, 11, 2, 5))

    # harbor: a run under a live lease (another process is executing it right now) ------------------------------
    s = demo.session(T.HARBOR, at(11, 20, 11, 31, 40))
    s.project = harbor_project
    t = demo.conversation(s, s.created + demo.ms(10, 30), _with_followups(demo, H["Upgrade to Go 1.23 and fix lint findings"], 0),
                          title="Upgrade to Go 1.23 and fix lint findings")
    t, turn, run, _ = demo.turn(s, at(11, 20, 11, 55, 10), T.LIVE_TURN, stop_after_call=True)
    assert run is not None
    demo.lease(s, demo.owner_for(s, t), "execution", run.id, run.started, None, heartbeat=DEMO_NOW_UNIX * 1000 - 2 * SEC,
               expires=LIVE_LEASE_EXPIRES_AT * 1000)

    # the long refactoring session, and three short question-and-answer sessions
    long_session = _long_session(demo)
    long_session.project = harbor_project
    long_session.pinned = True
    for (cwd, script), when in zip(T.QA_SCRIPTS, [(11, 16, 7, 58), (10, 14, 18, 21), (11, 1, 21, 7)], strict=True):
        s = demo.session(cwd, at(*when))
        demo.conversation(s, s.created + demo.ms(5, 20), [(script, {})], title=script.title)

    # notes --------------------------------------------------------------------------------------------------------
    notes_days = {"Weekly summary of meeting notes": (11, 6, 16, 5), "Outline for berth scheduling design doc": (11, 13, 10, 22),
                  "Deduplicate the reading list": (10, 7, 21, 40), "Release notes for atlas 0.9": (11, 11, 15, 2),
                  "Talk outline: caching map tiles": (10, 30, 19, 15), "Translate the deploy checklist for the Shanghai team": (11, 2, 9, 30),
                  "Turn scattered TODOs into a checklist": (11, 17, 18, 44), "Weekly retro notes": (11, 20, 8, 2)}
    for title, when in notes_days.items():
        script = N[title]
        s = demo.session(T.NOTES, at(*when), thinking="low")
        if title == "Deduplicate the reading list":
            s.legacy = True  # written before turns and runs were recorded
        if title in ("Outline for berth scheduling design doc",):
            s.project = harbor_project
        if title in ("Release notes for atlas 0.9", "Talk outline: caching map tiles"):
            s.project = atlas_project
        if title == "Weekly summary of meeting notes":
            s.pinned = True
            demo.cron.append((demo.pid("cron_"), s.id, "Weekly meeting summary", script.user, "0 17 * * 5", 0, "yolo", T.NOTES,
                              "", "", 1, rfc3339(at(11, 6, 16, 52)), rfc3339(at(11, 13, 17, 0, 3)), rfc3339(at(11, 20, 17, 0)), 1,
                              "completed", ""))
        demo.conversation(s, s.created + demo.ms(10, 40), _with_followups(demo, script, 1), title=title,
                          retitle=T.RETITLES.get(title, ""))

    _channel_sessions(demo, harbor_project)


def _paste_turn(demo: DemoBuilder, s: DemoSession, t: int) -> None:
    frames = []
    for n in range(48):
        frames.append(T.RACE_LOG_FRAME.replace("{addr}", f"{0x1a2f30 + n * 64:06x}").replace("{g}", str(21 + n))
                      .replace("{secret}", "s3cr3t-Staging-2026"))
    paste = T.RACE_LOG_HEAD + "".join(frames) + "==================\nFound 48 data race(s)\nexit status 66\n"
    t += demo.ms(200, 900)
    _, turn, _, _ = demo.turn(s, t, T.PASTE_TURN, user_text=paste)
    assert turn is not None
    target = next(e for e in s.entries if e.type == "message" and e.order > turn.start.order)
    trimmed = T.PASTE_OVERRIDE_TRIMMED + "\n\n" + "\n".join(paste.splitlines()[2:42])
    assert turn.ended is not None
    t = turn.ended + demo.ms(30, 80)
    demo.append(s, "content_override", t, {"targetEntryId": target.id, "message": {
        "role": "user", "content": trimmed, "timestamp": target.fields["message"]["timestamp"]},  # type: ignore[index]
        "reason": "The pasted log exceeded the provider's request size limit; kept the first 40 lines.",
        "code": "request_too_large"})
    t += demo.ms(600, 1500)
    t, _, _, _ = demo.turn(s, t, T.FOLLOWUPS["go_commit"][0], subs=_subs_for(T.HARBOR_SCRIPTS[1]))
    t += demo.ms(300, 900)
    demo.append(s, "content_override", t, {"targetEntryId": target.id, "message": {
        "role": "user", "content": T.PASTE_OVERRIDE_REDACTED, "timestamp": target.fields["message"]["timestamp"]},  # type: ignore[index]
        "reason": "Removed by the user: the paste contained a database password.", "code": "manual_redaction"})


def _refused_turn(demo: DemoBuilder, s: DemoSession, t: int) -> None:
    def refuse(result: DemoEntry, ts: int, run: DemoRun | None) -> int:
        assert run is not None
        ts += demo.ms(1.2, 2.5)
        demo.event(run, ts, "model_request", "running", {
            "provider": "anthropic", "error": "400 invalid_request_error: messages.3.content.0: tool_result contains "
            "invalid UTF-8 or unsupported binary data", "refused": True})
        ts += demo.ms(0.05, 0.2)
        msg = dict(cast("dict[str, object]", result.fields["message"]))
        msg["content"] = T.REFUSED_OVERRIDE_TEXT
        msg.pop("isError", None)
        demo.append(s, "content_override", ts, {"targetEntryId": result.id, "message": msg,
                                                "reason": "The provider refused this tool result (400 invalid_request_error: binary PDF bytes).",
                                                "code": "provider_refused"})
        return ts

    demo.turn(s, t + demo.ms(60, 240), T.REFUSED_TURN, hooks={0: refuse})


def _recovered_turn(demo: DemoBuilder, s: DemoSession, t: int) -> None:
    """A run cut off by a server restart and failed by startup recovery; the user then reruns it."""
    t += demo.ms(60, 200)
    t, turn, run, _ = demo.turn(s, t, T.INTERRUPTED_TURN, stop_after_call=True)
    assert turn is not None and run is not None
    epoch_before = len(s.leases) + 1
    demo.lease(s, demo.owner_for(s, run.started), "execution", run.id, run.started, None, heartbeat=t + 3 * SEC)
    rec_at = t + 4 * MIN + demo.ms(5, 30)
    recovery_owner = demo.owner("tui-restart", 49001)
    demo.lease(s, recovery_owner, "recovery", run.id, rec_at, rec_at + 180)
    reason = "server restarted while run was active"
    demo.end_turn(turn, rec_at + 90, "failed", "error")
    run.status = "failed"
    run.finished = rec_at + 120
    run.error = reason
    demo.event(run, rec_at + 120, "recovered", "failed", {"reason": reason, "code": "owner_lost"},
               event_id=f"recovery_{run.id}_failed")
    sec = (rec_at + 120) // 1000
    demo.recoveries.append((run.id, s.id, "completed", "startup", "owner_lost", 1, epoch_before, "", None, sec, sec, sec))
    demo.turn(s, rec_at + 6 * MIN, T.RERUN_TURN)


def _stuck_turn(demo: DemoBuilder, s: DemoSession, t: int) -> None:
    """A run whose owner died; recovery failed twice (the database was locked) and waits to retry."""
    t, turn, run, _ = demo.turn(s, t, T.STUCK_TURN, stop_after_call=True)
    assert run is not None
    demo.lease(s, demo.owner("tui-died", 72004), "execution", run.id, run.started, None, heartbeat=t + 6 * SEC)
    helper = demo.owner("serve-recovery", 72551)
    first = at(11, 20, 11, 3, 1)
    demo.lease(s, helper, "recovery", run.id, first, first + 10_000)
    second = at(11, 20, 11, 40, 5)
    demo.lease(s, helper, "recovery", run.id, second, second + 10_000)
    error = ("recover run " + run.id + ": close open turn: append turn_end: database is locked (5) (SQLITE_BUSY) "
             "after 10s attempt timeout")
    sec = (second + 10_000) // 1000
    demo.recoveries.append((run.id, s.id, "failed", "periodic", "owner_lost", 2, len(s.leases) - 1, error, sec + 2,
                            second // 1000, sec, None))


def _channel_sessions(demo: DemoBuilder, harbor_project: str) -> None:
    wx1 = "wxid_" + "".join(demo.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(14))
    wx2 = "wxid_" + "".join(demo.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(14))
    fs1 = "oc_" + demo.hex(32)
    fs2 = "oc_" + demo.hex(32)
    plans = [
        ("wechat-notes", T.NOTES, ("wechat", wx1), at(11, 6, 9, 41), [0, 40 * MIN, 3 * MIN]),
        ("wechat-release", T.NOTES, ("wechat", wx2), at(11, 20, 11, 20, 3), [0, 27 * MIN]),
        ("feishu-harbor", T.HARBOR, ("feishu", fs1), at(11, 18, 9, 10, 27), [0, 6 * MIN]),
        ("feishu-ops", T.ATLAS, ("feishu", fs2), at(11, 17, 7, 48, 51), [0, 11 * MIN]),
    ]
    for key, cwd, channel, created, gaps in plans:
        s = demo.session(cwd, created, "deepseek" if key.startswith("wechat") else "sonnet", channel=channel, thinking=None)
        if key == "feishu-harbor":
            s.project = harbor_project
        demo.channel_tools.extend((s.id, tool, 1, "2026-11-01 08:00:00") for tool in ("bash", "read_file", "schedule_reminder"))
        t = created + demo.ms(1, 4)
        for n, script in enumerate(T.CHANNEL_SCRIPTS[key]):
            t += gaps[n] if n < len(gaps) else 5 * MIN
            reply_to = ("om_" + demo.hex(32)) if channel[0] == "feishu" else str(demo.rng.randint(10**18, 10**19 - 1))
            files = _CHANNEL_FILES.get((key, n))
            atts = None
            if files:
                atts = [{"id": demo.pid("att_"), "kind": files[0], "filename": files[1], "mimeType": files[2], "size": files[3]}]
            t, turn, run, _ = demo.turn(s, t, script, attachments=atts)
            assert run is not None and run.finished is not None
            if n == 0:
                t += demo.ms(0.5, 2)
                demo.set_title(s, t, script.title)
            _deliveries(demo, s, run, key, n, reply_to, str(atts[0]["id"]) if atts else "")


_CHANNEL_FILES: dict[tuple[str, int], tuple[str, str, str, int]] = {
    ("wechat-notes", 1): ("file", "2026-W45.pdf", "application/pdf", 48213),
    ("wechat-release", 1): ("image", "latency-p99.png", "image/png", 183004),
    ("feishu-harbor", 1): ("file", "nightly-2026-11-18.log", "text/plain", 2291734),
}


def _deliveries(demo: DemoBuilder, s: DemoSession, run: DemoRun, key: str, n: int, reply_to: str, att_id: str) -> None:
    assert run.finished is not None
    done = run.finished
    text = DeliveryOp("send_text", "reply:text:0", "delivered")
    if att_id:
        kind, filename, media_type, size = _CHANNEL_FILES[(key, n)]
        att = demo.attachment(s, run, done, kind, filename, media_type, size, att_id)
    if key == "wechat-notes" and n == 1:
        ops = [text, DeliveryOp("upload_file", f"attachment:{att}:upload", "uncertain", "provider_outcome_unknown", 1, artifact=att, delay_ms=31_000),
               DeliveryOp("send_file", f"attachment:{att}:send", "uncertain", "dependency_uncertain", 0, depends=1, artifact=att, delay_ms=31_050)]
    elif key == "wechat-release" and n == 1:
        ops = [text, DeliveryOp("upload_image", f"attachment:{att}:upload", "retry_wait", "transport_error", 3, artifact=att,
                         next_attempt_ms=NOW_MS + 4 * SEC, delay_ms=NOW_MS - done - 3 * SEC),
               DeliveryOp("send_image", f"attachment:{att}:send", "pending", "", 0, depends=1, artifact=att, delay_ms=0)]
    elif key == "feishu-harbor" and n == 0:
        ops = [text, DeliveryOp("send_card", "reply:card:build-status", "unsupported", "card_not_enabled", 1)]
    elif key == "feishu-harbor" and n == 1:
        ops = [text, DeliveryOp("upload_file", f"attachment:{att}:upload", "failed", "transport_error", 6, artifact=att, delay_ms=95_000),
               DeliveryOp("send_file", f"attachment:{att}:send", "failed", "dependency_failed", 0, depends=1, artifact=att, delay_ms=95_020)]
    elif key == "feishu-ops" and n == 1:
        ops = [DeliveryOp("send_text", "reply:text:0", "failed", "delivery_retries_exhausted", 11,
                   retry_window_ms=done, delay_ms=10 * MIN + 2 * SEC)]
    else:
        ops = [text]
    demo.deliver(s, run, reply_to, ops)


# the long session -----------------------------------------------------------------------------------------------

_TABLES = {"Booking": "bookings", "Berth": "berths", "Vessel": "vessels", "Invoice": "invoices", "Delivery": "webhook_deliveries",
           "Token": "api_tokens", "Event": "audit_events", "Arrival": "arrivals", "Crane": "cranes", "TideWindow": "tide_windows",
           "Declaration": "declarations", "Partner": "partners"}

_EDITS: tuple[tuple[str, str], ...] = (
    ("\t\"database/sql\"\n", "\t\"github.com/jackc/pgx/v5\"\n\t\"github.com/jackc/pgx/v5/pgtype\"\n\t\"github.com/jackc/pgx/v5/pgxpool\"\n"),
    ("\tdb *sql.DB\n", "\tpool *pgxpool.Pool\n"),
    ("\trow := s.db.QueryRowContext(ctx, q, id)", "\trow := s.pool.QueryRow(ctx, q, id)"),
    ("\tvar notes sql.NullString", "\tvar notes pgtype.Text"),
    ("errors.Is(err, sql.ErrNoRows)", "errors.Is(err, pgx.ErrNoRows)"),
    ("\tfor rows.Next() {\n\t\tvar x {E}\n\t\tif err := rows.Scan(&x.ID, &x.Name, &x.UpdatedAt); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\tout = append(out, x)\n\t}",
     "\tout, err := pgx.CollectRows(rows, pgx.RowToStructByName[{E}])"),
    ("\t_, err := s.db.ExecContext(ctx, q, args...)", "\t_, err := s.pool.Exec(ctx, q, args...)"),
    ("\ttx, err := s.db.BeginTx(ctx, nil)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer tx.Rollback()",
     "\treturn pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {"),
    ("func New{E}Store(db *sql.DB) *Store {\n\treturn &Store{db: db}\n}", "func New{E}Store(pool *pgxpool.Pool) *Store {\n\treturn &Store{pool: pool}\n}"),
    ("\tvar closedAt sql.NullTime", "\tvar closedAt pgtype.Timestamptz"),
)

_BUILD_ERRORS: tuple[tuple[str, str, str], ...] = (
    ("internal/{pkg}/{file}:{line}:{col}: cannot use notes (variable of type sql.NullString) as pgtype.Text value in assignment",
     "\tx.Notes = notes", "\tx.Notes = notes.String"),
    ("internal/{pkg}/{file}:{line}:{col}: undefined: sql", "\tif errors.Is(err, sql.ErrNoRows) {", "\tif errors.Is(err, pgx.ErrNoRows) {"),
    ("internal/{pkg}/{file}:{line}:{col}: s.db undefined (type *Store has no field or method db)", "\ts.db.", "\ts.pool."),
    ("internal/{pkg}/{file}:{line}:{col}: \"database/sql\" imported and not used", "\t\"database/sql\"\n", ""),
    ("internal/{pkg}/{file}:{line}:{col}: not enough return values\n\thave (error)\n\twant ([]{E}, error)",
     "\t\treturn err", "\t\treturn nil, err"),
    ("internal/{pkg}/{file}:{line}:{col}: cannot use s.pool (variable of type *pgxpool.Pool) as *sql.DB value in argument to audit.Record",
     "\taudit.Record(ctx, s.pool,", "\taudit.Record(ctx, s.audit,"),
)

_THINK: tuple[str, ...] = (
    "{file} still takes a *sql.DB and uses sql.Null* for optional columns. Swap to pgxpool, pgtype for the nullable "
    "columns, and pgx.CollectRows for the list queries. Exported signatures stay the same.",
    "Same pattern as the previous files. Check the callers of New{E}Store first so the constructor change doesn't break "
    "wiring in cmd/harbor-api.",
    "This file has the transaction helper. pgx.BeginTxFunc commits on nil and rolls back on error, so the manual "
    "Begin/defer Rollback/Commit dance goes away.",
    "Watch for sql.ErrNoRows comparisons: with pgx they must become pgx.ErrNoRows, wrapped into ErrNotFound so the "
    "handlers keep their 404 mapping.",
    "{file} scans timestamps into sql.NullTime. pgtype.Timestamptz has Valid too, so the conversion is mechanical.",
)

# second pass over converted files: (prompt, [(old, new)], answer)
_SECOND_PASS: tuple[tuple[str, tuple[tuple[str, str], ...], str], ...] = (
    ("Second pass on internal/{pkg}/{file}: drop the leftover sql.Null* helpers and use pgtype directly.",
     (("\tvar notes sql.NullString", "\tvar notes pgtype.Text"), ("\tvar closedAt sql.NullTime", "\tvar closedAt pgtype.Timestamptz"),
      ("sql.NullString{String: x.Notes, Valid: x.Notes != \"\"}", "pgtype.Text{String: x.Notes, Valid: x.Notes != \"\"}")),
     "No `sql.Null*` left in {pkg}/{file}; nullable columns are `pgtype.Text` and `pgtype.Timestamptz`, and `database/sql` is no longer imported there."),
    ("Now internal/{pkg}/{file} again: switch its transactions to pgx.BeginTxFunc.",
     (("\ttx, err := s.pool.Begin(ctx)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer tx.Rollback(ctx)",
       "\treturn pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {"),
      ("\treturn tx.Commit(ctx)\n}", "\t\treturn nil\n\t})\n}")),
     "`Close` in {pkg}/{file} now runs inside `pgx.BeginTxFunc`: commit on nil, rollback on error, no manual `defer Rollback`."),
    ("Let's tighten internal/{pkg}/{file}: context timeouts on every query, like we did in booking.",
     (("func (s *Store) Get(ctx context.Context, id int64) ({E}, error) {\n",
       "func (s *Store) Get(ctx context.Context, id int64) ({E}, error) {\n\tctx, cancel := context.WithTimeout(ctx, s.queryTimeout)\n\tdefer cancel()\n"),
      ("func (s *Store) List(ctx context.Context, limit int) ([]{E}, error) {\n",
       "func (s *Store) List(ctx context.Context, limit int) ([]{E}, error) {\n\tctx, cancel := context.WithTimeout(ctx, s.queryTimeout)\n\tdefer cancel()\n")),
     "Every query in {pkg}/{file} now runs under `s.queryTimeout` (default 5 s, from `DB_QUERY_TIMEOUT`), same as booking."),
    ("Revisit {pkg}/{file}: use named args (pgx.NamedArgs) for the INSERT.",
     (("VALUES ($1, $2, $3) RETURNING id`", "VALUES (@name, @notes, @updated_at) RETURNING id`"),
      ("s.pool.QueryRow(ctx, q, x.Name,", "s.pool.QueryRow(ctx, q, pgx.NamedArgs{\"name\": x.Name, \"notes\":")),
     "The INSERT in {pkg}/{file} uses `pgx.NamedArgs` now, so the column list and the values can't drift apart."),
)

_KIND_THINK: dict[str, tuple[str, ...]] = {
    "tests": ("The store moved to pgx but the test helper still opens a *sql.DB; testdb.Pool gives a pgxpool.Pool on the same "
              "template database. The assertions on sql.ErrNoRows need to become ErrNotFound.",
              "Run the package tests first to see whether it's the fixture or the assertions."),
    "grep": ("A repo-wide search is cheaper than waiting for the compiler to find them one package at a time.",
             "Search for all three patterns at once: sql.ErrNoRows, the database/sql import, and sql.Null types."),
    "question": ("Answer from what we've already established in this migration; no need to touch code.",
                 "This is a design question about pgx behaviour; answer with the concrete setting we should use."),
    "lint": ("Run golangci-lint with the repo config over internal/ only; cmd/ hasn't been converted yet.",),
    "commit": ("Check what changed before committing; the message follows the pkg: summary convention.",),
    "second": ("This file is already on pgx; this pass only changes what the user asked for. Read it first to find the spots.",
               "Small focused change on an already converted file. Build and test after."),
}


def _converted(source: str) -> str:
    """The same Go file after the first pass (pgx, but sql.Null* and manual transactions still there)."""
    for old, new in (("\t\"database/sql\"\n", "\t\"database/sql\"\n\n\t\"github.com/jackc/pgx/v5\"\n\t\"github.com/jackc/pgx/v5/pgxpool\"\n"),
                     ("db *sql.DB", "pool *pgxpool.Pool"), ("&Store{db: db}", "&Store{pool: pool}"),
                     ("s.db.QueryRowContext", "s.pool.QueryRow"), ("s.db.QueryContext", "s.pool.Query"),
                     ("s.db.BeginTx(ctx, nil)", "s.pool.Begin(ctx)"), ("defer tx.Rollback()", "defer tx.Rollback(ctx)"),
                     ("tx.ExecContext", "tx.Exec"), ("tx.Commit()", "tx.Commit(ctx)"), ("sql.ErrNoRows", "pgx.ErrNoRows")):
        source = source.replace(old, new)
    return source


def _go_source(pkg: str, entity: str, file: str) -> str:
    """A plausible database/sql-era Go store file (what read_file returned before the conversion)."""
    table = _TABLES[entity]
    lower = entity[0].lower() + entity[1:]
    if file.endswith("_test.go"):
        return (f"package {pkg}\n\nimport (\n\t\"context\"\n\t\"database/sql\"\n\t\"errors\"\n\t\"testing\"\n\n"
                f"\t\"example.com/harbor-api/internal/testdb\"\n)\n\n"
                f"func Test{entity}Store_Get_NotFound(t *testing.T) {{\n\tdb := testdb.Open(t)\n"
                f"\tstore := New{entity}Store(db)\n\t_, err := store.Get(context.Background(), 42)\n"
                f"\tif !errors.Is(err, sql.ErrNoRows) {{\n\t\tt.Fatalf(\"expected sql.ErrNoRows, got: %v\", err)\n\t}}\n}}\n\n"
                f"func Test{entity}Store_CreateAndList(t *testing.T) {{\n\tdb := testdb.Open(t)\n\tstore := New{entity}Store(db)\n"
                f"\tctx := context.Background()\n\tfor i := 0; i < 3; i++ {{\n"
                f"\t\tif _, err := store.Create(ctx, {entity}{{Name: fmt.Sprintf(\"{lower}-%d\", i)}}); err != nil {{\n"
                f"\t\t\tt.Fatal(err)\n\t\t}}\n\t}}\n\tgot, err := store.List(ctx, 10)\n\tif err != nil {{\n\t\tt.Fatal(err)\n\t}}\n"
                f"\tif len(got) != 3 {{\n\t\tt.Fatalf(\"got %d {table}, want 3\", len(got))\n\t}}\n}}\n")
    return (
        f"package {pkg}\n\nimport (\n\t\"context\"\n\t\"database/sql\"\n\t\"errors\"\n\t\"fmt\"\n\t\"time\"\n)\n\n"
        f"// ErrNotFound is returned when no {lower} has the requested id.\nvar ErrNotFound = errors.New(\"{lower} not found\")\n\n"
        f"type Store struct {{\n\tdb *sql.DB\n}}\n\nfunc New{entity}Store(db *sql.DB) *Store {{\n\treturn &Store{{db: db}}\n}}\n\n"
        f"func (s *Store) Get(ctx context.Context, id int64) ({entity}, error) {{\n"
        f"\tconst q = `SELECT id, name, notes, closed_at, updated_at FROM {table} WHERE id = $1`\n"
        f"\trow := s.db.QueryRowContext(ctx, q, id)\n\tvar x {entity}\n\tvar notes sql.NullString\n\tvar closedAt sql.NullTime\n"
        f"\tif err := row.Scan(&x.ID, &x.Name, &notes, &closedAt, &x.UpdatedAt); err != nil {{\n"
        f"\t\tif errors.Is(err, sql.ErrNoRows) {{\n\t\t\treturn {entity}{{}}, ErrNotFound\n\t\t}}\n"
        f"\t\treturn {entity}{{}}, fmt.Errorf(\"get {lower} %d: %w\", id, err)\n\t}}\n"
        f"\tx.Notes = notes.String\n\tif closedAt.Valid {{\n\t\tx.ClosedAt = &closedAt.Time\n\t}}\n\treturn x, nil\n}}\n\n"
        f"func (s *Store) List(ctx context.Context, limit int) ([]{entity}, error) {{\n"
        f"\tconst q = `SELECT id, name, updated_at FROM {table} ORDER BY updated_at DESC LIMIT $1`\n"
        f"\trows, err := s.db.QueryContext(ctx, q, limit)\n\tif err != nil {{\n\t\treturn nil, fmt.Errorf(\"list {table}: %w\", err)\n\t}}\n"
        f"\tdefer rows.Close()\n\tvar out []{entity}\n"
        f"\tfor rows.Next() {{\n\t\tvar x {entity}\n\t\tif err := rows.Scan(&x.ID, &x.Name, &x.UpdatedAt); err != nil {{\n"
        f"\t\t\treturn nil, err\n\t\t}}\n\t\tout = append(out, x)\n\t}}\n\treturn out, rows.Err()\n}}\n\n"
        f"func (s *Store) Create(ctx context.Context, x {entity}) (int64, error) {{\n"
        f"\tconst q = `INSERT INTO {table} (name, notes, updated_at) VALUES ($1, $2, $3) RETURNING id`\n"
        f"\tvar id int64\n\terr := s.db.QueryRowContext(ctx, q, x.Name, sql.NullString{{String: x.Notes, Valid: x.Notes != \"\"}}, time.Now().UTC()).Scan(&id)\n"
        f"\tif err != nil {{\n\t\treturn 0, fmt.Errorf(\"create {lower}: %w\", err)\n\t}}\n\treturn id, nil\n}}\n\n"
        f"func (s *Store) Close(ctx context.Context, id int64, at time.Time) error {{\n"
        f"\ttx, err := s.db.BeginTx(ctx, nil)\n\tif err != nil {{\n\t\treturn err\n\t}}\n\tdefer tx.Rollback()\n"
        f"\tres, err := tx.ExecContext(ctx, `UPDATE {table} SET closed_at = $2, updated_at = $2 WHERE id = $1 AND closed_at IS NULL`, id, at)\n"
        f"\tif err != nil {{\n\t\treturn fmt.Errorf(\"close {lower} %d: %w\", id, err)\n\t}}\n"
        f"\tif n, _ := res.RowsAffected(); n == 0 {{\n\t\treturn ErrNotFound\n\t}}\n"
        f"\tif err := audit.Record(ctx, tx, \"{lower}.closed\", id); err != nil {{\n\t\treturn err\n\t}}\n\treturn tx.Commit()\n}}\n"
    )


def _numbered(source: str) -> str:
    """read_file output: the file with right-aligned line numbers."""
    return "\n".join(f"{n:>4}\t{line}" for n, line in enumerate(source.rstrip("\n").split("\n"), start=1))


def _long_script(demo: DemoBuilder, kind: str, pkg: str, entity: str, file: str, second_pass: bool) -> T.Script:
    rng = demo.rng
    path = f"internal/{pkg}/{file}"
    values = {"pkg": pkg, "file": file, "E": entity, "entity": entity}

    def fill(text: str) -> str:
        for k, v in values.items():
            text = text.replace("{" + k + "}", v)
        return text

    module = "example.com/harbor-api"
    calls: list[T.Call] = []
    if kind == "convert" and second_pass:
        prompt, edits, answer = rng.choice(_SECOND_PASS)
        user = fill(prompt)
        calls.append(T.read(path, _numbered(_converted(_go_source(pkg, entity, file)))))
        for old, new in edits:
            calls.append(T.edit(path, fill(old), fill(new)))
        calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", "(no output)"))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(answer)
    elif kind == "convert":
        user = fill(rng.choice(T.LONG_USER_PROMPTS["convert"]))
        calls.append(T.read(path, _numbered(_go_source(pkg, entity, file)), say=fill(rng.choice(("Reading {file} first.", "Let me open {file}.", "")))))
        if rng.random() < 0.5:
            hits = "\n".join(f"{p}:{rng.randint(20, 240)}:\t{pkg}.New{entity}Store(db)" for p in
                             rng.sample(["cmd/harbor-api/main.go", "cmd/harbor-migrate/main.go", f"internal/{pkg}/handler_test.go",
                                         "internal/http/routes.go", "internal/worker/confirm.go"], 2))
            calls.append(T.grep(f"New{entity}Store", ".", hits, parallel=True))
        if rng.random() < 0.35:
            caller = rng.choice(["cmd/harbor-api/main.go", "internal/http/routes.go"])
            calls.append(T.read(caller, f"\tdb, err := sql.Open(\"postgres\", cfg.DatabaseURL)\n\t...\n\t{pkg}Store := {pkg}.New{entity}Store(db)\n"))
        for old, new in rng.sample(_EDITS, rng.randint(2, 6)):
            calls.append(T.edit(path, fill(old), fill(new)))
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            msg, old, new = rng.choice(_BUILD_ERRORS)
            err = fill(msg).replace("{line}", str(rng.randint(12, 210))).replace("{col}", str(rng.randint(2, 40)))
            calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", f"# {module}/internal/{pkg}\n{err}\n[exit status 1]", error=True))
            calls.append(T.edit(path, fill(old), fill(new), say=rng.choice(("", "Fixing that.", "One more leftover from database/sql."))))
        calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", "(no output)"))
        if rng.random() < 0.2:
            calls.append(T.sh(f"go test ./internal/{pkg}/...", (
                f"--- FAIL: Test{entity}Store_Get_NotFound (0.02s)\n    store_test.go:{rng.randint(30, 140)}: expected sql.ErrNoRows, got: "
                f"{entity[0].lower() + entity[1:]} not found\nFAIL\nFAIL\t{module}/internal/{pkg}\t{rng.uniform(0.1, 0.9):.3f}s\n[exit status 1]"),
                error=True))
            calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tif !errors.Is(err, sql.ErrNoRows) {", "\tif !errors.Is(err, ErrNotFound) {"))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(rng.choice(T.LONG_ANSWERS["convert"]))
    elif kind == "tests":
        user = fill(rng.choice(T.LONG_USER_PROMPTS["tests"]))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", (
            f"--- FAIL: Test{entity}Store_List (0.04s)\n    store_test.go:{rng.randint(30, 140)}: open test pool: "
            f"cannot use db (variable of type *sql.DB) as *pgxpool.Pool\nFAIL\t{module}/internal/{pkg} [build failed]\n[exit status 1]"), error=True))
        calls.append(T.read(f"internal/{pkg}/store_test.go", _go_source(pkg, entity, "store_test.go")))
        calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tdb := testdb.Open(t)", "\tdb := testdb.Pool(t)"))
        calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tif !errors.Is(err, sql.ErrNoRows) {", "\tif !errors.Is(err, ErrNotFound) {", parallel=True))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(rng.choice(T.LONG_ANSWERS["tests"]))
    elif kind == "grep":
        user = rng.choice(T.LONG_USER_PROMPTS["grep"])
        pattern = "sql\\.ErrNoRows|\"database/sql\"|sql\\.Null"
        leftovers = ("if errors.Is(err, sql.ErrNoRows) {", "\"database/sql\"", "var ts sql.NullTime")
        grep_hits = []
        for p, _, fs in rng.sample(T.LONG_PACKAGES, 3):
            grep_hits.append(f"internal/{p}/{fs[0]}:{rng.randint(40, 200)}:\t{rng.choice(leftovers)}")
        calls.append(T.grep(pattern, "internal/", "\n".join(grep_hits)))
        fixes = {"if errors.Is(err, sql.ErrNoRows) {": ("sql.ErrNoRows", "pgx.ErrNoRows"),
                 "\"database/sql\"": ("\t\"database/sql\"\n", ""), "var ts sql.NullTime": ("sql.NullTime", "pgtype.Timestamptz")}
        for hit in grep_hits:
            hpath, _, rest = hit.split(":", 2)
            old, new = fixes[rest.split("\t", 1)[1]]
            calls.append(T.edit(hpath, old, new, parallel=len(calls) > 1))
        calls.append(T.sh("go build ./...", "(no output)"))
        calls.append(T.grep(pattern, "internal/", "No matches found."))
        answer = rng.choice(T.LONG_ANSWERS["grep"])
    elif kind == "question":
        q = rng.randrange(len(T.LONG_USER_PROMPTS["question"]))
        user = T.LONG_USER_PROMPTS["question"][q]
        answer = T.LONG_ANSWERS["question"][q]
    elif kind == "lint":
        user = rng.choice(T.LONG_USER_PROMPTS["lint"])
        found = rng.randint(0, 2)
        if found:
            lines = [f"internal/{pkg}/{file}:{rng.randint(10, 200)}:{rng.randint(2, 30)}: Error return value of `rows.Close` is not checked (errcheck)",
                     f"internal/{pkg}/{file}:{rng.randint(10, 200)}:{rng.randint(2, 30)}: shadow: declaration of \"err\" shadows declaration (govet)"][:found]
            calls.append(T.sh("golangci-lint run ./internal/...", "\n".join(lines) + f"\n{found} issues.\n[exit status 1]", error=True))
            calls.append(T.edit(path, "\tdefer rows.Close()", "\tdefer rows.Close() // pgx: Close has no error; Err() is checked below"))
        calls.append(T.sh("golangci-lint run ./internal/...", "(no output)"))
        answer = rng.choice(T.LONG_ANSWERS["lint"])
    else:  # commit
        user = fill(rng.choice(T.LONG_USER_PROMPTS["commit"]))
        n_files = rng.randint(2, 5)
        calls.append(T.sh("git status --short", "\n".join(f" M internal/{pkg}/{f}" for f in
                                                          [f for p, _, fs in T.LONG_PACKAGES if p == pkg for f in fs][:n_files])))
        calls.append(T.sh(f"git commit -am \"{pkg}: move store to pgx v5\"",
                          f"[refactor/pgx-v5 {demo.hex(7)}] {pkg}: move store to pgx v5\n {n_files} files changed, "
                          f"{rng.randint(40, 220)} insertions(+), {rng.randint(30, 180)} deletions(-)"))
        answer = fill(rng.choice(T.LONG_ANSWERS["commit"]))
    if kind == "convert":
        think = fill(rng.choice(_KIND_THINK["second"] if second_pass else _THINK))
    else:
        think = fill(rng.choice(_KIND_THINK[kind]))
    return T.Script("", user, think, tuple(calls), answer)


def _long_session(demo: DemoBuilder) -> DemoSession:
    rng = demo.rng
    s = demo.session(T.HARBOR, at(11, 16, 8, 31, 12), thinking="high")
    files = [(p, e, f) for p, e, fs in T.LONG_PACKAGES for f in fs if not f.endswith("_test.go")]
    cursor = 0
    t = s.created + demo.ms(20, 60)
    day_end = at(11, 16, 18, 30)
    done: list[str] = []
    since_commit = 0
    n = 0
    failed_done = False
    since_compaction = 0
    while len(s.entries) < 5200:
        if t > day_end:
            next_day = (t // DAY + 1) * DAY
            t = next_day + 8 * HOUR + demo.ms(15 * 60, 50 * 60)
            day_end = next_day + 18 * HOUR + 30 * MIN
        pkg, entity, file = files[cursor % len(files)]
        r = rng.random()
        if since_commit >= 3 and r < 0.22:
            kind = "commit"
        elif r < 0.72:
            kind = "convert"
        elif r < 0.82:
            kind = "tests"
        elif r < 0.88:
            kind = "grep"
        elif r < 0.94:
            kind = "question"
        else:
            kind = "lint"
        script = _long_script(demo, kind, pkg, entity, file, cursor >= len(files))
        if n == 0:
            script = T.Script("", "We're moving harbor-api from database/sql + lib/pq to pgx v5 (see docs/adr/0007). "
                              "Start with internal/booking/store.go; keep every exported signature the same so handlers don't change.",
                              script.think, script.calls, script.answer)
        if n == 131 and not failed_done:
            # the provider was overloaded: the run fails, then the same intent is retried as attempt 2
            failed_done = True
            intent = demo.pid("intent_")
            run = demo.start_run(s, t, intent, 1, "", script.user)
            turn_id = demo.pid("turn_")
            start = demo.append(s, "turn_start", t, {"turnId": turn_id, "intentId": intent, "runId": run.id, "attempt": 1})
            tr = DemoTurn(turn_id, s, intent, run.id, start, t)
            s.turns.append(tr)
            demo.event(run, t, "run_started", "running", {"turnId": turn_id, "intentId": intent, "attempt": 1})
            demo.user(s, t + 120, script.user)
            t += demo.ms(20, 40)
            error = "provider error: 529 overloaded_error: Overloaded"
            demo.event(run, t, "model_request", "running", {"provider": "anthropic", "error": error, "attempts": 3})
            demo.end_turn(tr, t + 50, "failed", "error")
            demo.finish_run(run, t + 60, "failed", error=error, error_info={"code": "overloaded_error", "status": 529, "retryable": True})
            t += demo.ms(40, 90)
            t, _, _, _ = demo.turn(s, t, script, intent_id=intent, attempt=2, retry_of=run.id)
        else:
            t, _, _, _ = demo.turn(s, t, script)
        if n == 0:
            demo.set_title(s, t + demo.ms(0.5, 2), T.LONG_TITLE)
        if n == 64:
            demo.set_title(s, t + demo.ms(10, 40), T.LONG_RETITLE, "manual")
        if n == 96:
            demo.append(s, "thinking_level_change", t + demo.ms(5, 15), {"thinkingLevel": "medium"})
        if kind == "convert":
            cursor += 1
            done.append(f"internal/{pkg}/{file}")
            since_commit += 1
        elif kind == "commit":
            since_commit = 0
        n += 1
        t += demo.ms(40, 420)
        since_compaction += 1
        if s.ctx > 140_000 or since_compaction >= 55:  # automatic near the window, or the user's /compact
            since_compaction = 0
            user_msgs = [tr.start for tr in s.turns[-3:]]
            first_kept = s.entries[s.entries.index(user_msgs[0]) + 1]
            if first_kept.type != "message":
                first_kept = next(e for e in s.entries[s.entries.index(user_msgs[0]):] if e.type == "message")
            packages_done = sorted({d.split("/")[1] for d in done})
            summary = (
                "## Goal\nMigrate harbor-api's store layer from database/sql + lib/pq to pgx v5 and pgxpool (ADR 0007), "
                "keeping every exported signature unchanged.\n\n"
                f"## Progress\n- {len(done)} file conversions so far; packages touched: {', '.join(packages_done)}\n"
                f"- last file: {done[-1] if done else 'none'}\n\n"
                "## Decisions\n- nullable columns use pgtype (Text, Timestamptz, Int8)\n"
                "- pgx.ErrNoRows is wrapped into each package's ErrNotFound\n"
                "- default_query_exec_mode=exec because PgBouncer runs in transaction mode; pool_max_conns=20\n"
                "- transactions use pgx.BeginTxFunc; serializable retries check SQLSTATE 40001\n\n"
                "## Next\n- continue with the remaining store files, then the test helpers (testdb.Pool)"
            )
            demo.compaction(s, t, summary, first_kept)
            t += demo.ms(2, 6)
    return s


