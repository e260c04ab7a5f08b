"""What happens in the demo session directory: the sessions, their conversations and their troubles.

Every function here appends to a :class:`store.demo.builder.DemoBuilder`; nothing touches a database. The
order of calls fixes the random stream, so keep it stable (or bump ``DEMO_VERSION``) when editing.
"""

from __future__ import annotations

import re
from typing import cast

from store.demo import text as T
from store.demo.builder import DemoBuilder
from store.demo.long_session import long_session as make_long_session
from store.demo.model import (
    DEMO_NOW_UNIX,
    LIVE_LEASE_EXPIRES_AT,
    MIN,
    NOW_MS,
    SEC,
    DeliveryOp,
    DemoEntry,
    DemoRun,
    DemoSession,
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
    long_session = make_long_session(demo)
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
